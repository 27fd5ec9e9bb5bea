// Connections of `editspec serve` (server-connections.h).
#include "server-connections.h"

#include <dirent.h>
#include <netdb.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <condition_variable>
#include <cstdlib>
#include <deque>
#include <functional>
#include <mutex>
#include <thread>
#include <vector>

namespace editspec {

namespace {

class connection_pool : public httplib::TaskQueue {
public:
    explicit connection_pool(size_t max_threads) : max_threads_(max_threads) {}
    ~connection_pool() override { shutdown(); }

    void enqueue(std::function<void()> fn) override {
        {
            std::lock_guard<std::mutex> lock(mu_);
            jobs_.push_back(std::move(fn));
            // every queued connection has an idle thread to take it, or gets a new one
            if (jobs_.size() > n_idle_ && threads_.size() < max_threads_) threads_.emplace_back([this] { work(); });
        }
        cv_.notify_one();
    }

    void shutdown() override {
        {
            std::lock_guard<std::mutex> lock(mu_);
            stopping_ = true;
        }
        cv_.notify_all();
        for (std::thread & t : threads_) {
            if (t.joinable()) t.join();
        }
    }

private:
    void work() {
        while (true) {
            std::function<void()> fn;
            {
                std::unique_lock<std::mutex> lock(mu_);
                n_idle_++;
                cv_.wait(lock, [&] { return stopping_ || !jobs_.empty(); });
                n_idle_--;
                if (jobs_.empty()) return;
                fn = std::move(jobs_.front());
                jobs_.pop_front();
            }
            fn();
        }
    }

    const size_t max_threads_;
    std::mutex mu_;
    std::condition_variable cv_;
    std::deque<std::function<void()>> jobs_;
    std::vector<std::thread> threads_;
    size_t n_idle_ = 0;
    bool stopping_ = false;
};

} // namespace

httplib::TaskQueue * connection_pool_new(size_t max_threads) {
    return new connection_pool(max_threads);
}

// ----------------------------------------------------------------------------
// a request's socket, to notice a client that left while its request waits or decodes

namespace {

bool address_of(const sockaddr_storage & a, socklen_t len, std::string & host, int & port) {
    char h[NI_MAXHOST], p[NI_MAXSERV];
    if (getnameinfo((const sockaddr *) &a, len, h, sizeof(h), p, sizeof(p), NI_NUMERICHOST | NI_NUMERICSERV) != 0) return false;
    host = h;
    port = atoi(p);
    return true;
}

} // namespace

int connection_socket(const httplib::Request & req) {
    DIR * d = opendir("/proc/self/fd");
    if (!d) return -1;
    int found = -1;
    while (const dirent * e = readdir(d)) {
        char * end = nullptr;
        const long fd = strtol(e->d_name, &end, 10);
        if (end == e->d_name || *end != '\0') continue;
        sockaddr_storage peer{}, local{};
        socklen_t lp = sizeof(peer), ll = sizeof(local);
        if (getpeername((int) fd, (sockaddr *) &peer, &lp) != 0 || getsockname((int) fd, (sockaddr *) &local, &ll) != 0) continue;
        std::string ph, lh;
        int pp = -1, lport = -1;
        if (!address_of(peer, lp, ph, pp) || !address_of(local, ll, lh, lport)) continue;
        if (pp == req.remote_port && ph == req.remote_addr && lport == req.local_port) {
            found = (int) fd;
            break;
        }
    }
    closedir(d);
    return found;
}

bool connection_closed(int fd) {
    if (fd < 0) return false;
    pollfd p{fd, POLLIN | POLLRDHUP, 0};
    if (poll(&p, 1, 0) <= 0) return false;
    if (p.revents & (POLLERR | POLLHUP | POLLRDHUP | POLLNVAL)) return true;
    char c;
    // readable: the end of the stream, or the next request of a keep-alive client
    return (p.revents & POLLIN) && recv(fd, &c, 1, MSG_PEEK | MSG_DONTWAIT) == 0;
}

} // namespace editspec
