#!/usr/bin/env bash
# Memory of N `editspec serve` replicas on one host sharing one retrieval datastore (memory-mapped,
# so the page cache holds one copy): each process's RSS and PSS, total and the datastore's mapping,
# with 1 and with 4 replicas (docs/scale-out.md).
#
#   bench/datastore-rss.sh DATASTORE.eds [MODEL]     (a datastore: editspec index --repo DIR -o F.eds)
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
bin=${EDITSPEC_BIN:-$root/build/bin/editspec}
ds=${1:?usage: bench/datastore-rss.sh DATASTORE.eds [MODEL]}
model=${2:-$root/models/editspec-target.gguf}
[ -f "$ds" ] || { echo "datastore-rss: $ds not found" >&2; exit 2; }
pids=()
trap 'kill "${pids[@]}" 2>/dev/null || true' EXIT
kib() { # field of /proc/PID/smaps_rollup, or of the datastore's mapping in /proc/PID/smaps
    awk -v f="$2:" -v ds="$3" '
        ds == "" && $1 == f { print $2; exit }
        ds != "" && /^[0-9a-f]+-[0-9a-f]+ / { inmap = index($0, ds) > 0 }
        ds != "" && inmap && $1 == f { s += $2 } END { if (ds != "") print s + 0 }' "/proc/$1/$([ -n "$3" ] && echo smaps || echo smaps_rollup)"
}
printf "%-9s %-8s %10s %10s %14s %14s\n" replicas process "RSS MiB" "PSS MiB" "datastore RSS" "datastore PSS"
for n in 1 4; do
    base=$((24000 + RANDOM % 20000))
    pids=()
    for i in $(seq 1 "$n"); do
        "$bin" serve -m "$model" -t 1 --port $((base + i)) --datastore "$ds" >/dev/null 2>&1 &
        pids+=($!)
    done
    for i in $(seq 1 "$n"); do
        for _ in $(seq 1 600); do curl -fs "http://127.0.0.1:$((base + i))/health" >/dev/null && break; sleep 0.2; done
        # a request that retrieves from the datastore
        curl -fs "http://127.0.0.1:$((base + i))/completion" -H 'Content-Type: application/json' \
            -d '{"prompt": "import os\nimport sys\n\ndef main(argv):\n    for name in os.listdir(", "n_predict": 16}' >/dev/null
    done
    tr=0 tp=0 dr=0 dp=0
    for i in $(seq 1 "$n"); do
        p=${pids[$((i - 1))]}
        r=$(kib "$p" Rss "") ps_=$(kib "$p" Pss "") d_r=$(kib "$p" Rss "$ds") d_p=$(kib "$p" Pss "$ds")
        printf "%-9s %-8s %10.1f %10.1f %14.1f %14.1f\n" "$n" "#$i" "$(echo "$r/1024" | bc -l)" "$(echo "$ps_/1024" | bc -l)" \
            "$(echo "$d_r/1024" | bc -l)" "$(echo "$d_p/1024" | bc -l)"
        tr=$((tr + r)) tp=$((tp + ps_)) dr=$((dr + d_r)) dp=$((dp + d_p))
    done
    printf "%-9s %-8s %10.1f %10.1f %14.1f %14.1f\n" "$n" "all" "$(echo "$tr/1024" | bc -l)" "$(echo "$tp/1024" | bc -l)" \
        "$(echo "$dr/1024" | bc -l)" "$(echo "$dp/1024" | bc -l)"
    kill "${pids[@]}" 2>/dev/null || true
    wait 2>/dev/null || true
done
echo "datastore file: $(( $(stat -c %s "$ds") / 1048576 )) MiB; PSS counts a shared page once across the processes"
