// The client watcher of `editspec serve`: one thread that watches the connection of every request in
// flight, queued or decoding, streamed or not, and calls the request's `on_gone` the moment its client
// closes the connection (poll's POLLRDHUP / POLLHUP / POLLERR, no timer): the request is cancelled
// (context::set_cancel: its decodes fail at once) or, while it waits for a slot, dropped from the queue.
// It replaces a 100 ms poll in each of the three places a request waited (the queue, a non-streamed
// answer, a stream's channel). The server's stop cancels every request the same way (cancel_all).
//
//     client_watcher w;                       // starts its thread
//     const uint64_t h = w.watch(fd, [g] { g->cancel = true; });
//     ...                                     // the request runs; on_gone may run once, on w's thread
//     w.unwatch(h);                           // the request is done with: on_gone never runs after this
//
// Thread-safe. on_gone runs on the watcher's thread (or on cancel_all's, or on watch's when the watcher
// was cancelled already), at most once; it must not block on the request it cancels, and must hold
// (by value) everything it touches that could go before it runs: unwatch does not wait for an on_gone
// already running.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <mutex>
#include <thread>

namespace editspec {

class client_watcher {
public:
    client_watcher();  // starts the thread (es-watch)
    ~client_watcher(); // stops and joins it; nothing fires after

    // watches socket fd (a connection httplib serves; it must stay open until unwatch) and returns a
    // handle for unwatch. fd < 0: never fires on its own (cancel_all still reaches it). Once cancel_all
    // ran, on_gone runs at once, here.
    uint64_t watch(int fd, std::function<void()> on_gone);
    // stops watching; idempotent, and 0 is no handle
    void unwatch(uint64_t handle);
    // the server stops: every watched request's on_gone runs now, and any later watch's at once
    void cancel_all();

    size_t size() const; // requests watched

private:
    struct entry {
        int fd;
        std::function<void()> on_gone;
    };
    void run();
    void wake(); // the poll sees the new set of sockets

    mutable std::mutex mu_;
    std::map<uint64_t, entry> watched_;
    uint64_t next_ = 1;
    bool all_cancelled_ = false, stop_ = false;
    int wake_fd_ = -1; // an eventfd: watch, unwatch and the destructor wake the poll
    std::thread thread_;
};

} // namespace editspec
