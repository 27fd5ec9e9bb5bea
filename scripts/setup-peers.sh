#!/usr/bin/env bash
# Build llama.cpp's own tools at the pinned commit, for A/B comparisons with editspec:
# llama-bench and llama-server. llama.cpp's default build,
# unpatched (sgemm on, without editspec's batch-invariant patch): the peer editspec is measured
# against. Cached beside the library; prints the bin folder.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
prefix=$("$root/scripts/setup-llama.sh" | tail -n 1)
base=$(dirname "$prefix")
src_dir=$base/src
build_dir=$base/build-peers-default
bin_dir=$build_dir/bin
stamp=$build_dir/.editspec-complete
if [ -f "$stamp" ]; then
    echo "$bin_dir"
    exit 0
fi
jobs=$(nproc 2>/dev/null || echo 2)
echo "setup-peers: building llama.cpp tools (default build); about 8 minutes once" >&2
cmake -S "$src_dir" -B "$build_dir" -DCMAKE_BUILD_TYPE=Release -DBUILD_SHARED_LIBS=ON \
    -DLLAMA_BUILD_TESTS=OFF -DLLAMA_BUILD_EXAMPLES=OFF -DLLAMA_BUILD_TOOLS=ON -DLLAMA_BUILD_SERVER=ON \
    -DLLAMA_BUILD_COMMON=ON -DLLAMA_OPENSSL=OFF >"$build_dir.log" 2>&1 \
    || { tail -30 "$build_dir.log" >&2; exit 1; }
cmake --build "$build_dir" -j "$jobs" --target llama-bench llama-server \
    >>"$build_dir.log" 2>&1 || { grep -E "error" "$build_dir.log" | head -20 >&2; exit 1; }
touch "$stamp"
echo "$bin_dir"
