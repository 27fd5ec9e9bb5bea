#!/usr/bin/env bash
# The README's main command: build editspec, then run the main job on the default model: fast apply.
#
# An LLM proposes a change as a snippet that elides unchanged code ("# ... existing code ...");
# `editspec apply` has the shipped model write out the whole merged file, with the original file as
# the prediction (Reuse drafts it), lossless: the output is exactly the model's greedy output.
#
#   1. `editspec apply` merges docs/examples/apply/inventory.update.py into inventory.py and prints
#      the diff, then checks the merged file against inventory.expected.py;
#   2. `editspec bench --task apply` runs the three examples of docs/examples/apply A/B in one
#      process, plain decoding (ar) against the default method: exact matches and the speedup;
#   3. with the benchmark datasets (../shared/datasets or EDITSPEC_DATASETS): the same on the
#      CanItEdit edits that fit the model's context, as apply tasks.
#
# The default model is the shipped pair (models/, made by tools/train). Without it (or with
# EDITSPEC_MODEL set to a model without a draft), a tiny random-weight model stands in, whose text
# is noise: then the benchmark runs in replay mode, where the dataset's reference output stands in
# for the model's choices and every pass still runs.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
"$root/scripts/build.sh"
bin=$root/build/bin/editspec
ex=$root/docs/examples/apply
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

# the examples as one benchmark file (CanItEdit's fields; `update` is the snippet)
tasks=$root/build/demo-apply-tasks.jsonl
python3 - "$ex" "$tasks" <<'EOF'
import json, sys
ex, out = sys.argv[1], sys.argv[2]
with open(out, "w") as f:
    for name in ("inventory", "wordstats", "retry"):
        rd = lambda suffix: open(f"{ex}/{name}{suffix}", encoding="utf-8").read()
        f.write(json.dumps({"id": name, "instruction_descriptive": "Apply the update to the code.", "instruction_lazy": "",
                            "code_before": rd(".py"), "code_after": rd(".expected.py"), "update": rd(".update.py"),
                            "tests": "", "change_kind": "apply"}) + "\n")
EOF

if [ "$shipped" = 1 ]; then
    echo "== the update an LLM proposed for docs/examples/apply/inventory.py:"
    cat "$ex/inventory.update.py"
    echo "== editspec apply -f inventory.py -u inventory.update.py --diff (model: $model)"
    "$bin" apply -f "$ex/inventory.py" -u "$ex/inventory.update.py" --diff
    "$bin" apply -f "$ex/inventory.py" -u "$ex/inventory.update.py" > "$root/build/demo-merged.py"
    if cmp -s "$root/build/demo-merged.py" "$ex/inventory.expected.py"; then
        echo "== the merged file equals docs/examples/apply/inventory.expected.py"
    else
        echo "== the merged file differs from docs/examples/apply/inventory.expected.py"
    fi
    echo "== editspec bench --task apply: the 3 examples, plain decoding (ar) vs the default method, 1 thread"
    "$bin" bench -m "$model" --dataset "$tasks" --task apply --methods ar,reuse+lookup-longest --threads 1 \
        --setting "shipped model" --out "$root/build/bench-apply-demo"
else
    echo "== editspec bench --task apply --replay: the 3 examples (model: $model, random weights: replay)"
    "$bin" bench -m "$model" --dataset "$tasks" --task apply --replay --methods ar,reuse,reuse+lookup-longest \
        --threads 1 --out "$root/build/bench-apply-demo"
fi
echo "== report: $root/build/bench-apply-demo/report.md"

datasets=${EDITSPEC_DATASETS:-$root/../shared/datasets}
if [ ! -d "$datasets/canitedit" ]; then
    echo "(no datasets at $datasets: set EDITSPEC_DATASETS to run the CanItEdit part)"
    exit 0
fi
if [ "$shipped" = 1 ]; then
    echo "== editspec bench --task apply: CanItEdit's edits that fit the model's context, as apply tasks, 1 thread"
    "$bin" bench -m "$model" --dataset "$datasets/canitedit/normalized.jsonl" --task apply --fit-train-ctx -n 1024 \
        --methods ar,reuse,reuse+lookup-longest --threads 1 --setting "shipped model" --out "$root/build/bench-demo"
else
    echo "== editspec bench --task apply --replay: CanItEdit, 10 items"
    "$bin" bench -m "$model" --dataset "$datasets/canitedit/normalized.jsonl" --task apply --replay --limit 10 \
        --methods ar,reuse,reuse+lookup-longest --threads 1 --out "$root/build/bench-demo"
fi
echo "== report: $root/build/bench-demo/report.md"
