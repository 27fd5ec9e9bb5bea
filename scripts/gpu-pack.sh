#!/usr/bin/env bash
# Pack what a lent GPU machine needs for scripts/gpu-check.sh, so that its call builds nothing there
# (docs/development.md, "Rerun on a lent GPU machine"):
#
#   scripts/gpu-pack.sh [DIR]       DIR: default .gpu (git-ignored); carry it: run's carry [".gpu"]
#
#   DIR/cuda.tar.xz   lib/ bin/ share/: the pinned llama.cpp with our patches and its CUDA backend
#                     (setup-llama.sh's cuda variant, cached under ~/.cache/editspec: a second pack of the
#                     same patches builds nothing), llama-bench and llama-server from the same build;
#                     es/: bin/editspec (this checkout's build/) and lib/ (its Debian libraries)
#   DIR/apply3k.jsonl the two 3k-token applies of bench/apply-sizes.py (issue 73's plan)
#
# The first build takes ~40 minutes on 2 cores (the CUDA kernels; llama-server ~3 more), packing ~5.
# Needs nvcc (/usr/local/cuda, the device's CUDA release) and build/bin/editspec (scripts/build.sh).
# EDITSPEC_CUDA_ARCH: CMake's architecture, default 90 (Hopper: H100, H200); GPU_PACK_VOCABS: the make-model
# vocabularies packed (default "deepseek-coder qwen2").
# The call then: GPU_CHECK_PLAN=issue73 GPU_CHECK_SECONDS=570 scripts/gpu-check.sh .gpu, with models/ and
# docs/ moved aside (the working tree and DIR travel in 64 MiB).
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
case "${1:-}" in -h|--help) sed -n '2,18p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;; esac
dir=$(mkdir -p "${1:-$root/.gpu}" && cd "${1:-$root/.gpu}" && pwd)
arch=${EDITSPEC_CUDA_ARCH:-90}
jobs=$(nproc 2>/dev/null || echo 2)
start=$SECONDS
say() { echo "gpu-pack: $* ($((SECONDS - start)) s)" >&2; }
die() { echo "gpu-pack: error: $*" >&2; exit 1; }

es=$root/build/bin/editspec
[ -x "$es" ] || die "$es: not built (scripts/build.sh)"
export PATH=$PATH:/usr/local/cuda/bin
command -v nvcc >/dev/null || die "no nvcc (the CUDA toolkit, /usr/local/cuda): the CUDA libraries cannot be built here"

# --- the CUDA libraries: setup-llama.sh's cuda variant (patches applied, kernels for $arch)
say "llama.cpp with CUDA $arch (cached after the first build; ~40 minutes on 2 cores the first time)"
prefix=$(EDITSPEC_BACKEND=cuda EDITSPEC_CUDA_ARCH=$arch "$root/scripts/setup-llama.sh" | tail -n 1)
[ -f "$prefix/.editspec-complete" ] || die "setup-llama.sh gave no complete prefix ($prefix)"
variant=${prefix##*/install-}
cache=$(dirname "$prefix")
src=$cache/src-$variant
build=$cache/build-$variant
[ -d "$src" ] && [ -d "$build" ] || die "no source or build folder beside $prefix ($src, $build)"

# --- llama-server (the peer of bench/concurrency.py) from the same build folder: its tools configured on,
# linked without libcuda (the driver's, on the device)
if [ ! -x "$build/bin/llama-server" ] || [ "$build/bin/llama-server" -ot "$prefix/.editspec-complete" ]; then
    say "llama-server from $build"
    cmake -S "$src" -B "$build" -DLLAMA_BUILD_TOOLS=ON -DLLAMA_BUILD_SERVER=ON \
        -DCMAKE_EXE_LINKER_FLAGS=-Wl,--allow-shlib-undefined >"$build.server-configure.log" 2>&1 \
        || { tail -30 "$build.server-configure.log" >&2; die "configuring llama-server failed"; }
    cmake --build "$build" -j "$jobs" --target llama-server >"$build.server-build.log" 2>&1 \
        || { tail -30 "$build.server-build.log" >&2; die "building llama-server failed"; }
fi

# --- llama-bench, as gpu-check.sh builds it where nothing is carried
if [ ! -x "$build/llama-bench" ] || [ "$build/llama-bench" -ot "$prefix/.editspec-complete" ]; then
    say "llama-bench"
    g++ -O2 -DNDEBUG -std=c++17 -I"$src/tools/llama-bench" -I"$prefix/include" -I"$prefix/include/llama-common" \
        "$src/tools/llama-bench/llama-bench.cpp" "$src/tools/llama-bench/main.cpp" "$build/common/build-info.cpp" \
        -L"$prefix/lib" -Wl,--allow-shlib-undefined -lllama-common -lllama -lggml -lggml-base -lpthread \
        -o "$build/llama-bench"
fi

# --- the tarball's tree
stage=$(mktemp -d /tmp/gpu-pack.XXXXXX)
trap 'rm -rf "$stage"' EXIT
mkdir -p "$stage/bin" "$stage/es/bin" "$stage/es/lib"
cp -a "$prefix/lib" "$prefix/share" "$stage/"
rm -rf "$stage/lib/cmake" "$stage/lib/pkgconfig"
# the vocabularies of the shapes the plans make (ds13 and 6.7B: deepseek-coder; qwen2.5-coder-1.5b: qwen2); the
# other 20 would add 16 MB to a call that must fit 64 MiB
for v in "$stage"/share/editspec/vocab/ggml-vocab-*.gguf; do
    case " ${GPU_PACK_VOCABS:-deepseek-coder qwen2} " in *" $(basename "$v" .gguf | sed 's/^ggml-vocab-//') "*) ;; *) rm "$v" ;; esac
