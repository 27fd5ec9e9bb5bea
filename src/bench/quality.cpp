// Runs an item's tests on produced code, cut off from the network, and measures edit similarity.
#include "editspec/clock.h"
#include "editspec/quality.h"

#include <sched.h>
#include <signal.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>
#include <fcntl.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <thread>
#include <vector>

namespace editspec {

namespace {

// what the child reports through the close-on-exec pipe when it fails before exec
struct child_failure {
    int stage; // 1 = network namespace, 2 = exec
    int err;
};

std::string read_tail(const std::string & path, size_t max_bytes) {
    std::ifstream f(path, std::ios::binary);
    std::stringstream ss;
    ss << f.rdbuf();
    std::string s = ss.str();
    return s.size() > max_bytes ? "..." + s.substr(s.size() - max_bytes) : s;
}

// a fresh temporary folder holding prog.py = code + tests; "" with *error on failure
std::string write_program(const std::string & code, const std::string & tests, std::string * error) {
    namespace fs = std::filesystem;
    std::string tmpl = (fs::temp_directory_path() / "editspec-test-XXXXXX").string();
    std::vector<char> dir_buf(tmpl.begin(), tmpl.end());
    dir_buf.push_back('\0');
    if (!mkdtemp(dir_buf.data())) {
        *error = "cannot create a temporary folder under " + fs::temp_directory_path().string() + ": " + strerror(errno);
        return "";
    }
    const std::string dir = dir_buf.data();
    chmod(dir.c_str(), 0755); // readable by the unmapped user of a user namespace
    const std::string prog = dir + "/prog.py";
    std::ofstream f(prog, std::ios::binary);
    f << code;
    if (!code.empty() && code.back() != '\n') f << "\n";
    f << "\n" << tests << "\n";
    f.close();
    if (!f) {
        *error = "cannot write " + prog;
        fs::remove_all(dir);
        return "";
    }
    chmod(prog.c_str(), 0644);
    return dir;
}

// the child: stdin /dev/null, stdout and stderr to log_fd, no network, memory and CPU limits, then
// python; reports a failure before exec through errpipe
[[noreturn]] void run_child(const std::string & dir, char * const * argv, int null_fd, int log_fd, int errpipe,
                            bool no_network, rlim_t mem, rlim_t cpu) {
    setpgid(0, 0);
    dup2(null_fd, 0);
    dup2(log_fd, 1);
    dup2(log_fd, 2);
    if (no_network && unshare(CLONE_NEWNET) != 0 && unshare(CLONE_NEWUSER | CLONE_NEWNET) != 0) {
        child_failure f = {1, errno};
        (void) !write(errpipe, &f, sizeof(f));
        _exit(127);
    }
    struct rlimit rl_mem = {mem, mem};
    struct rlimit rl_cpu = {cpu, cpu};
    setrlimit(RLIMIT_AS, &rl_mem);
    setrlimit(RLIMIT_CPU, &rl_cpu);
    if (chdir(dir.c_str()) != 0) _exit(127);
    execvp(argv[0], argv);
    child_failure f = {2, errno};
    (void) !write(errpipe, &f, sizeof(f));
    _exit(127);
}

// waits for the child, killing its process group after timeout_s; true when it timed out
bool wait_child(pid_t pid, double timeout_s, std::chrono::steady_clock::time_point t0, int & status) {
    bool timed_out = false;
    while (waitpid(pid, &status, WNOHANG) != pid) {
        const double ms = ms_since(t0);
        if (ms > timeout_s * 1000.0) {
            timed_out = true;
            kill(-pid, SIGKILL);
            kill(pid, SIGKILL);
            waitpid(pid, &status, 0);
            break;
        }
        std::this_thread::sleep_for(std::chrono::milliseconds(2));
    }
    kill(-pid, SIGKILL); // whatever the program left running
    return timed_out;
}

} // namespace

test_outcome run_python_tests(const std::string & code, const std::string & tests, const test_options & o) {
    test_outcome out;
    const std::string dir = write_program(code, tests, &out.error);
    if (dir.empty()) {
        return out;
    }
    const std::string log = dir + "/output.txt";
    const int log_fd = open(log.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    const int null_fd = open("/dev/null", O_RDONLY | O_CLOEXEC);
    int errpipe[2] = {-1, -1};
    if (log_fd < 0 || null_fd < 0 || pipe2(errpipe, O_CLOEXEC) != 0) {
        out.error = std::string("cannot set up the test process: ") + strerror(errno);
        if (log_fd >= 0) close(log_fd);
        if (null_fd >= 0) close(null_fd);
        std::filesystem::remove_all(dir);
        return out;
    }
    // everything the child needs, built before fork: after it only system calls
    std::vector<std::string> args = {o.python, "-I", "-B", dir + "/prog.py"};
    std::vector<char *> argv;
    for (std::string & a : args) argv.push_back(a.data());
    argv.push_back(nullptr);
    const rlim_t mem = (rlim_t) std::max<long>(o.memory_mb, 64) << 20;
    const rlim_t cpu = (rlim_t) std::max(1.0, o.timeout_s + 1.0);

    const auto t0 = std::chrono::steady_clock::now();
    const pid_t pid = fork();
    if (pid == 0) {
        run_child(dir, argv.data(), null_fd, log_fd, errpipe[1], o.no_network, mem, cpu);
    }
    close(errpipe[1]);
    close(log_fd);
    close(null_fd);
    if (pid < 0) {
        out.error = std::string("fork failed: ") + strerror(errno);
        close(errpipe[0]);
        std::filesystem::remove_all(dir);
        return out;
    }
    // the pipe closes at exec (success) or carries why the child stopped before it
    child_failure f = {0, 0};
    const ssize_t n = read(errpipe[0], &f, sizeof(f));
    close(errpipe[0]);
    int status = 0;
    out.timed_out = wait_child(pid, o.timeout_s, t0, status);
    out.ms = ms_since(t0);

    if (n == (ssize_t) sizeof(f) && f.stage != 0) {
        out.error = f.stage == 1 ? std::string("cannot cut the tests off the network (unshare: ") + strerror(f.err) +
                                       "); pass no_network = false (bench: --tests-allow-network) to run them anyway"
                                 : "cannot run '" + o.python + "': " + strerror(f.err);
        std::filesystem::remove_all(dir);
        return out;
    }
    out.ran = true;
    if (WIFEXITED(status)) out.exit_code = WEXITSTATUS(status);
    else if (WIFSIGNALED(status)) out.exit_code = 128 + WTERMSIG(status);
    out.passed = !out.timed_out && WIFEXITED(status) && WEXITSTATUS(status) == 0;
    out.error = read_tail(log, 1500);
    std::filesystem::remove_all(dir);
    return out;
}

double edit_similarity(const std::string & a, const std::string & b) {
    if (a.empty() && b.empty()) return 1.0;
    // two rows of the Levenshtein table over bytes
    std::vector<int32_t> prev(b.size() + 1), cur(b.size() + 1);
    for (size_t j = 0; j <= b.size(); j++) prev[j] = (int32_t) j;
    for (size_t i = 1; i <= a.size(); i++) {
        cur[0] = (int32_t) i;
        for (size_t j = 1; j <= b.size(); j++) {
            const int32_t sub = prev[j - 1] + (a[i - 1] == b[j - 1] ? 0 : 1);
            cur[j] = std::min({sub, prev[j] + 1, cur[j - 1] + 1});
        }
        std::swap(prev, cur);
    }
    return 1.0 - (double) prev[b.size()] / (double) std::max(a.size(), b.size());
}

} // namespace editspec
