// Connections of `editspec serve` (server-connections.h).
#include "server-connections.h"

#include <nlohmann/json.hpp>

#include <netdb.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <condition_variable>
#include <cstdlib>
#include <cstring>
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

// ----------------------------------------------------------------------------
// guarded_server

namespace {

using clock_type = std::chrono::steady_clock;

bool address_of(const sockaddr_storage & a, socklen_t len, std::string & host, int & port) {
    char h[NI_MAXHOST], p[NI_MAXSERV];
    if (getnameinfo((const sockaddr *) &a, len, h, sizeof(h), p, sizeof(p), NI_NUMERICHOST | NI_NUMERICSERV) != 0) return false;
    host = h;
    port = atoi(p);
    return true;
}

// waits up to ms for fd to be ready for `events`; false on a timeout, an error or a hang-up with
// nothing left to read
bool wait_fd(int fd, short events, int64_t ms) {
    pollfd p{fd, events, 0};
    int rc;
    do {
        rc = poll(&p, 1, (int) std::max<int64_t>(ms, 0));
    } while (rc < 0 && errno == EINTR);
    if (rc <= 0) return false;
    if (p.revents & POLLNVAL) return false;
    return (p.revents & events) || (p.revents & (POLLHUP | POLLERR)); // a read or write then says what happened
}

} // namespace

struct guarded_server::conn {
    int fd = -1;
    std::string host, local_host;
    int port = 0, local_port = 0;
    clock_type::time_point since;  // accepted, or its last response written
    std::atomic<bool> busy{false}; // its request has its head (connection_mark_busy)
    bool evicted = false;          // closed for a newcomer (under the server's mutex)
    bool late = false;             // its request missed the deadline (408, then closed)
    std::atomic<uint64_t> * timed_out = nullptr;
};

namespace {

thread_local guarded_server::conn * t_conn = nullptr;

// a connection's socket for httplib's process_request: a read waits at most io_timeout, and none
// after the request's deadline (its head and body from its first byte; httplib's own timeout is per
// byte, which a client trickling a byte at a time never meets)
class deadline_stream : public httplib::Stream {
public:
    deadline_stream(guarded_server::conn & c, int io_timeout_s, clock_type::time_point deadline)
        : c_(c), io_ms_((int64_t) io_timeout_s * 1000), deadline_(deadline) {}

    bool is_readable() const override {
        while (true) {
            const int64_t left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline_ - clock_type::now()).count();
            if (left <= 0) break;
            if (wait_fd(c_.fd, POLLIN, std::min(io_ms_, left))) return true;
            if (left > io_ms_) return false; // the read's own timeout, before the deadline
            // poll's timeout ends on a millisecond boundary, sometimes a hair before the deadline: the
            // request was not yet late, httplib answered 400 and waited for another; wait it out
        }
        if (!c_.late) {
            c_.late = true;
            if (c_.timed_out) (*c_.timed_out)++;
        }
        return false;
    }
    bool is_writable() const override { return wait_fd(c_.fd, POLLOUT, io_ms_); }

    ssize_t read(char * ptr, size_t size) override {
        if (off_ < len_) {
            const size_t n = std::min(size, len_ - off_);
            memcpy(ptr, buf_ + off_, n);
            off_ += n;
            return (ssize_t) n;
        }
        if (!is_readable()) return -1;
        ssize_t n;
        do {
            n = recv(c_.fd, buf_, sizeof(buf_), 0);
        } while (n < 0 && errno == EINTR);
        if (n <= 0) return n;
        len_ = (size_t) n;
        off_ = 0;
        return read(ptr, size);
    }
    ssize_t write(const char * ptr, size_t size) override {
        if (!is_writable()) return -1;
        ssize_t n;
        do {
            n = send(c_.fd, ptr, size, MSG_NOSIGNAL);
        } while (n < 0 && errno == EINTR);
        return n;
    }
    void get_remote_ip_and_port(std::string & ip, int & port) const override {
        ip = c_.host;
        port = c_.port;
    }
    void get_local_ip_and_port(std::string & ip, int & port) const override {
        ip = c_.local_host;
        port = c_.local_port;
    }
    socket_t socket() const override { return c_.fd; }

private:
    guarded_server::conn & c_;
    const int64_t io_ms_;
    const clock_type::time_point deadline_;
    char buf_[4096];
    size_t off_ = 0, len_ = 0;
};

// a 503 in OpenAI's error schema, written without reading the request, then the connection closed
void refuse(int fd, const std::string & why) {
    const nlohmann::json j = {{"error", {{"message", why}, {"type", "server_error"}, {"param", nullptr}, {"code", "server_busy"}}}};
    const std::string body = j.dump();
    const std::string res = "HTTP/1.1 503 Service Unavailable\r\nContent-Type: application/json\r\nRetry-After: 1\r\n"
                            "Connection: close\r\nContent-Length: " + std::to_string(body.size()) + "\r\n\r\n" + body;
    (void) !send(fd, res.data(), res.size(), MSG_NOSIGNAL | MSG_DONTWAIT);
    shutdown(fd, SHUT_WR);
}

} // namespace

