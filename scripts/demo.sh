#!/usr/bin/env bash
# The README's main command: build editspec, then run the main job on the default model, fast
# apply: merge the edit snippets of docs/examples/apply (shaped as LLMs write them) into their
# files, check each merged file against the expected one, and time the merges A/B against plain
# decoding in the same run; where the datasets are found, the same on 10 CanItEdit edits made into
# apply tasks. Every figure is labelled with what it is.
#
# The default model is the shipped pair (models/editspec-target.gguf, fine-tuned for fast apply by
# tools/train, and its draft model). Without it (or with EDITSPEC_MODEL set to another model), a
# tiny random-weight model with the DeepSeek-Coder tokenizer stands in; its text is noise, so the
# demo then runs only a replay benchmark, where the dataset's reference output stands in for the
# model's choices and every pass still runs.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
"$root/scripts/build.sh"
"$root/scripts/deb-install.sh" patch   # the examples' expected files are patches
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
if [ "$shipped" = 1 ]; then
    # fast apply: the snippets in docs/examples/apply are shaped as LLMs write them; --constrain keeps
    # every merged line a line of the file or of the snippet (a 15M model's free copy slips)
    ex=$root/docs/examples/apply
    out=$root/build/demo-apply
    mkdir -p "$out"
    echo "== fast apply: the snippet an LLM proposed for docs/examples/apply/inventory.py"
    cat "$ex/inventory.update.py"
    echo "== editspec apply --constrain (model: $model): the merged file, as a diff against the original"
    "$bin" apply -m "$model" -f "$ex/inventory.py" -u "$ex/inventory.update.py" --constrain --diff -t 1
    echo "== each example's merged file against the expected one (NAME.py patched with NAME.patch)"
    for name in inventory retry wordstats; do
        "$bin" apply -m "$model" -f "$ex/$name.py" -u "$ex/$name.update.py" --constrain -t 1 > "$out/$name.merged.py"
        patch -s -o "$out/$name.expected.py" "$ex/$name.py" < "$ex/$name.patch"
        if cmp -s "$out/$name.merged.py" "$out/$name.expected.py"; then
            echo "$name.py: merged file equals the expected file"
        else
            echo "$name.py: merged file DIFFERS from the expected file:"
            diff "$out/$name.expected.py" "$out/$name.merged.py" || true
        fi
    done
    python3 - "$ex" "$out" > "$out/examples.jsonl" <<'EOF'
import json, sys
ex, out = sys.argv[1], sys.argv[2]
for name in ("inventory", "retry", "wordstats"):
    read = lambda p: open(p, encoding="utf-8").read()
    print(json.dumps({"id": name, "instruction_descriptive": "Apply the update to the code.", "instruction_lazy": "", "tests": "",
                      "code_before": read(f"{ex}/{name}.py"), "update": read(f"{ex}/{name}.update.py"),
                      "code_after": read(f"{out}/{name}.expected.py")}))
EOF
    echo "== editspec bench --task apply --constrain: the three examples, each method A/B against plain decoding (ar) in this run"
    "$bin" bench -m "$model" --dataset "$out/examples.jsonl" --task apply --constrain \
        --methods ar,reuse,reuse+lookup-longest -t 1 --setting "shipped model, docs/examples/apply" --out "$out/bench"
    echo "(report: $out/bench/report.md; 'exact' = the merged file equals the expected one)"
fi

datasets=${EDITSPEC_DATASETS:-$root/datasets}
if [ ! -d "$datasets/canitedit" ]; then
    echo "(no datasets at $datasets: set EDITSPEC_DATASETS to run the benchmark part)"
    exit 0
fi
if [ "$shipped" = 1 ]; then
    echo "== editspec bench --task apply --constrain: the edits of CanItEdit's first 20 items that fit the model's 1,024-token training context, as apply tasks (snippet: the reference diff's hunks with markers around them)"
    "$bin" bench -m "$model" --dataset "$datasets/canitedit/normalized.jsonl" --task apply --constrain --fit-train-ctx --limit 20 \
        --methods ar,reuse,reuse+lookup-longest -t 1 --setting "shipped model, CanItEdit as apply tasks" --out "$root/build/bench-demo"
    echo "('exact' = the merged file equals CanItEdit's code_after)"
else
    echo "== editspec bench: CanItEdit, 10 items, replay"
    "$bin" bench -m "$model" --dataset "$datasets/canitedit/normalized.jsonl" --task edit --replay --limit 10 \
        --methods ar,lookup,lookup-longest,lookup-longest@48 --threads 1 --out "$root/build/bench-demo"
fi
echo "== report: $root/build/bench-demo/report.md"
