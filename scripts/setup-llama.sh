#!/usr/bin/env bash
# Fetch, verify, build and install the pinned llama.cpp into a cache outside the checkout.
#
#   scripts/setup-llama.sh            prints the install prefix on its last line
#   EDITSPEC_BACKEND=cuda EDITSPEC_CUDA_ARCH=90 scripts/setup-llama.sh
#                                     the CUDA build (nvcc and CMake >= 3.24 needed; arch: CMake's
#                                     CUDA architectures, default "native" = the GPUs present)
#   EDITSPEC_LLAMA_SRC=DIR ...        a copy of the pinned source tree instead of the npm package
#                                     (machines without the npm registry)
#
# The pinned llama.cpp ships inside the npm package node-llama-cpp@3.22.1 as a git bundle
# (docs/results/design-notes/engine-notes.md). The cache is keyed by the commit, so a second run on the same machine is a no-op.
# EDITSPEC_CACHE overrides the cache root (default: ~/.cache/editspec).
#
# Our patches (patches/ggml-batch-invariant.patch and ggml-prefault-compute.patch to ggml,
# patches/llama-positions.patch, llama-kv-regions.patch, llama-output-argmax.patch and llama-rs-rollback.patch to libllama;
# each header says what and why) are applied to a clone of the pinned commit; the cache key holds
# their hash, so a changed patch builds anew. ggml is built with llamafile's sgemm kernels, which the patch makes batch-invariant: a row
# of an n-token pass gets the same arithmetic as that token decoded alone (docs/exactness.md).
# ggml's RPC backend is built in (`--rpc`, `editspec rpc-server`: docs/scale-out.md); a worker runs
# the same patched CPU kernels as the main process.
set -euo pipefail

NLC_VERSION=3.22.1
TARBALL_SHA256=a0d9dd80eacd2ab1cfe71aee57ac8a806487fd70b3d2a38fbec637752d9e5c5f
BUNDLE_SHA256=5f5d1105d5df040738d87b8290e5d17e7362131cdcfdb0831618e0ea528b4a51
LLAMA_COMMIT=de3ff815ea7d559ee917f063901b8986f038abc6

root=$(cd "$(dirname "$0")/.." && pwd)
patch_files=("$root/patches/ggml-batch-invariant.patch" "$root/patches/ggml-prefault-compute.patch" "$root/patches/llama-positions.patch"
             "$root/patches/llama-kv-regions.patch" "$root/patches/llama-output-argmax.patch"
             "$root/patches/llama-rs-rollback.patch")
for f in "${patch_files[@]}"; do
    if [ ! -f "$f" ]; then
        echo "setup-llama: error: $f is missing" >&2
        exit 2
    fi
done
patch_sha=$(cat "${patch_files[@]}" | sha256sum | cut -d' ' -f1)
# bump SETUP_VERSION when the build's configuration changes (2: common library installed;
# 3: static archives' symbols not exported, see below; 4: ggml's RPC backend built in, AMX off)
SETUP_VERSION=4
backend=${EDITSPEC_BACKEND:-cpu}
cuda_arch=${EDITSPEC_CUDA_ARCH:-native}
case $backend in
cpu) variant=bi-${patch_sha:0:12}-v$SETUP_VERSION ;;
cuda)
    # and our patch to ggml-cuda (its header says what and why)
    cuda_patch=$root/patches/ggml-cuda-batch-invariant.patch
    cuda_sha=$(sha256sum "$cuda_patch" | cut -d' ' -f1)
    variant=bi-${patch_sha:0:12}-v$SETUP_VERSION-cuda-${cuda_arch//[^A-Za-z0-9]/_}-${cuda_sha:0:8}
    ;;
*)
    echo "setup-llama: error: EDITSPEC_BACKEND=$backend: expected cpu or cuda" >&2
    exit 2
    ;;
