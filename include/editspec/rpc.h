// Models larger than one machine: ggml's RPC backend (llama.cpp's rpc-server protocol). Workers
// run `editspec rpc-server` (or llama.cpp's ggml-rpc-server of the pinned commit); the main process
// names them with --rpc and they become devices of every model loaded afterwards. Layers and their
// KV go to them as to a GPU (--gpu-layers), split by the memory each worker reports. A worker runs
// the same patched CPU kernels as the main process, so a split model decodes the same tokens
// (docs/scale-out.md). The protocol has no authentication: loopback or a private network only.
#pragma once

#include <string>
#include <vector>

namespace editspec {

// "HOST:PORT" endpoints of a comma-separated list ("127.0.0.1:50052,10.0.0.2:50052"); false with
// *error naming the malformed piece
bool rpc_parse_endpoints(const std::string & list, std::vector<std::string> & out, std::string * error);

// adds each worker as a device. Call before the first model_load. Each endpoint is connected to
// first (5 s), so a worker that is not there is an error here, naming it; ggml's client aborts
// the process on a worker lost later (it has no recovery), after our message naming the workers.
bool engine_add_rpc_servers(const std::string & list, std::string * error);

// the workers added, in order ("" when none)
const std::vector<std::string> & engine_rpc_servers();

// serves this machine's CPU backend as a worker at host:port until the process is killed; false
// with *error when the backend or the port cannot be had. n_threads: the CPU backend's threads.
// cache_dir: where large tensors sent before are kept by hash ("" = none).
bool engine_rpc_serve(const std::string & host, int port, int n_threads, const std::string & cache_dir,
                      std::string * error);

} // namespace editspec
