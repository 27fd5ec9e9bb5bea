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
