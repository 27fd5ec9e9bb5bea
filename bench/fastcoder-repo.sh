#!/usr/bin/env bash
# Issue 23's repository-level bench: a Debian-packaged Python library's functions (bench/repo-task.py),
# replayed on a model (real-shape with random weights: --replay makes the reference the target's
# output), every method A/B in one process: ar, rest (D_c only), fastcoder and its ablations,
# llama.cpp's ngram-cache with a static cache of the same corpus, lookup-longest.
#
#   bench/fastcoder-repo.sh MODEL.gguf [THREADS] [OUT] [PACKAGE_DIR]
#
# MODEL: e.g. a ds13-shaped model (`editspec make-model --shape deepseek-coder-1.3b --type q4_k_m`).
# PACKAGE_DIR defaults to Debian's python3-click (installed when missing). The task and its
# datastores are built once per model under OUT/task.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
root="$(dirname "$here")"
model="${1:?usage: bench/fastcoder-repo.sh MODEL.gguf [THREADS] [OUT] [PACKAGE_DIR]}"
threads="${2:-2}"
out="${3:-$root/build/fastcoder-repo}"
pkg="${4:-/usr/lib/python3/dist-packages/click}"
editspec="$root/build/bin/editspec"
[ -x "$editspec" ] || { echo "fastcoder-repo: build first (scripts/build.sh)" >&2; exit 2; }
[ -f "$model" ] || { echo "fastcoder-repo: $model: no such model" >&2; exit 2; }
if [ ! -d "$pkg" ] && [ "$pkg" = /usr/lib/python3/dist-packages/click ]; then
    bash "$root/scripts/deb-install.sh" python3-click
fi
task="$out/task"
if [ ! -f "$task/repo-task.jsonl" ] || [ "$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["model"])' "$task/manifest.json")" != "$(realpath "$model")" ]; then
    python3 "$here/repo-task.py" --package "$pkg" -m "$model" --out "$task"
fi
methods=ar,rest,fastcoder,fastcoder-no-repo,fastcoder-no-cache,fastcoder-no-timing,fastcoder-no-context,llama-ngram-cache,lookup-longest
"$editspec" bench -m "$model" --dataset "$task/repo-task.jsonl" --replay --datastore "$task/common.eds" \
    --methods "$methods" -t "$threads" --out "$out/run"
echo "fastcoder-repo: report in $out/run/report.md" >&2
