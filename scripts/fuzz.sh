#!/usr/bin/env bash
# Fuzz the server's request parsing (fuzz/fuzz-api.cpp) with libFuzzer, ASan and UBSan (clang).
#
#   scripts/fuzz.sh [RUNS=1000000]     build into build-fuzz/ and run RUNS executions on a copy of
#                                      the seed corpus (fuzz/corpus-api); exit 0 = no crash
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
runs=${1:-1000000}
build_dir=${BUILD_DIR:-$root/build-fuzz}
"$root/scripts/deb-install.sh" clang libclang-rt-14-dev
prefix=$("$root/scripts/setup-llama.sh" | tail -n 1)
cmake -S "$root" -B "$build_dir" -DCMAKE_BUILD_TYPE=RelWithDebInfo -DCMAKE_C_COMPILER=clang -DCMAKE_CXX_COMPILER=clang++ \
    -DEDITSPEC_LLAMA_PREFIX="$prefix" -DEDITSPEC_FUZZ=ON -DEDITSPEC_BUILD_TESTS=OFF >/dev/null
cmake --build "$build_dir" --target fuzz-api -j 2 >/dev/null
corpus=$build_dir/corpus-api
mkdir -p "$corpus"
cp -n "$root"/fuzz/corpus-api/* "$corpus"/ 2>/dev/null || true
"$build_dir/bin/fuzz-api" -runs="$runs" -max_len=8192 -print_final_stats=1 "$corpus" 2>&1 | tail -n 12
