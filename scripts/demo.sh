#!/usr/bin/env bash
# The README's main command: build editspec, make the default model if there is none yet, and run
# the main job: a completion, then a short A/B benchmark of speculative decoding on CanItEdit.
#
# Until the trained models land (models/), the default model is generated with random weights
# (DeepSeek-Coder tokenizer, tiny shape): its text is noise, so the benchmark runs in replay mode,
# where the dataset's reference output stands in for the model's choices and every pass still runs.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
"$root/scripts/build.sh"
bin=$root/build/bin/editspec
model=${EDITSPEC_MODEL:-}
if [ -z "$model" ]; then
    if [ -f "$root/models/editspec-target.gguf" ]; then
        model=$root/models/editspec-target.gguf
    else
        model=$root/build/models/default.gguf
        if [ ! -f "$model" ]; then
            mkdir -p "$(dirname "$model")"
            "$bin" make-model --shape tiny --type q8_0 --seed 1 --out "$model"
        fi
    fi
fi
echo "== editspec complete (model: $model)"
"$bin" complete -m "$model" -p "def fibonacci(n):" -n 32 --json
datasets=${EDITSPEC_DATASETS:-$root/../shared/datasets}
if [ -d "$datasets/canitedit" ]; then
    echo "== editspec bench: CanItEdit, 10 items, replay"
    "$bin" bench -m "$model" --dataset "$datasets/canitedit/normalized.jsonl" --task edit --replay --limit 10 \
        --methods ar,lookup,lookup-longest,lookup-longest@48 --threads 1 --out "$root/build/bench-demo"
    echo "== report: $root/build/bench-demo/report.md"
else
    echo "(no datasets at $datasets: set EDITSPEC_DATASETS to run the benchmark part)"
fi
