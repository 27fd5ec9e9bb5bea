#!/usr/bin/env bash
# Build editspec and run the whole test suite (ctest). The README's test command; .ci/run calls it.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
build_dir=${BUILD_DIR:-$root/build}
# the training pipeline's test (tools/train/test_pipeline.py) runs torch from Debian's packages
"$root/scripts/deb-install.sh" python3-numpy python3-torch libopenblas0-pthread
"$root/scripts/build.sh"
cd "$build_dir"
ctest --output-on-failure -j "$(nproc 2>/dev/null || echo 2)" "$@"
