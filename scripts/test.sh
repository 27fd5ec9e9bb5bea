#!/usr/bin/env bash
# Build editspec and run the whole test suite (ctest). The README's test command; .ci/run calls it.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
build_dir=${BUILD_DIR:-$root/build}
# the training pipeline's test (tools/train/test_pipeline.py) runs torch from Debian's packages
"$root/scripts/deb-install.sh" python3-numpy python3-torch libopenblas0-pthread
"$root/scripts/build.sh"
jobs=$(nproc 2>/dev/null || echo 2)
(cd "$build_dir" && ctest --output-on-failure -j "$jobs" "$@")

# the unit suite again with AddressSanitizer and UBSan (build-asan/; SANITIZE=0 skips it). Left out
# there: the long model sweeps (every CanItEdit item, every weight type, the training pipeline, the
# constrained-apply sweep over methods, threads and weight types: 19 minutes under the sanitizers, near
# its time limit) and the draft-model test, which the plain run above covers.
if [ "${SANITIZE:-1}" != 0 ]; then
    asan_dir=${ASAN_BUILD_DIR:-$root/build-asan}
    echo "test: the unit suite under ASan + UBSan ($asan_dir)" >&2
    CMAKE_ARGS="-DEDITSPEC_SANITIZE=ON -DCMAKE_BUILD_TYPE=RelWithDebInfo" BUILD_DIR=$asan_dir "$root/scripts/build.sh"
    (cd "$asan_dir" && ctest --output-on-failure -j "$jobs" -E 'test-bench-lossless|test-batch-exact|train-pipeline|test-model$|test-apply-constraint')
fi