esac
cache_root=${EDITSPEC_CACHE:-$HOME/.cache/editspec}
src_dir=$cache_root/llama.cpp-$LLAMA_COMMIT/src
patched_dir=$cache_root/llama.cpp-$LLAMA_COMMIT/src-$variant
build_dir=$cache_root/llama.cpp-$LLAMA_COMMIT/build-$variant
prefix=$cache_root/llama.cpp-$LLAMA_COMMIT/install-$variant
stamp=$prefix/.editspec-complete

log() { echo "setup-llama: $*" >&2; }

# A second ggml-cpu for CPUs without AVX512 (most laptops and desktops: AVX2), at $prefix/lib/avx2/:
# the patch's AVX2 paths, which this build's -march=native never compiles on an AVX512 machine. The
# tests load it in place of the native one (LD_PRELOAD; tests/CMakeLists.txt: test-kernels-avx2), so
# CI runs those paths too. x86-64 CPU builds whose compiler can target AVX2 only; its own stamp, so a
# cache from before it gains it without a rebuild of the rest (one ggml-cpu: ~3 minutes on 2 cores).
avx2_dir=$prefix/lib/avx2
build_avx2() {
    [ "$backend" = cpu ] && [ "$(uname -m)" = x86_64 ] || return 0
    [ -f "$avx2_dir/.editspec-complete" ] && return 0
    if [ ! -f "$patched_dir/ggml/CMakeLists.txt" ]; then
        log "no patched source at $patched_dir: the AVX2 ggml-cpu is not built (test-kernels-avx2 skips)"
        return 0
    fi
    log "building the AVX2 ggml-cpu (for CPUs without AVX512; the tests run its paths) with $(nproc 2>/dev/null || echo 2) jobs"
    local b=$build_dir-avx2
    cmake -S "$patched_dir" -B "$b" -DCMAKE_BUILD_TYPE=Release -DBUILD_SHARED_LIBS=ON -DLLAMA_BUILD_TESTS=OFF \
        -DLLAMA_BUILD_EXAMPLES=OFF -DLLAMA_BUILD_TOOLS=OFF -DLLAMA_BUILD_SERVER=OFF -DLLAMA_BUILD_COMMON=OFF \
        -DLLAMA_OPENSSL=OFF -DGGML_NATIVE=OFF -DGGML_AVX=ON -DGGML_AVX2=ON -DGGML_FMA=ON -DGGML_F16C=ON \
        -DGGML_BMI2=ON -DGGML_AVX512=OFF -DGGML_LLAMAFILE=ON -DGGML_RPC=ON >"$b.configure.log" 2>&1 \
        || { cat "$b.configure.log" >&2; exit 1; }
    cmake --build "$b" -j "$(nproc 2>/dev/null || echo 2)" --target ggml-cpu >"$b.build.log" 2>&1 \
        || { tail -50 "$b.build.log" >&2; exit 1; }
    mkdir -p "$avx2_dir"
    cp -P "$b"/bin/libggml-cpu.so* "$avx2_dir/"
    touch "$avx2_dir/.editspec-complete"
    log "installed the AVX2 ggml-cpu to $avx2_dir"
}

