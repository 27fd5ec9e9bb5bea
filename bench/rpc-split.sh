#!/usr/bin/env bash
# A model split over two `editspec rpc-server` workers on loopback against the same model in one
# process: identical greedy output (ar, and the speculative default on the split) and the speed of
# each, A/B twice in one run (docs/scale-out.md).
#
#   bench/rpc-split.sh [MODEL] [N_PREDICT]     MODEL default: a deepseek-coder-1.3b shape in Q8_0
#                                              (`editspec make-model --shape deepseek-coder-1.3b --type q8_0`)
# Threads: the single process gets 2; each worker 1 and the main process 1 (the same two cores).
# The prompt is a CanItEdit file (datasets/canitedit) with an instruction, about 400 tokens.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
bin=${EDITSPEC_BIN:-$root/build/bin/editspec}
model=${1:-/work/models-cache/ds13-q8_0.gguf}
n=${2:-64}
[ -f "$model" ] || { echo "rpc-split: $model not found (make it with editspec make-model)" >&2; exit 2; }
work=$(mktemp -d /tmp/editspec-rpc-split.XXXXXX)
pids=()
trap 'kill "${pids[@]}" 2>/dev/null || true; rm -rf "$work"' EXIT
python3 - "$root" >"$work/prompt.txt" <<'PY'
import json, sys
rows = [json.loads(l) for l in open(sys.argv[1] + "/datasets/canitedit/normalized.jsonl")]
r = rows[3]
print(f"# {r['instruction_descriptive']}\n{r['code_before']}", end="")
PY
port=$((23000 + RANDOM % 20000))
for w in 0 1; do
    "$bin" rpc-server -p $((port + w)) -t 1 >"$work/worker-$w.log" 2>&1 &
    pids+=($!)
done
sleep 1
rpc="127.0.0.1:$port,127.0.0.1:$((port + 1))"
run() { # label, then editspec complete's arguments
    local label=$1; shift
    "$bin" complete -m "$model" -f "$work/prompt.txt" -n "$n" --json "$@" 2>"$work/err.log" >"$work/$label.json" \
        || { cat "$work/err.log" >&2; exit 1; }
    python3 -c "
import json,sys; j=json.load(open('$work/$label.json'))
print(f\"{'$label':18s} prompt {j['prompt_tokens']:4d} tok in {j['prompt_ms']:8.0f} ms, {j['tokens']:3d} tokens at {j['tokens_per_s']:6.2f} tok/s, {j['tokens_per_pass']:.2f} per pass\")"
}
for rep in 1 2; do
    run "single-ar-$rep" --method ar -t 2
    run "split-ar-$rep" --method ar -t 1 --rpc "$rpc"
done
# one thread in one process: the split's workers run one thread each, one after the other, so the
# difference from this is what the round trips cost
run "single-ar-1thread" --method ar -t 1
run "split-auto" --method auto -t 1 --rpc "$rpc"
python3 - "$work" <<'PY'
import json, sys
d = sys.argv[1]
t = {k: json.load(open(f"{d}/{k}.json"))["text"] for k in ["single-ar-1", "single-ar-2", "split-ar-1", "split-ar-2", "split-auto", "single-ar-1thread"]}
same = len(set(t.values())) == 1
print("identical greedy output (single ar at 1 and 2 threads, split ar, split auto):", "yes" if same else "NO")
sys.exit(0 if same else 1)
PY
