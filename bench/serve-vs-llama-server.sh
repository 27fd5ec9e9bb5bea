#!/usr/bin/env bash
# editspec serve against llama.cpp's llama-server on the same model and the same edits, by one client
# script in one run: CanItEdit's smallest items (the shipped model's context is 512 tokens), each the
# edit of its code by its descriptive instruction, greedy.
#
#   bench/serve-vs-llama-server.sh [MODEL=models/editspec-target.gguf] [ROUNDS=2] [N_ITEMS=20]
#
# editspec: POST /v1/chat/completions with the code as `prediction` (Predicted Outputs -> Reuse; on a
# model without a chat template it renders the request as its edit prompt), and without one;
# llama-server (its default, unpatched build at the pinned commit, scripts/setup-peers.sh; its default
# flash attention, on for this CPU as editspec's) with
# --spec-type ngram-mod and ngram-simple: POST /completion with that same edit prompt text (its chat
# endpoint ignores `prediction` and would render another prompt), so both decode the same tokens.
# Each server also once without a drafter (llama-server without --spec-type, editspec --method ar).
# Two rows a configuration: tokens/s of generation (generated tokens / timings.predicted_ms, counted
# alike by both: the pass that reads the prompt's end is prompt time) and ":request", generated tokens
# over each whole request's time at the client (prompt, generation, HTTP), what a user waits for.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
. "$root/bench/peers.sh"
n_items=${3:-20}

wait_up() {
    for _ in $(seq 1 300); do curl -sf "http://127.0.0.1:$port/health" >/dev/null 2>&1 && return 0; sleep 0.2; done
    echo "server did not come up on port $port:" >&2; tail -n 5 "$work"/*.log >&2; return 1
}

client() { # $1 = label, $2 = mode (chat-prediction | chat | completion)
    python3 - "$dataset" "$n_items" "$port" "$1" "$2" >>"$work/rows.txt" <<'PY'
import json, sys, time, urllib.request
src, n, port, label, mode = sys.argv[1], int(sys.argv[2]), sys.argv[3], sys.argv[4], sys.argv[5]
items = sorted((json.loads(l) for l in open(src)), key=lambda d: len(d["code_before"]))[:n]
def post(path, body):
    req = urllib.request.Request(f"http://127.0.0.1:{port}{path}", json.dumps(body).encode(), {"Content-Type": "application/json"})
    return json.load(urllib.request.urlopen(req, timeout=600))
n_tok, ms, wall = 0, 0.0, 0.0
for d in items:
    instr, code = d["instruction_descriptive"].strip(), d["code_before"]
    # a fenced block closes on a line of its own: the code as editspec reads it from the message
    code = code if code.endswith("\n") else code + "\n"
    # editspec's plain edit prompt, instruction first (include/editspec/edit.h), byte for byte as it
    # renders the chat message below (src/server/api.cpp: the instruction stripped)
    prompt = "### Instruction:\n" + instr + "\n### Original code:\n" + code + "\n### Edited code:\n"
    t0 = time.perf_counter()
    if mode == "completion":
        t = post("/completion", {"prompt": prompt, "n_predict": 400, "temperature": 0, "top_k": 1, "cache_prompt": False})["timings"]
        wall += time.perf_counter() - t0
        n_tok += t["predicted_n"]; ms += t["predicted_ms"]
        continue
    body = {"messages": [{"role": "user", "content": instr + "\n\n```\n" + code + "```"}], "max_tokens": 400, "temperature": 0}
    if mode == "chat-prediction":
        body["prediction"] = {"type": "content", "content": code}
    t = post("/v1/chat/completions", body)["timings"]
    wall += time.perf_counter() - t0
    n_tok += t["predicted_n"]; ms += t["predicted_ms"]
print(f"{label} {1000.0 * n_tok / ms:.2f} {n_tok}")
print(f"{label}:request {n_tok / wall:.2f} {n_tok}")
PY
}

for r in $(seq 1 "$rounds"); do
    for spec in none ngram-mod ngram-simple; do
        spec_args=(); [ "$spec" = none ] || spec_args=(--spec-type "$spec")
        "$peers/llama-server" -m "$model" -t "$threads" -c 4096 -np 1 --host 127.0.0.1 --port "$port" \
            "${spec_args[@]}" >"$work/llama-$spec.log" 2>&1 &
        server_pid=$!; wait_up
        client "llama-server-$spec(/completion)" completion
        kill "$server_pid"; wait "$server_pid" 2>/dev/null || true; server_pid=
    done
    # a server each: one that has seen a prompt keeps its KV (--cache-ram) and would answer it again sooner
    for run in ar:completion auto:completion auto:chat-prediction; do
        method=${run%%:*} mode=${run#*:}
        "$es" serve -m "$model" -t "$threads" --port "$port" --method "$method" >"$work/es.log" 2>&1 &
        server_pid=$!; wait_up
        client "editspec-$method($mode)" "$mode"
        kill "$server_pid"; wait "$server_pid" 2>/dev/null || true; server_pid=
    done
    echo "round $r done" >&2
done
"$root/bench/median-table.py" "$work/rows.txt" "$model, 2 threads, greedy, $rounds rounds"
