#!/usr/bin/env bash
# Fuzz every request parser with libFuzzer, ASan and UBSan (clang): fuzz-api (the endpoints' bodies),
# fuzz-sessions (/v1/sessions bodies), fuzz-apply (a file and a snippet: the apply format and the
# constrained-apply constraint). An exception that escapes a parser is a crash.
#
#   scripts/fuzz.sh [RUNS=1000000] [TARGET...]   build into build-fuzz/ and run RUNS executions of each
#                                                 target (default: all) on a copy of its seed corpus
#                                                 (fuzz/corpus-<name>); exit 0 = no crash in any
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
runs=${1:-1000000}
shift || true
targets=("$@")
[ ${#targets[@]} -gt 0 ] || targets=(fuzz-api fuzz-sessions fuzz-apply)
build_dir=${BUILD_DIR:-$root/build-fuzz}
"$root/scripts/deb-install.sh" clang libclang-rt-14-dev
prefix=$("$root/scripts/setup-llama.sh" | tail -n 1)
cmake -S "$root" -B "$build_dir" -DCMAKE_BUILD_TYPE=RelWithDebInfo -DCMAKE_C_COMPILER=clang -DCMAKE_CXX_COMPILER=clang++ \
    -DEDITSPEC_LLAMA_PREFIX="$prefix" -DEDITSPEC_FUZZ=ON -DEDITSPEC_BUILD_TESTS=OFF >/dev/null
cmake --build "$build_dir" --target "${targets[@]}" -j 2 >/dev/null
for t in "${targets[@]}"; do
    name=${t#fuzz-}
    corpus=$build_dir/corpus-$name
    mkdir -p "$corpus"
    cp -n "$root"/fuzz/corpus-"$name"/* "$corpus"/ 2>/dev/null || true
    echo "== $t: $runs runs"
    start=$(date +%s)
    "$build_dir/bin/$t" -runs="$runs" -max_len=8192 -print_final_stats=1 "$corpus" 2>&1 | tail -n 14
    echo "== $t: done in $(( $(date +%s) - start )) s, no crash"
done
