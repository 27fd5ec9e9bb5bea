// A model split over two RPC workers (editspec rpc-server on loopback) decodes the same tokens as
// the same model in one process: greedy autoregressive and speculative, on several weight types;
// the workers' own logs show they received the layers' weights and computed every pass.
// A worker that is not there is a clear error, not an abort.
#include "common/test-util.h"
#include "editspec/decoder.h"
#include "editspec/rpc.h"

#include <gtest/gtest.h>

#include "ggml-cpu.h"
#include "gguf.h"

#include <chrono>
#include <cstring>
#include <fcntl.h>
#include <filesystem>
#include <fstream>
#include <csignal>
#include <random>
#include <spawn.h>
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>
#include <thread>

extern char ** environ;

using namespace editspec;

namespace {

// `editspec rpc-server -t 1` on a free loopback port, killed at scope exit. Its stderr goes to a
// file, with ggml's RPC server logging each command it serves (GGML_RPC_DEBUG): what the worker
// itself did, not what the main process believes it sent
struct worker_process {
    pid_t pid = -1;
    std::string endpoint;
    test::temp_dir dir;
    std::string log;

    worker_process() {
        log = (dir.path / "worker.log").string();
        std::vector<std::string> env = {"GGML_RPC_DEBUG=1", "EDITSPEC_LOG=debug"};
        for (char ** e = environ; *e; e++) {
            if (strncmp(*e, "GGML_RPC_DEBUG=", 15) != 0 && strncmp(*e, "EDITSPEC_LOG=", 13) != 0) env.push_back(*e);
        }
        std::vector<char *> envp;
        for (std::string & e : env) envp.push_back(e.data());
        envp.push_back(nullptr);
        posix_spawn_file_actions_t fa;
        posix_spawn_file_actions_init(&fa);
        posix_spawn_file_actions_addopen(&fa, 2, log.c_str(), O_WRONLY | O_CREAT | O_APPEND, 0644);
        std::mt19937 rng(std::random_device{}());
        for (int attempt = 0; attempt < 5 && pid < 0; attempt++) {
            const int port = 20000 + (int) (rng() % 20000);
            std::vector<std::string> args = {EDITSPEC_BIN, "rpc-server", "-t", "1", "-p", std::to_string(port)};
            std::vector<char *> argv;
            for (std::string & a : args) argv.push_back(a.data());
            argv.push_back(nullptr);
            if (posix_spawn(&pid, argv[0], &fa, nullptr, argv.data(), envp.data()) != 0) pid = -1;
            endpoint = "127.0.0.1:" + std::to_string(port);
            if (pid > 0 && !wait_up()) stop();
        }
        posix_spawn_file_actions_destroy(&fa);
    }
    ~worker_process() { stop(); }
    // the log's length now: what the worker does from here on is read from this offset
    size_t log_size() const {
        std::error_code ec;
        const auto n = std::filesystem::file_size(log, ec);
        return ec ? 0 : (size_t) n;
    }
    struct served {
        int64_t weight_bytes = 0; // tensor data received before its first graph computation
        int64_t computes = 0;     // graphs computed
    };
    // what the worker served since the log's offset `from`
    served since(size_t from) const {
        std::ifstream f(log);
        f.seekg((std::streamoff) from);
        served sv;
        std::string line;
        while (std::getline(f, line)) {
            if (line.rfind("[graph_compute]", 0) == 0 || line.rfind("[graph_recompute]", 0) == 0) sv.computes++;
            const size_t at = line.find(", size: ");
            if (line.rfind("[set_tensor]", 0) == 0 && at != std::string::npos && sv.computes == 0) {
                sv.weight_bytes += std::stoll(line.substr(at + 8));
            }
        }
        return sv;
    }
    void stop() {
        if (pid > 0) {
            kill(pid, SIGKILL);
            waitpid(pid, nullptr, 0);
            pid = -1;
        }
    }
    // up when its port takes a connection
    bool wait_up() {
        const int port = std::stoi(endpoint.substr(endpoint.rfind(':') + 1));
        for (int i = 0; i < 100; i++) {
            int st = 0;
            if (waitpid(pid, &st, WNOHANG) == pid) { pid = -1; return false; } // exited (port taken?)
            const int fd = socket(AF_INET, SOCK_STREAM, 0);
            sockaddr_in a{};
            a.sin_family = AF_INET;
            a.sin_port = htons((uint16_t) port);
            a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
            const bool up = connect(fd, (sockaddr *) &a, sizeof(a)) == 0;
            close(fd);
            if (up) return true;
            std::this_thread::sleep_for(std::chrono::milliseconds(100));
        }
        return false;
    }
};

struct rpc_fixture : public ::testing::Test {
    static inline worker_process * w1 = nullptr;
    static inline worker_process * w2 = nullptr;
    static void SetUpTestSuite() {
        w1 = new worker_process();
        w2 = new worker_process();
    }
    static void TearDownTestSuite() {
        delete w1;
        delete w2;
    }