guarded_server::guarded_server(const connection_limits & limits) : limits_(limits) {
    // a thread for every connection held, and room beyond: a newcomer is admitted (or refused) at once
    const size_t n_threads = limits_.max_total + 32;
    new_task_queue = [n_threads] { return new connection_pool(n_threads); };
    set_keep_alive_timeout(limits_.idle_s);
    set_read_timeout(limits_.io_timeout_s, 0); // the accepted socket's SO_RCVTIMEO / SO_SNDTIMEO
    set_write_timeout(limits_.io_timeout_s, 0);
}

guarded_server::~guarded_server() = default;

connection_counts guarded_server::counts() const {
    std::lock_guard<std::mutex> lock(mu_);
    connection_counts c = counts_;
    c.timed_out = timed_out_.load();
    for (const conn * o : conns_) {
        if (o->evicted) continue;
        c.open++;
        c.busy += o->busy.load();
    }
    return c;
}

// closes the oldest held connection (of `host`, or of anyone when empty) that is not in a request
// past its head; false when there is none. Under mu_.
bool guarded_server::evict_oldest(const std::string & host) {
    for (conn * o : conns_) {
        if (o->evicted || o->busy.load() || (!host.empty() && o->host != host)) continue;
        o->evicted = true;
        shutdown(o->fd, SHUT_RDWR); // its thread's wait or read ends; it closes the socket
        counts_.evicted++;
        return true;
    }
    return false;
}

bool guarded_server::admit(conn & c, std::string & why) {
    std::lock_guard<std::mutex> lock(mu_);
    size_t total = 0, mine = 0;
    for (const conn * o : conns_) {
        if (o->evicted) continue;
        total++;
        mine += o->host == c.host;
    }
    if (mine >= limits_.max_per_client) {
        if (!evict_oldest(c.host)) {
            why = "too many connections from " + c.host + ", all busy (--max-connections-per-client " +
                  std::to_string(limits_.max_per_client) + ")";
            counts_.refused++;
            return false;
        }
        total--;
    }
    if (total >= limits_.max_total && !evict_oldest("")) {
        why = "too many connections, all busy (--max-connections " + std::to_string(limits_.max_total) + ")";
        counts_.refused++;
        return false;
    }
    c.since = clock_type::now();
    conns_.push_back(&c);
    return true;
}

void guarded_server::release(conn & c) {
    std::lock_guard<std::mutex> lock(mu_);
    conns_.remove(&c);
}

// waits for the connection's next request: true once a byte of it is there; false on the idle
// timeout, an eviction, the peer's close or the server's stop
bool guarded_server::wait_request(conn & c) {
    const auto until = clock_type::now() + std::chrono::seconds(limits_.idle_s);
    while (svr_sock_ != INVALID_SOCKET) {
        const int64_t left = std::chrono::duration_cast<std::chrono::milliseconds>(until - clock_type::now()).count();
        if (left <= 0) return false;
        if (wait_fd(c.fd, POLLIN, std::min<int64_t>(left, 100))) {
            char b;
            return recv(c.fd, &b, 1, MSG_PEEK | MSG_DONTWAIT) > 0;
        }
    }
    return false;
}

bool guarded_server::process_and_close_socket(socket_t sock) {
    conn c;
    c.fd = sock;
    c.timed_out = &timed_out_;
    sockaddr_storage peer{}, local{};
    socklen_t lp = sizeof(peer), ll = sizeof(local);
    if (getpeername(sock, (sockaddr *) &peer, &lp) == 0) address_of(peer, lp, c.host, c.port);
    if (getsockname(sock, (sockaddr *) &local, &ll) == 0) address_of(local, ll, c.local_host, c.local_port);
    std::string why;
    bool ok = false;
    if (!admit(c, why)) {
        refuse(sock, why);
    } else {
        t_conn = &c;
        // httplib's keep-alive loop, with a deadline per request and the connection's state kept
        for (size_t left = keep_alive_max_count_; left > 0 && wait_request(c); left--) {
            deadline_stream strm(c, limits_.io_timeout_s, clock_type::now() + std::chrono::seconds(limits_.read_deadline_s));
            bool closed = false;
            ok = process_request(strm, left == 1, closed, nullptr);
            {
                std::lock_guard<std::mutex> lock(mu_);
                c.busy = false;
                c.since = clock_type::now();
                conns_.remove(&c); // oldest first: it waits anew, at the back
                if (!c.evicted) conns_.push_back(&c);
            }
            if (!ok || closed || c.evicted || c.late) break;
        }
        t_conn = nullptr;
        release(c);
    }
    shutdown(sock, SHUT_RDWR);
    close(sock);
    return ok;
}

void connection_mark_busy() {
    if (t_conn) t_conn->busy = true;
}

bool connection_late() {
    return t_conn && t_conn->late;
}

int connection_socket() {
    return t_conn ? t_conn->fd : -1;
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
