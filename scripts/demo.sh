#!/usr/bin/env bash
# The README's main command: build editspec, then run the main job on the default model: a
# completion, an edit of a real file, and a short A/B benchmark of the decoding methods on CanItEdit.
#
# The default model is the shipped pair (models/editspec-target.gguf and its draft model, made by
# tools/train): real outputs, so the benchmark decodes for real and runs each item's tests (pass@1).
# Without them (or with EDITSPEC_MODEL set to a model without a draft), a tiny random-weight model
# with the DeepSeek-Coder tokenizer stands in; its text is noise, so that benchmark runs in replay
# mode, where the dataset's reference output stands in for the model's choices and every pass
# still runs.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
"$root/scripts/build.sh"
bin=$root/build/bin/editspec
model=${EDITSPEC_MODEL:-}
shipped=0
if [ -z "$model" ]; then
    if [ -f "$root/models/editspec-target.gguf" ]; then
        model=$root/models/editspec-target.gguf
        shipped=1
    else
        model=$root/build/models/default.gguf
        if [ ! -f "$model" ]; then
            mkdir -p "$(dirname "$model")"
            "$bin" make-model --shape tiny --type q8_0 --seed 1 --out "$model"
        fi
    fi
fi
echo "== editspec complete (model: $model)"
printf 'import os\n\n\ndef read_lines(path):\n    """Return the lines of the file at path."""\n    with open(path) as f:' \
    > "$root/build/demo-prompt.py"
"$bin" complete -m "$model" -f "$root/build/demo-prompt.py" -n 48

if [ "$shipped" = 1 ]; then
    sample=$root/docs/examples/average.py
    echo "== editspec edit $sample: a rename, as a diff (efficientedit: reuse + draft model)"
    "$bin" edit -m "$model" -f "$sample" -i 'Rename the variable `total` to `running_sum`.' --method efficientedit --diff
fi

datasets=${EDITSPEC_DATASETS:-$root/../shared/datasets}
if [ ! -d "$datasets/canitedit" ]; then
    echo "(no datasets at $datasets: set EDITSPEC_DATASETS to run the benchmark part)"
    exit 0
fi
if [ "$shipped" = 1 ]; then
    echo "== editspec bench: CanItEdit, 10 items, the shipped models' own outputs, pass@1"
    "$bin" bench -m "$model" --dataset "$datasets/canitedit/normalized.jsonl" --task edit --limit 10 -n 256 \
        --methods ar,lookup,reuse,reuse+lookup,sd,reuse+sd,efficientedit --tests --threads 1 \
        --setting "shipped model" --out "$root/build/bench-demo"
else
    echo "== editspec bench: CanItEdit, 10 items, replay"
    "$bin" bench -m "$model" --dataset "$datasets/canitedit/normalized.jsonl" --task edit --replay --limit 10 \
        --methods ar,lookup,lookup-longest,lookup-longest@48 --threads 1 --out "$root/build/bench-demo"
fi
echo "== report: $root/build/bench-demo/report.md"