done
cp "$build/llama-bench" "$stage/bin/"
cp -P "$build/bin/llama-server" "$build"/bin/libllama-server-impl.so* "$build"/bin/libmtmd.so* "$stage/bin/" 2>/dev/null || true
[ -x "$stage/bin/llama-server" ] || die "no llama-server in $build/bin"
strip -o "$stage/es/bin/editspec" "$es"
# its RPATH names this machine's CPU build of libllama, searched before LD_LIBRARY_PATH: where that path exists
# the CPU libraries would load in place of the CUDA ones. The packed binary looks in the tarball's lib/ instead
# (the path's bytes in .dynstr overwritten, NUL-padded: no patchelf needed)
python3 - "$stage/es/bin/editspec" <<'PY'
import subprocess, sys
path = sys.argv[1]
out = subprocess.run(["readelf", "-d", path], capture_output=True, text=True, check=True).stdout
old = [l.split("[", 1)[1].rstrip("]") for l in out.splitlines() if "(RPATH)" in l or "(RUNPATH)" in l]
data = bytearray(open(path, "rb").read())
for o in old:
    ob, nb = o.encode(), b"$ORIGIN/../../lib"
    at = data.find(ob + b"\0")
    if at < 0 or data.find(ob + b"\0", at + 1) >= 0 or len(nb) > len(ob):
        sys.exit(f"gpu-pack: {path}: cannot rewrite its RPATH {o}")
    data[at:at + len(ob)] = nb + b"\0" * (len(ob) - len(nb))
open(path, "wb").write(data)
PY
# editspec's Debian libraries that a CUDA machine's image may lack
for l in libcpp-httplib.so.0.11 libdivsufsort.so.3 libbrotlidec.so.1 libbrotlienc.so.1 libbrotlicommon.so.1; do
    cp -L "/lib/x86_64-linux-gnu/$l" "$stage/es/lib/" 2>/dev/null || say "warning: no /lib/x86_64-linux-gnu/$l"
done
# the binary must link against these libraries' API (same commit): a missing symbol is said here, not there
LD_LIBRARY_PATH=$stage/es/lib ldd -r "$stage/es/bin/editspec" 2>&1 | grep -E "undefined symbol: llama_|not found" \
    | grep -v "libcuda" && die "editspec does not link against $prefix"
loaded=$(LD_LIBRARY_PATH=$stage/es/lib ldd "$stage/es/bin/editspec" | awk '$1 == "libllama.so.0" { print $3 }')
[ -n "$loaded" ] && [ "$(realpath "$loaded")" = "$(realpath "$stage/lib/libllama.so.0")" ] \
    || die "the packed editspec loads libllama from '$loaded', not the tarball's lib/"

say "packing $dir/cuda.tar.xz"
tar -C "$stage" -c lib bin share es | xz -T"$jobs" -9e >"$dir/cuda.tar.xz.tmp"
mv "$dir/cuda.tar.xz.tmp" "$dir/cuda.tar.xz"

# --- the 3k-token applies
python3 "$root/bench/apply-sizes.py" --out "$stage/sizes.jsonl" >/dev/null
grep '"3k-' "$stage/sizes.jsonl" >"$dir/apply3k.jsonl" || die "bench/apply-sizes.py made no 3k-token file"

say "done: $(du -sh "$dir/cuda.tar.xz" | cut -f1) cuda.tar.xz (llama.cpp $variant, editspec $(git -C "$root" rev-parse --short HEAD)), $(wc -l <"$dir/apply3k.jsonl") applies"
echo "gpu-pack: the call: move models/ and docs/ aside, then GPU_CHECK_PLAN=issue73 GPU_CHECK_SECONDS=570 scripts/gpu-check.sh .gpu (carry .gpu)" >&2
