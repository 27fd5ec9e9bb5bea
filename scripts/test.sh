#!/usr/bin/env bash
# Build editspec and run its tests (ctest). The README's test command; .ci/run calls it.
#
#   scripts/test.sh            the default tier (CI; under 15 minutes on 2 cores once llama.cpp is
#                              cached): every drafter family lossless against ar on every weight type
#                              we claim, 1 and 2 threads, adversarial drafts; the server, a hostile
#                              client, slow clients, faults, a one-minute soak; the parsers. Then its
#                              server, input and engine tests again under ASan + UBSan
#   scripts/test.sh --long     and the long tier (tests named *.long_*): every CanItEdit item x every
#                              method, every weight type to the end, the training pipeline. Run it
#                              before resolving an issue that touches decoding, drafting or verification.
#   scripts/test.sh [--long] ARGS...   ARGS go to both ctest runs (e.g. -R server)
#   SANITIZE=0 scripts/test.sh         without the sanitizer run
#
# Set-up (Debian packages, the pinned llama.cpp, the OpenAI Node SDK from the npm registry) happens
# here, before the tests; the tests themselves never reach the network.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
build_dir=${BUILD_DIR:-$root/build}
long=0
if [ "${1:-}" = "--long" ]; then
    long=1
    shift
fi
jobs=$(nproc 2>/dev/null || echo 2)
start=$(date +%s)
say() { echo "test: $* ($(( $(date +%s) - start )) s)" >&2; }

# the training pipeline's test (tools/train/test_pipeline.py, long tier) runs torch from Debian's packages
[ "$long" = 1 ] && "$root/scripts/deb-install.sh" python3-numpy python3-torch libopenblas0-pthread
# the replicas test's balancer (deploy/, bench/replicas.py)
"$root/scripts/deb-install.sh" haproxy curl
"$root/scripts/build.sh"
# the docs' cited figures against their results files, the README's defaults against --help (seconds)
python3 "$root/scripts/check-figures.py" --binary "$build_dir/bin/editspec"
# the server test's client: the OpenAI Node SDK, from the npm registry, once (cached in build/node)
"$root/tests/server/install-sdk.sh" "$root/build/node" >/dev/null
# under AddressSanitizer and UBSan (build-asan/): what takes input from outside, the engine's
# concurrency and the decode loop behind them (tests/CMakeLists.txt's EDITSPEC_NOT_SANITIZED says
# what is left to the plain run, and why). Built beside the plain tests at the lowest priority: it
# takes the cycles they leave (servers waiting on their clients) and little else.
sanitize=${SANITIZE:-1}
asan_dir=${ASAN_BUILD_DIR:-$root/build-asan}
asan_pid=
if [ "$sanitize" != 0 ]; then
    mkdir -p "$asan_dir"
    # clang compiles it in little more than half GCC's CPU time (both at -O0 -g1: 157 against 279 s on this
    # project's 2 cores), and the run is CPU-bound end to end; GCC where clang is not installed (a build
    # folder keeps the compiler it was configured with)
    asan_cc=()
    if command -v clang >/dev/null && command -v clang++ >/dev/null; then asan_cc=(CC=clang CXX=clang++); fi
    # the test models are the plain build's (the same bytes: make-model is seeded), not made again under ASan
    env "${asan_cc[@]}" CMAKE_ARGS="-DEDITSPEC_SANITIZE=ON -DCMAKE_BUILD_TYPE=RelWithDebInfo -DEDITSPEC_TEST_MODELS_FROM=$build_dir/test-models" \
        BUILD_DIR=$asan_dir BUILD_TARGETS=editspec_sanitized_tests \
        nice -n 19 "$root/scripts/build.sh" >"$asan_dir/build-beside.log" 2>&1 &
    asan_pid=$!
fi
say "built; the default tier$([ "$long" = 1 ] && echo " and the long tier")"
tier=()
[ "$long" = 1 ] || tier=(-E '\.long_')
rc=0
(cd "$build_dir" && ctest --output-on-failure -j "$jobs" "${tier[@]}" "$@") || rc=$?
if [ "$rc" != 0 ]; then
    if [ -n "$asan_pid" ]; then # the sanitizer build goes too
        pkill -TERM -P "$asan_pid" 2>/dev/null || true
        kill "$asan_pid" 2>/dev/null || true
    fi
    exit "$rc"
fi

if [ -n "$asan_pid" ]; then
    say "the default tier under ASan + UBSan ($asan_dir): its build"
    if ! wait "$asan_pid"; then
        cat "$asan_dir/build-beside.log" >&2
        exit 1
    fi
    say "the default tier under ASan + UBSan ($asan_dir)"
    # as tests/CMakeLists.txt's EDITSPEC_NOT_SANITIZED (it says why)
    unsanitized='test-batch-exact|test-kernels|test-bench-lossless|test-model|test-apply-constraint|test-speculative|test-oracle'
    unsanitized+='|test-bench|test-quality|test-make-model|test-rpc|test-reuse|test-fastcoder|test-retrieval|test-lookup'
    unsanitized+='|test-copy|test-heads|test-sizing|test-greedy|test-direct|test-topk|test-entropy|test-sampling|test-generate'
    unsanitized+='|test-tokenizer|test-chat|test-chat-tools|test-merge-whole'
    # and the tests whose time is not the server's or the engine's own code: the drafter sweeps, quality
    # floors, the README's commands, replicas behind HAProxy, the soak, the Node SDK (its requests are in
    # test-server's and test-hostile's own), and the count of OpenMP's threads (built by clang, the
    # sanitized server had 2 threads more with -t 2 than with 1, the plain one 1: not the product's runtime)
    plain_only='/typed_sweep\.|/q8_cache_sweep\.|lossless_fixture\.|server\.(replicas|readme|shipped_models|soak)|openai_node_sdk|openmp_team'
    (cd "$asan_dir" && LSAN_OPTIONS="suppressions=$root/tests/lsan.supp:print_suppressions=0" \
        ctest --output-on-failure -j "$jobs" -E "^($unsanitized)(:|_NOT_BUILT)|\\.long_|$plain_only" "$@")
fi
say "passed"
