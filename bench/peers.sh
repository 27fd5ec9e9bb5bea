# Sourced by the bench/*-vs-*.sh scripts: llama.cpp's default build (peers), editspec's binary, the
# dataset, a scratch folder removed at exit and a server process stopped at exit ($server_pid);
# arguments MODEL (default: the shipped target) and ROUNDS (2); 2 threads.
model=${1:-$root/models/editspec-target.gguf}
rounds=${2:-2}
threads=2
peers=$("$root/scripts/setup-peers.sh" | tail -n 1)
es=$root/build/bin/editspec
[ -x "$es" ] || { echo "build editspec first (scripts/build.sh)" >&2; exit 2; }
dataset=${DATASET:-$root/datasets/canitedit/normalized.jsonl}
[ -f "$dataset" ] || { echo "no dataset at $dataset (DATASET=...)" >&2; exit 2; }
. "$root/bench/scratch.sh"
