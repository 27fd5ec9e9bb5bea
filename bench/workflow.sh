#!/usr/bin/env bash
# The workflow benchmark: a real file's editing history replayed by one client (bench/workflow.py:
# per step a chat edit with the file as the prediction, an apply of the commit's hunks, a completion
# at the changed line), against each server configuration in turn on the same model, in one run:
#
#   cold          editspec, every request from an empty cache (the slot's cache replaced by a
#                 one-token request of another text before each; no prompt store)
#   prefix        editspec --kv-reuse prefix (the default: the common prefix, exact; past prompts
#                 kept in RAM, --cache-ram 8192, as llama-server's default)
#   pie           editspec --kv-reuse pie (PIE: spans after an edit shifted into place; lossy)
#   old           another editspec binary (EDITSPEC_OLD=path, e.g. a build of main d69fef1), its defaults
#   llama-server  llama.cpp's own server at the pinned commit, --cache-reuse 256, cache_prompt (its
#                 reuse shifts chunks of the cache past a deletion, as PIE does: not exact)
#   llama-server-prefix  the same without --cache-reuse: its common prefix only, exact
#
#   [FIRST=1] [INSTRUCTION_FIRST=1] [DRIFT_MAX=N] [PIE_REFRESH=N] [CACHE_RAM=MiB] [LABEL_SUFFIX=-x] [PARALLEL=1] [CONSTRAIN=1] bench/workflow.sh MODEL HISTORY [STEPS=0 (all)] [MAX_TOKENS=32] [CONFIGS="prefix pie llama-server"]
#
# Rows (JSON lines) go to stdout and $OUT/rows.jsonl when OUT is set; bench/workflow-report.py
# turns them into the tables. 2 threads, PARALLEL slots (1) of 8192 tokens each, flash attention off
# for both servers.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
model=${1:?model}
history=${2:?history}
steps=${3:-0}
max_tokens=${4:-32}
configs=${5:-"prefix pie llama-server"}
# the file first in editspec's edit and apply prompts (as llama-server's side of the bench is prompted;
# serve's default, auto, puts the instruction first in edits on a model without a chat template);
# INSTRUCTION_FIRST=1 for the other layout (FILE_FIRST=1, which older commands in docs/results set,
# is this script's default)
ff="--prompt-layout file-first"; [ -n "${INSTRUCTION_FIRST:-}" ] && ff="--prompt-layout instruction-first"
np=${PARALLEL:-1}
cf=; [ -n "${CONSTRAIN:-}" ] && cf=--constrain
threads=${THREADS:-2}
es=$root/build/bin/editspec
[ -x "$es" ] || { echo "build editspec first (scripts/build.sh)" >&2; exit 2; }
. "$root/bench/scratch.sh"
url=http://127.0.0.1:$port
out=${OUT:-$work}
mkdir -p "$out"

wait_up() {
    for _ in $(seq 1 600); do curl -sf "$url/health" >/dev/null 2>&1 && return 0; sleep 0.2; done
    echo "server did not come up:" >&2; tail -n 5 "$work/server.log" >&2; return 1
}
stop() { kill "$server_pid"; wait "$server_pid" 2>/dev/null || true; server_pid=; }

for cfg in $configs; do
    kind=editspec
    case $cfg in
        prefix) "$es" serve -m "$model" -t "$threads" -c 8192 --parallel "$np" --port "$port" --kv-reuse prefix $ff ${CACHE_RAM:+--cache-ram $CACHE_RAM} >"$work/server.log" 2>&1 & ;;
        cold) "$es" serve -m "$model" -t "$threads" -c 8192 --port "$port" --cache-ram 0 $ff >"$work/server.log" 2>&1 & ;;
        pie) "$es" serve -m "$model" -t "$threads" -c 8192 --parallel "$np" --port "$port" --kv-reuse pie $ff ${DRIFT_MAX:+--drift-max $DRIFT_MAX} ${PIE_REFRESH:+--pie-refresh $PIE_REFRESH} ${CACHE_RAM:+--cache-ram $CACHE_RAM} >"$work/server.log" 2>&1 & ;;
        old) "${EDITSPEC_OLD:?EDITSPEC_OLD=path of the older editspec}" serve -m "$model" -t "$threads" -c 8192 --parallel "$np" --port "$port" >"$work/server.log" 2>&1 & ;;
        llama-server|llama-server-prefix)
            kind=llama-server
            reuse=; [ "$cfg" = llama-server ] && reuse="--cache-reuse 256"
            peers=$("$root/scripts/setup-peers.sh" | tail -n 1)
            "$peers/llama-server" -m "$model" -t "$threads" -c $((8192 * np)) -np "$np" -fa off --host 127.0.0.1 --port "$port" \
                $reuse ${LLAMA_SPEC:+--spec-type $LLAMA_SPEC} >"$work/server.log" 2>&1 & ;;
        *) echo "unknown configuration '$cfg'" >&2; exit 2 ;;
    esac
    server_pid=$!
    wait_up
    cold=; [ "$cfg" = cold ] && cold=--cold
    python3 "$root/bench/workflow.py" --url "$url" --server "$kind" --label "$cfg${LABEL_SUFFIX:-}" --history "$history" \
        --first "${FIRST:-1}" --steps "$steps" --max-tokens "$max_tokens" $cold ${INSTRUCTION_FIRST:+--instruction-first} $cf | tee -a "$out/rows.jsonl"
    stop
done