# llama.cpp's chat library's own headers (common/jinja/: chat.h includes them) and the model chat templates
# of its tests (models/templates/, read by editspec's tool-call tests): their own stamp, so a cache from
# before them gains them without a rebuild (files only)
chat_stamp=$prefix/include/llama-common/jinja/.editspec-complete
install_chat_files() {
    [ -f "$chat_stamp" ] && return 0
    local from=$patched_dir
    [ -f "$from/common/jinja/runtime.h" ] || from=$src_dir
    if [ ! -f "$from/common/jinja/runtime.h" ]; then
        log "no llama.cpp source at $patched_dir: the chat library's headers are not installed (tool calls off)"
        return 0
    fi
    mkdir -p "$prefix/include/llama-common/jinja" "$prefix/share/editspec/templates"
    cp "$from"/common/jinja/*.h "$prefix/include/llama-common/jinja/"
    cp "$from"/models/templates/*.jinja "$prefix/share/editspec/templates/"
    touch "$chat_stamp"
}

if [ -f "$stamp" ]; then
    install_chat_files
    build_avx2
    log "cached llama.cpp $LLAMA_COMMIT ($variant) at $prefix"
    echo "$prefix"
    exit 0
fi

mkdir -p "$cache_root"
work=$(mktemp -d "$cache_root/fetch.XXXXXX")
trap 'rm -rf "$work"' EXIT

if [ -n "${EDITSPEC_LLAMA_SRC:-}" ] && [ ! -d "$src_dir" ]; then
    # a source tree without git history: its commit cannot be checked, its files are taken as given
    if [ ! -f "$EDITSPEC_LLAMA_SRC/ggml/CMakeLists.txt" ]; then
        log "error: EDITSPEC_LLAMA_SRC=$EDITSPEC_LLAMA_SRC is not a llama.cpp source tree (no ggml/CMakeLists.txt)"
        exit 2
    fi
    log "using the llama.cpp source tree $EDITSPEC_LLAMA_SRC as commit $LLAMA_COMMIT (not verified: no git history)"
    mkdir -p "$(dirname "$src_dir")"
    cp -a "$EDITSPEC_LLAMA_SRC" "$src_dir"
fi

if [ ! -d "$src_dir" ]; then
    log "fetching node-llama-cpp@$NLC_VERSION from the npm registry (pack only, no scripts)"
    (cd "$work" && npm pack --silent "node-llama-cpp@$NLC_VERSION" >/dev/null)
    tgz=$(ls "$work"/node-llama-cpp-*.tgz)
    got=$(sha256sum "$tgz" | cut -d' ' -f1)
    if [ "$got" != "$TARBALL_SHA256" ]; then
        log "error: $tgz: sha256 $got, expected $TARBALL_SHA256"
        exit 2
    fi
    tar -xzf "$tgz" -C "$work" package/llama/gitRelease.bundle
    bundle=$work/package/llama/gitRelease.bundle
    got=$(sha256sum "$bundle" | cut -d' ' -f1)
    if [ "$got" != "$BUNDLE_SHA256" ]; then
        log "error: $bundle: sha256 $got, expected $BUNDLE_SHA256"
        exit 2
    fi
    rm -rf "$src_dir"
    mkdir -p "$(dirname "$src_dir")"
    git -c advice.detachedHead=false clone --quiet "$bundle" "$src_dir.tmp"
    git -C "$src_dir.tmp" -c advice.detachedHead=false checkout --quiet "$LLAMA_COMMIT"
    mv "$src_dir.tmp" "$src_dir"
fi

rm -rf "$patched_dir"
if [ -d "$src_dir/.git" ]; then
    head=$(git -C "$src_dir" rev-parse HEAD)
    if [ "$head" != "$LLAMA_COMMIT" ]; then
        log "error: $src_dir is at $head, expected $LLAMA_COMMIT"
        exit 2
    fi
    # the pinned commit stays pristine in $src_dir; each patch version gets its own clone
    git clone --quiet --shared --no-checkout "$src_dir" "$patched_dir"
    git -C "$patched_dir" -c advice.detachedHead=false checkout --quiet "$LLAMA_COMMIT"
else
    cp -a "$src_dir" "$patched_dir"
fi
for f in "${patch_files[@]}"; do
    if ! (cd "$patched_dir" && git apply --whitespace=nowarn "$f"); then
        log "error: $f does not apply to llama.cpp $LLAMA_COMMIT"
        exit 2
    fi
    log "applied $(basename "$f")"
done
log "patches' sha256 ${patch_sha:0:12}"
if [ "$backend" = cuda ]; then
    if ! (cd "$patched_dir" && git apply --whitespace=nowarn "$cuda_patch"); then
        log "error: $cuda_patch does not apply to llama.cpp $LLAMA_COMMIT"
        exit 2
    fi
    log "applied $(basename "$cuda_patch") (sha256 ${cuda_sha:0:12})"
fi

jobs=$(nproc 2>/dev/null || echo 2)
backend_args=()
if [ "$backend" = cuda ]; then
    # one architecture, flash attention for the F16 KV cache editspec uses, no multi-GPU library,
    # uncompressed kernels: the fastest CUDA build that serves editspec
    backend_args=(-DGGML_CUDA=ON "-DCMAKE_CUDA_ARCHITECTURES=$cuda_arch" -DGGML_CUDA_FA_QUANTS=f16-f16
        -DGGML_CUDA_NCCL=OFF -DGGML_CUDA_COMPRESSION_MODE=none)
    log "building libllama + ggml (CPU and CUDA $cuda_arch) with $jobs jobs; the CUDA kernels take minutes"
else
    log "building libllama + ggml (CPU, batch-invariant kernels) with $jobs jobs; this takes about 5 minutes once"
fi
# No AMX kernels, though -march=native enables them on CPUs that have AMX (Sapphire Rapids and later):
# our patch makes the sgemm kernels batch-invariant, not AMX's, and AMX's Q8_0 and K-quant kernels
# crashed the tests on such a CPU (SIGILL in tinygemm_kernel_amx, 2026-11-27). GCC lets an explicit
# -mno- flag win over what -march implies, wherever it stands on the command line.
no_amx="-mno-amx-tile -mno-amx-int8 -mno-amx-bf16"
generator=()
if [ "$backend" = cuda ] && command -v ninja >/dev/null; then generator=(-G Ninja); fi
cmake -S "$patched_dir" -B "$build_dir" "${generator[@]}" "${backend_args[@]}" -DCMAKE_BUILD_TYPE=Release \
    -DBUILD_SHARED_LIBS=ON -DLLAMA_BUILD_TESTS=OFF -DLLAMA_BUILD_EXAMPLES=OFF \
    -DLLAMA_BUILD_TOOLS=OFF -DLLAMA_BUILD_SERVER=OFF -DLLAMA_BUILD_APP=OFF \
    -DLLAMA_BUILD_COMMON=ON -DLLAMA_OPENSSL=OFF \
    -DGGML_NATIVE=ON -DGGML_LLAMAFILE=ON -DGGML_RPC=ON -DCMAKE_INSTALL_PREFIX="$prefix" \
    -DGGML_AMX_TILE=OFF -DGGML_AMX_INT8=OFF -DGGML_AMX_BF16=OFF \
    -DCMAKE_C_FLAGS="$no_amx" -DCMAKE_CXX_FLAGS="$no_amx" \
    -DCMAKE_SHARED_LINKER_FLAGS="-Wl,--exclude-libs,ALL" >"$work/configure.log" 2>&1 \
    || { cat "$work/configure.log" >&2; exit 1; }
# --exclude-libs: libllama-common links llama.cpp's own copy of cpp-httplib as a static archive and
# would export its ~1000 httplib:: symbols, which then interpose on Debian's libcpp-httplib (another
# version) in editspec's server and tests, depending on link order (a crash in Client::Get)
cmake --build "$build_dir" -j "$jobs" --target llama llama-common >"$work/build.log" 2>&1 \
    || { tail -50 "$work/build.log" >&2; exit 1; }
cmake --install "$build_dir" >/dev/null
# llama.cpp does not install its common library; editspec's bench runs its speculative drafters
# in-process (llama-ngram-* methods), so copy it and its headers beside libllama
cp -P "$build_dir"/bin/libllama-common.so* "$prefix/lib/"
mkdir -p "$prefix/include/llama-common"
cp "$patched_dir"/common/*.h "$prefix/include/llama-common/"
# vocab files carry the real tokenizers make-model uses
mkdir -p "$prefix/share/editspec/vocab"
cp "$patched_dir"/models/ggml-vocab-*.gguf "$prefix/share/editspec/vocab/"
touch "$stamp"
log "installed llama.cpp $LLAMA_COMMIT to $prefix"
install_chat_files
build_avx2
echo "$prefix"
