// The client watcher (server-watcher.h): one poll over every watched connection and an eventfd.
#include "server-watcher.h"
#include "editspec/engine.h"
#include "editspec/log.h"

#include <poll.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <stdexcept>
#include <string>
#include <vector>

namespace editspec {

client_watcher::client_watcher() {
    wake_fd_ = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
    if (wake_fd_ < 0) throw std::runtime_error(std::string("client watcher: eventfd failed: ") + strerror(errno));
    thread_ = std::thread([this] {
        thread_name_set("es-watch");
        run();
    });
}

client_watcher::~client_watcher() {
    {
        std::lock_guard<std::mutex> lock(mu_);
        stop_ = true;
    }
    wake();
    if (thread_.joinable()) thread_.join();
    close(wake_fd_);
}

void client_watcher::wake() {
    const uint64_t one = 1;
    // a full counter (never, at 2^64 - 2) is still a wake-up: the poll sees it readable
    [[maybe_unused]] const ssize_t n = write(wake_fd_, &one, sizeof(one));
}

uint64_t client_watcher::watch(int fd, std::function<void()> on_gone) {
    uint64_t h = 0;
    {
        std::lock_guard<std::mutex> lock(mu_);
        if (!all_cancelled_) {
            h = next_++;
            watched_.emplace(h, entry{fd, std::move(on_gone)});
        }
    }
    if (h == 0) {
        on_gone(); // the server stops: the request is cancelled before it starts
        return 0;
    }
    if (fd >= 0) wake();
    return h;
}

void client_watcher::unwatch(uint64_t handle) {
    if (handle == 0) return;
    bool had_fd = false;
    {
        std::lock_guard<std::mutex> lock(mu_);
        auto it = watched_.find(handle);
        if (it == watched_.end()) return;
        had_fd = it->second.fd >= 0;
        watched_.erase(it);
    }
    // the poll must let go of the socket before httplib closes it and a new connection reuses its number
    if (had_fd) wake();
}

void client_watcher::cancel_all() {
    std::map<uint64_t, entry> all;
    {
        std::lock_guard<std::mutex> lock(mu_);
        all_cancelled_ = true;
        all.swap(watched_);
    }
    wake();
    for (auto & [h, e] : all) e.on_gone();
}

size_t client_watcher::size() const {
    std::lock_guard<std::mutex> lock(mu_);
    return watched_.size();
}

void client_watcher::run() {
    std::vector<pollfd> fds;
    std::vector<uint64_t> handles; // fds[i + 1]'s
    while (true) {
        fds.assign(1, pollfd{wake_fd_, POLLIN, 0});
        handles.clear();
        {
            std::lock_guard<std::mutex> lock(mu_);
            if (stop_) return;
            for (const auto & [h, e] : watched_) {
                if (e.fd < 0) continue;
                // POLLRDHUP, not POLLIN: a keep-alive client's next request is not its leaving
                fds.push_back(pollfd{e.fd, POLLRDHUP, 0});
                handles.push_back(h);
            }
        }
        if (poll(fds.data(), fds.size(), -1) < 0) {
            if (errno == EINTR) continue;
            ES_LOG_ERROR("client watcher: poll failed: %s\n", strerror(errno));
            return;
        }
        if (fds[0].revents & POLLIN) {
            uint64_t n;
            [[maybe_unused]] const ssize_t r = read(wake_fd_, &n, sizeof(n));
        }
        std::vector<std::function<void()>> gone;
        {
            std::lock_guard<std::mutex> lock(mu_);
            for (size_t i = 1; i < fds.size(); i++) {
                if (!(fds[i].revents & (POLLRDHUP | POLLHUP | POLLERR | POLLNVAL))) continue;
                // unwatched since the poll began: its socket may be another connection's by now
                auto it = watched_.find(handles[i - 1]);
                if (it == watched_.end()) continue;
                gone.push_back(std::move(it->second.on_gone));
                watched_.erase(it);
            }
        }
        for (auto & f : gone) f();
    }
}

} // namespace editspec
