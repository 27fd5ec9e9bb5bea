#!/usr/bin/env bash
# Time to first token of a chat turn that extends a cached conversation, against the same turn with
# the whole conversation decoded again (`editspec chat --no-prompt-cache`), alternated A B A B ... in
# one run. The conversation: CanItEdit files pasted turn by turn ("Review this file") until the
# history holds about HISTORY tokens, then a short last turn, which is the one timed.
#
#   bench/chat-ttft.sh [MODEL=shipped target] [ROUNDS=3] [HISTORY=2048] [THREADS=2]
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
model=${1:-$root/models/editspec-target.gguf}
rounds=${2:-3}
history=${3:-2048}
threads=${4:-2}
es=$root/build/bin/editspec
[ -x "$es" ] || { echo "build editspec first (scripts/build.sh)" >&2; exit 2; }
dataset=${DATASET:-$root/datasets/canitedit/normalized.jsonl}
[ -f "$dataset" ] || { echo "no dataset at $dataset (DATASET=...)" >&2; exit 2; }
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
# about 3.5 characters per token for Python: files until the history is reached, answers of 16 tokens
python3 - "$dataset" "$history" >"$work/turns.txt" <<'PY'
import json, sys
chars, want = 0, int(sys.argv[2]) * 3.5
turns = []
for line in open(sys.argv[1]):
    code = json.loads(line)["code_before"]
    turns.append("Review this file:\n" + code)
    chars += len(code)
    if chars >= want:
        break
turns.append("Now say in one line what the first file does.")
print("\n---\n".join(turns))
PY
n_turns=$(grep -c '^---$' "$work/turns.txt"); n_turns=$((n_turns + 1))
for r in $(seq 1 "$rounds"); do
    "$es" chat -m "$model" -f "$work/turns.txt" -t "$threads" -n 16 -c 8192 --json 2>/dev/null | tail -n 1 >>"$work/cached.jsonl"
    "$es" chat -m "$model" -f "$work/turns.txt" -t "$threads" -n 16 -c 8192 --json --no-prompt-cache 2>/dev/null | tail -n 1 >>"$work/fresh.jsonl"
    echo "round $r done" >&2
done
python3 - "$work" "$model" "$threads" "$n_turns" <<'PY'
import json, statistics, sys
work, model, threads, n_turns = sys.argv[1:5]
cached = [json.loads(l) for l in open(f"{work}/cached.jsonl")]
fresh = [json.loads(l) for l in open(f"{work}/fresh.jsonl")]
ratios = [f["ttft_ms"] / c["ttft_ms"] for c, f in zip(cached, fresh)]
same = all(c["text"] == f["text"] for c, f in zip(cached, fresh))
c0, f0 = cached[0], fresh[0]
each = lambda runs: ", ".join(f"{x['ttft_ms']:.1f}" for x in runs)
print(f"# {model}, {threads} threads; turn {n_turns} of a conversation of {c0['prompt_tokens']} prompt tokens; {len(ratios)} rounds A/B")
print("| last turn | prompt tokens decoded | time to first token, ms (median) | each round |")
print("| --- | ---: | ---: | --- |")
print(f"| extends the cached conversation | {c0['prompt_tokens'] - c0['prompt_cached']} | {statistics.median(c['ttft_ms'] for c in cached):.1f} | {each(cached)} |")
print(f"| decodes the whole conversation again | {f0['prompt_tokens'] - f0['prompt_cached']} | {statistics.median(f['ttft_ms'] for f in fresh):.1f} | {each(fresh)} |")
print(f"\nratio (fresh / cached, median of rounds): {statistics.median(ratios):.1f}x ({', '.join(f'{x:.1f}' for x in ratios)}); same answer: {'yes' if same else 'NO'}")
PY
