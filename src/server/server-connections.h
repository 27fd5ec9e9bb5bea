// Connections of `editspec serve`: httplib's server (cpp-httplib 0.11, Debian's), its connections
// counted and bounded so slow clients cannot starve it.
//
// httplib serves a connection on a pooled thread for as long as the client keeps sending, and its read
// timeout is per byte: 300 connections that trickled a header byte every 2 s took /health down. Here
// (guarded_server overrides httplib's per-connection hook, process_and_close_socket, and serves the
// keep-alive loop with httplib's own process_request):
//   - a request's head and body must arrive within a deadline from its first byte, not per byte;
//   - at most max_total connections are held, and at most max_per_client from one address; a newcomer
//     past either bound closes the oldest connection of that client (of all clients) still waiting
//     for or reading its request, so a client that sends its request at once is always served; when
//     every held connection is in a handler, the newcomer gets 503 and is closed;
//   - the thread pool has room for every held connection and more, so accepting never waits on it.
// An event loop would be the other answer; httplib has none and a second HTTP library for it is not
// worth its weight.
#pragma once

#include "editspec/server.h"

#include <httplib.h>

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <list>
#include <mutex>
#include <string>

namespace editspec {

struct connection_counts {
    size_t   open       = 0; // connections held now
    size_t   busy       = 0; // of those, with a request past its head
    uint64_t refused    = 0; // newcomers answered 503: every held connection busy
    uint64_t evicted    = 0; // closed while waiting or reading, for a newcomer
    uint64_t timed_out  = 0; // requests whose head and body missed the deadline
};

class guarded_server : public httplib::Server {
public:
    explicit guarded_server(const connection_limits & limits);
    ~guarded_server() override;

    connection_counts counts() const;

    struct conn; // one held connection (connections.cpp)

private:
    bool process_and_close_socket(socket_t sock) override; // httplib's hook: one connection, on a pooled thread
    bool admit(conn & c, std::string & why);
    bool evict_oldest(const std::string & host);
    bool wait_request(conn & c);
    void release(conn & c);

    const connection_limits limits_;
    mutable std::mutex mu_;
    std::list<conn *> conns_; // held, oldest first (accepted, or answered last)
    connection_counts counts_;
    std::atomic<uint64_t> timed_out_{0};
};

// For the thread serving a request (the pre-routing handler, route handlers, content providers):
// the request has its head: from here its connection is not closed for a newcomer
void connection_mark_busy();
// the request this thread serves missed its deadline (--request-read-timeout): its answer is 408
bool connection_late();
// the socket carrying the request this thread serves; -1 outside one. Valid while the handler runs.
int connection_socket();

// true once the peer of socket fd has closed the connection or it failed (a read would see the end);
// false while it is open, and for fd < 0
bool connection_closed(int fd);

} // namespace editspec
