#!/usr/bin/env bash
# Decoding speed on the same prompts: llama.cpp's llama-server (its default, unpatched build from
# scripts/setup-peers.sh; plain decoding and --spec-type ngram-mod) against editspec's methods
# (`editspec bench --task complete`), one script, same model, threads and greedy decoding,
# alternated round by round. Prompts: CanItEdit's first items as instruction + code (the raw
# layout), kept to those whose text is at most MAX_CHARS characters.
#
#   bench/shipped-vs-llama-server.sh [MODEL=models/editspec-target.gguf] [ROUNDS=2] [N_ITEMS=30]
#
# llama-server's figure is its own timings.predicted_n / predicted_ms summed over the prompts
# (decode time, prompt processing excluded); editspec's is the bench's generation tokens/s (also
# excluding the prompt). The server listens on 127.0.0.1 only and is stopped at the end.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
n_predict=200
max_chars=${MAX_CHARS:-1000} # the shipped model's 512-token context holds the prompt and 200 tokens
methods=${METHODS:-ar,lookup,lookup-longest,llama-ngram-mod,llama-ngram-simple}
. "$root/bench/peers.sh"
n_items=${3:-30}

# the prompts, as a HumanEval-shaped file editspec's bench reads (prompt = the context)
python3 - "$dataset" "$n_items" "$max_chars" "$work/prompts.jsonl" <<'PY'
import json, sys
src, n, max_chars, out = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), sys.argv[4]
items = []
for line in open(src):
    d = json.loads(line)
    text = d["instruction_descriptive"] + "\n" + d["code_before"]
    if len(text) > max_chars:
        continue
    items.append({"task_id": d.get("id", d.get("task_id", str(len(items)))), "prompt": text,
                  "canonical_solution": d["code_after"], "test": "", "entry_point": ""})
    if len(items) == n:
        break
with open(out, "w") as f:
    for it in items:
        f.write(json.dumps(it) + "\n")
print(f"{len(items)} prompts", file=sys.stderr)
PY

run_server() { # $1 = label, rest = extra llama-server flags; appends "label tok/s" to $work/server.txt
    local label=$1; shift
    "$peers/llama-server" -m "$model" -t "$threads" -c 4096 -np 1 -fa off --host 127.0.0.1 --port "$port" \
        "$@" >"$work/server-$label.log" 2>&1 &
    server_pid=$!
    for _ in $(seq 1 100); do
        curl -sf "http://127.0.0.1:$port/health" >/dev/null 2>&1 && break
        sleep 0.2
    done
    python3 - "$work/prompts.jsonl" "$port" "$n_predict" "$label" >>"$work/server.txt" <<'PY'
import json, sys, urllib.request
prompts, port, n_predict, label = sys.argv[1], sys.argv[2], int(sys.argv[3]), sys.argv[4]
n_tok, ms = 0, 0.0
for line in open(prompts):
    body = json.dumps({"prompt": json.loads(line)["prompt"], "n_predict": n_predict, "temperature": 0,
                       "top_k": 1, "cache_prompt": False}).encode()
    req = urllib.request.Request(f"http://127.0.0.1:{port}/completion", body, {"Content-Type": "application/json"})
    t = json.load(urllib.request.urlopen(req, timeout=300))["timings"]
    n_tok += t["predicted_n"]
    ms += t["predicted_ms"]
print(f"{label} {1000.0 * n_tok / ms:.2f} {n_tok}")
PY
    kill "$server_pid"; wait "$server_pid" 2>/dev/null || true; server_pid=
}

for r in $(seq 1 "$rounds"); do
    run_server server-plain --spec-type none
    run_server server-ngram-mod --spec-type ngram-mod
    "$es" bench -m "$model" --dataset "$work/prompts.jsonl" --task complete -n "$n_predict" -t "$threads" \
        --methods "$methods" --out "$work/es-$r" >"$work/es-$r.log" 2>&1
    python3 - "$work/es-$r/results.json" >>"$work/server.txt" <<'PY'
import json, sys
res = json.load(open(sys.argv[1]))
for name, m in res["methods"].items():
    print(f"editspec-{name} {m['tokens_per_s']:.2f} {m['tokens']}")
PY
    echo "round $r done" >&2
done
"$root/bench/median-table.py" "$work/server.txt" "$model, 2 threads, greedy, $rounds rounds" server-plain
