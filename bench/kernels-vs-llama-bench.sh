#!/usr/bin/env bash
# The cost of one pass by its size: `editspec cost` (editspec's build: batch-invariant kernels)
# against llama.cpp's own llama-bench from its default, unpatched build (scripts/setup-peers.sh),
# same GGUF file, threads, KV depth and flash attention off, alternated A B A B ... in one run.
# Prints each round and, per size, the median tokens/s of both and the median ratio.
#
#   bench/kernels-vs-llama-bench.sh MODEL [THREADS=2] [ROUNDS=3] [DEPTH=256]
#
# Single tokens: editspec's 1-token pass against llama-bench's tg (32 tokens generated at DEPTH).
# llama-bench's pp computes the logits of a pass's last row only; a verification pass needs every
# row's, so `editspec cost` runs the output layer n times where llama-bench runs it once. The last
# column times editspec on llama-bench's work (`editspec cost --last-logits`): the kernels alone.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
model=${1:?usage: $0 MODEL [THREADS] [ROUNDS] [DEPTH]}
threads=${2:-2}
rounds=${3:-3}
depth=${4:-256}
peers=$("$root/scripts/setup-peers.sh" | tail -n 1)
es=$root/build/bin/editspec
[ -x "$es" ] || { echo "build editspec first (scripts/build.sh)" >&2; exit 2; }
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
for r in $(seq 1 "$rounds"); do
    "$es" cost -m "$model" -t "$threads" --max 64 --reps 3 --prefix "$depth" --depths 0 --no-flash-attn --fresh --no-save \
        >"$out/es-$r.txt" 2>/dev/null
    "$es" cost -m "$model" -t "$threads" --max 64 --reps 3 --prefix "$depth" --depths 0 --no-flash-attn --fresh --last-logits \
        >"$out/esl-$r.txt" 2>/dev/null
    "$peers/llama-bench" -m "$model" -t "$threads" -p 8,32,64 -n 32 -d "$depth" -fa 0 -r 3 -o json \
        >"$out/lb-$r.json" 2>/dev/null
    echo "round $r done" >&2
done
python3 - "$out" "$rounds" "$model" "$threads" "$depth" <<'PY'
import json, statistics, sys
out, rounds, model, threads, depth = sys.argv[1], int(sys.argv[2]), sys.argv[3], sys.argv[4], sys.argv[5]
es, esl, lb = {}, {}, {}
for r in range(1, rounds + 1):
    for name, d in (("es", es), ("esl", esl)):
        for line in open(f"{out}/{name}-{r}.txt"):
            f = line.split()
            if len(f) >= 4 and f[0].isdigit():  # tokens, ms, tokens/s, cost vs 1[, ms@D ...]
                d.setdefault(int(f[0]), []).append(float(f[2]))
    for t in json.load(open(f"{out}/lb-{r}.json")):
        n = t["n_prompt"] if t["n_prompt"] > 0 else 1  # tg: one token per pass
        lb.setdefault(n, []).append(t["avg_ts"])
print(f"# {model}, {threads} threads, KV depth {depth}, flash attention off, {rounds} rounds A/B")
print("| tokens per pass | editspec tok/s | llama-bench tok/s | ratio (median of rounds) | editspec, last row's logits only: tok/s | ratio |")
print("| --- | --- | --- | --- | --- | --- |")
for n in sorted(lb):
    if n not in es:
        continue
    ratios = [a / b for a, b in zip(es[n], lb[n])]
    rl = [a / b for a, b in zip(esl[n], lb[n])]
    name = "1 (tg)" if n == 1 else str(n)
    print(f"| {name} | {statistics.median(es[n]):.2f} | {statistics.median(lb[n]):.2f} | "
          f"{statistics.median(ratios):.3f} ({', '.join(f'{x:.3f}' for x in ratios)}) | "
          f"{statistics.median(esl[n]):.2f} | {statistics.median(rl):.3f} ({', '.join(f'{x:.3f}' for x in rl)}) |")
PY
