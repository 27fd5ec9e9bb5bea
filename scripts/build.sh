#!/usr/bin/env bash
# Build editspec: install missing Debian packages, fetch + build the pinned llama.cpp once (cached
# outside the checkout), then configure and build this project into build/.
#
#   scripts/build.sh            Release build into build/
#   BUILD_DIR=... scripts/build.sh
#   CMAKE_ARGS="-DEDITSPEC_SANITIZE=ON" BUILD_DIR=build-asan scripts/build.sh   extra CMake options
#   BUILD_TARGETS="editspec test-server" scripts/build.sh                       only these targets
#   EDITSPEC_BACKEND=cuda EDITSPEC_CUDA_ARCH=90 BUILD_DIR=build-cuda scripts/build.sh
#                                  llama.cpp with its CUDA backend (setup-llama.sh); --gpu-layers on
#                                  every command then offloads (default: all layers)
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
build_dir=${BUILD_DIR:-$root/build}

log() { echo "build: $*" >&2; }

# --- Debian packages, installed only where missing
"$root/scripts/deb-install.sh" cmake g++ make git nodejs npm python3 pkg-config libgtest-dev nlohmann-json3-dev \
    libcpp-httplib-dev libcli11-dev libdivsufsort-dev libbenchmark-dev ccache

# --- llama.cpp: a user's install prefix (LLAMA_PREFIX) or the pinned one, cached
if [ -n "${LLAMA_PREFIX:-}" ]; then
    prefix=$LLAMA_PREFIX
    log "using llama.cpp from LLAMA_PREFIX=$prefix"
else
    prefix=$("$root/scripts/setup-llama.sh" | tail -n 1)
fi

# --- this project
jobs=$(nproc 2>/dev/null || echo 2)
# ccache: a second build of the same sources (another clone, CI, the sanitizer build after a pull) takes
# its objects from ~/.cache/ccache instead of compiling them again. The tests' precompiled headers are
# cached too where their defines and __TIME__ may be taken as they are (ccache's manual: "Precompiled headers")
launcher=()
if command -v ccache >/dev/null; then
    launcher=(-DCMAKE_C_COMPILER_LAUNCHER=ccache -DCMAKE_CXX_COMPILER_LAUNCHER=ccache)
    export CCACHE_SLOPPINESS=${CCACHE_SLOPPINESS:-pch_defines,time_macros,include_file_mtime,include_file_ctime}
    export CCACHE_BASEDIR=${CCACHE_BASEDIR:-$root} # paths under the clone hashed as relative: any clone's objects serve
fi
# shellcheck disable=SC2086 # CMAKE_ARGS is a list of options
cmake -S "$root" -B "$build_dir" -DCMAKE_BUILD_TYPE=Release -DEDITSPEC_LLAMA_PREFIX="$prefix" "${launcher[@]}" ${CMAKE_ARGS:-} >/dev/null
log "compiling editspec ($jobs jobs)"
# shellcheck disable=SC2086 # BUILD_TARGETS is a list of targets
if ! cmake --build "$build_dir" -j "$jobs" ${BUILD_TARGETS:+--target $BUILD_TARGETS} >"$build_dir/build.log" 2>&1; then
    grep -E "error" "$build_dir/build.log" | head -40 >&2 || tail -40 "$build_dir/build.log" >&2
    log "error: build failed; full log in $build_dir/build.log"
    exit 1
fi
log "built $build_dir/bin/editspec"
