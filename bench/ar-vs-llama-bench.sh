#!/usr/bin/env bash
# Autoregressive decoding speed: `editspec complete` against llama.cpp's own llama-bench on the
# same GGUF file and thread count, alternated A B A B ... in one run; prints each run and medians.
#
#   bench/ar-vs-llama-bench.sh MODEL [THREADS=2] [ROUNDS=5] [TOKENS=64]
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
model=${1:?usage: $0 MODEL [THREADS] [ROUNDS] [TOKENS]}
threads=${2:-2}
rounds=${3:-5}
tokens=${4:-64}
peers=$("$root/scripts/setup-peers.sh" | tail -n 1)
es=$root/build/bin/editspec
[ -x "$es" ] || { echo "build editspec first (scripts/build.sh)" >&2; exit 2; }
a=(); b=()
for r in $(seq 1 "$rounds"); do
    # llama-bench: text generation of $tokens tokens after an empty prompt, flash attention off
    lb=$("$peers/llama-bench" -m "$model" -t "$threads" -p 0 -n "$tokens" -fa 0 -r 1 -o json 2>/dev/null |
         python3 -c 'import json,sys; print(json.load(sys.stdin)[0]["avg_ts"])')
    # editspec: a one-token prompt (BOS), greedy, the same number of tokens
    ed=$("$es" complete -m "$model" -t "$threads" -p "" -n "$tokens" --json 2>/dev/null |
         python3 -c 'import json,sys; print(json.load(sys.stdin)["tokens_per_s"])')
    echo "round $r: llama-bench $lb tok/s, editspec complete $ed tok/s"
    a+=("$lb"); b+=("$ed")
done
python3 - "${a[*]}" "${b[*]}" <<'PY'
import statistics, sys
a = [float(x) for x in sys.argv[1].split()]
b = [float(x) for x in sys.argv[2].split()]
ratios = [y / x for x, y in zip(a, b)]
print(f"median llama-bench {statistics.median(a):.2f} tok/s, editspec {statistics.median(b):.2f} tok/s, "
      f"median ratio editspec/llama-bench {statistics.median(ratios):.3f} (per round: "
      + ", ".join(f"{r:.3f}" for r in ratios) + ")")
PY
