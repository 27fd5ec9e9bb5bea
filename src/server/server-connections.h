// Connections of `editspec serve`: a thread each, started as they come up to a maximum, so /health
// and /metrics answer while slow clients hold threads and generations wait for slots (httplib's own
// pool has a fixed count of threads: 8 slow clients took /health down).
#pragma once

#include <httplib.h>

#include <cstddef>

namespace editspec {

// a task queue for httplib::Server::new_task_queue (the server owns and deletes it)
httplib::TaskQueue * connection_pool_new(size_t max_threads);

} // namespace editspec

namespace editspec {

// The socket that carries req, found by its two addresses among this process's descriptors (httplib
// 0.11 does not hand it to a handler); -1 when none matches. Valid while the handler runs: httplib
// closes it only after the handler returns.
int connection_socket(const httplib::Request & req);

// true once the peer of socket fd has closed the connection or it failed (a read would see the end);
// false while it is open, and for fd < 0
bool connection_closed(int fd);

} // namespace editspec