    // greedy ar in one process, then ar and speculative with every layer on the two workers: the
    // speculative output equals the split model's ar always, and the one process's when the workers
    // run the same kernels (not for weights the local CPU repacks: Q4_K, and Q8_0 on AVX512-VNNI, whose
    // repacked kernels sum in another order than the plain ones a worker runs on its plain buffers)
    void check_split(const std::string & type, bool same_kernels) {
        ASSERT_GT(w1->pid, 0);
        ASSERT_GT(w2->pid, 0);
        static bool added = false;
        if (!added) {
            std::string err;
            ASSERT_TRUE(engine_add_rpc_servers(w1->endpoint + "," + w2->endpoint, &err)) << err;
            added = true;
        }
        const std::string path = test::typed_model_path(type);
        const size_t from1 = w1->log_size(), from2 = w2->log_size();
        engine_set_gpu_layers(0); // every layer here
        auto local_m = test::load_or_fail(path);
        ASSERT_TRUE(local_m);
        auto local = test::make_spec_context(*local_m, 256, 1);
        std::mt19937 rng(7);
        const std::vector<test::ar_case> cases = test::ar_cases(*local, rng, 4, 48);
        local.reset();
        local_m.reset();

        engine_set_gpu_layers(-1); // every layer on the workers, split by their memory
        auto split_m = test::load_or_fail(path);
        ASSERT_TRUE(split_m);
        auto split = test::make_spec_context(*split_m, 256, 1);
        engine_set_gpu_layers(0);
        int64_t passes = 0;
        for (size_t c = 0; c < cases.size(); c++) {
            generate_params gp;
            gp.n_predict = (int32_t) cases[c].ar.tokens.size();
            const generate_result ar = generate_ar(*split, cases[c].prompt, gp);
            ASSERT_NE(ar.stop, STOP_REASON_ERROR) << ar.error;
            if (same_kernels) EXPECT_EQ(ar.tokens, cases[c].ar.tokens) << type << " case " << c << ": ar split over two workers";
            test::noisy_reference_drafter d(ar.tokens, 100 + (uint32_t) c, split_m->facts().n_vocab, 3);
            drafter_i * ds[] = {&d};
            spec_params sp;
            sp.draft_max = 16;
            const generate_result spec = generate_spec(*split, cases[c].prompt, gp, sp, ds);
            ASSERT_NE(spec.stop, STOP_REASON_ERROR) << spec.error;
            EXPECT_EQ(spec.tokens, ar.tokens) << type << " case " << c << ": speculative split over two workers";
            EXPECT_LT(spec.target_passes, ar.target_passes) << "the drafts were used";
            passes += ar.target_passes + spec.target_passes;
        }
        // the layers reached the workers: between them they received every weight but the token
        // embeddings (the input layer stays on the CPU in llama.cpp), each some; and each computed
        // its part of every pass
        const worker_process::served s1 = w1->since(from1), s2 = w2->since(from2);
        const int64_t want = offloaded_weight_bytes(path);
        EXPECT_GT(s1.weight_bytes, 0) << type << ": the first worker received no weights";
        EXPECT_GT(s2.weight_bytes, 0) << type << ": the second worker received no weights";
        EXPECT_GE(s1.weight_bytes + s2.weight_bytes, want)
            << type << ": the workers received " << s1.weight_bytes << " + " << s2.weight_bytes << " bytes of weights, the "
            << "layers hold " << want << ": some stayed in this process";
        EXPECT_GE(s1.computes, passes) << type << ": the first worker computed " << s1.computes << " graphs for " << passes << " passes";
        EXPECT_GE(s2.computes, passes) << type << ": the second worker computed " << s2.computes << " graphs for " << passes << " passes";
    }

    // the bytes of the model's weights that go to the workers with every layer: all but the token
    // embeddings, which the output layer gets a copy of when the model has no output matrix
    static int64_t offloaded_weight_bytes(const std::string & path) {
        gguf_init_params p = {/*.no_alloc =*/ true, /*.ctx =*/ nullptr};
        gguf_context * g = gguf_init_from_file(path.c_str(), p);
        EXPECT_TRUE(g) << path;
        if (!g) return 0;
        int64_t total = 0, embd = 0;
        bool tied = true;
        for (int64_t i = 0; i < gguf_get_n_tensors(g); i++) {
            const std::string name = gguf_get_tensor_name(g, i);
            const int64_t n = (int64_t) gguf_get_tensor_size(g, i);
            if (name == "token_embd.weight") embd = n;
            else total += n;
            if (name == "output.weight") tied = false;
        }
        gguf_free(g);
        return total + (tied ? embd : 0);
    }
};

// on AVX512-VNNI the local CPU repacks Q8_0 too (the ggml patch's item 9: another summation order than
// item 5's kernel, which a worker runs on its plain buffers); elsewhere both run the same kernel
TEST_F(rpc_fixture, split_over_two_workers_is_lossless_q8_0) {
    check_split("q8_0", !ggml_cpu_has_avx512_vnni());
}

TEST_F(rpc_fixture, split_over_two_workers_decodes_like_one_process_f16) {
    check_split("f16", true);
}

TEST_F(rpc_fixture, split_over_two_workers_is_lossless_q4_k_m) {
    check_split("q4_k_m", false);
}

TEST(rpc, unreachable_or_malformed_workers_are_clear_errors) {
    std::string err;
    EXPECT_FALSE(engine_add_rpc_servers("127.0.0.1", &err));
    EXPECT_NE(err.find("is not HOST:PORT"), std::string::npos) << err;
    EXPECT_FALSE(engine_add_rpc_servers("127.0.0.1:50052,,", &err));
    EXPECT_NE(err.find("is not HOST:PORT"), std::string::npos) << err;
    // a port nobody listens on: refused at once, the process goes on
    EXPECT_FALSE(engine_add_rpc_servers("127.0.0.1:1", &err));
    EXPECT_NE(err.find("no RPC worker answers"), std::string::npos) << err;
    EXPECT_TRUE(engine_rpc_servers().empty());
    // the CLI says the same and exits 2
    std::string out;
    std::string cmd = EDITSPEC_BIN;
    cmd += " complete --rpc 127.0.0.1:1 -p 'x' -n 1 2>&1";
    const int st = test::run_command(cmd, &out);
    EXPECT_EQ(st, 2) << out;
    EXPECT_NE(out.find("no RPC worker answers"), std::string::npos) << out;
}

} // namespace
