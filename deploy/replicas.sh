#!/usr/bin/env bash
# N `editspec serve` replicas behind HAProxy on loopback, routed by cache key (haproxy.cfg.in beside
# this file; docs/scale-out.md). Runs until interrupted, then stops them all.
#
#   deploy/replicas.sh [--replicas N] [--port P] [--balance key|roundrobin] [--dir DIR] [-- SERVE-ARGS...]
#
#   --replicas N   replicas (default 2), on ports P+1 .. P+N
#   --port P       the balancer's port (default 8080); clients talk to http://127.0.0.1:P
#   --balance      key (default): consistent hashing on the cache key; roundrobin: for comparison
#   --dir DIR      the generated haproxy.cfg, each process's log and pid file (default: a temporary
#                  folder, removed when the replicas stop)
#   SERVE-ARGS     given to every `editspec serve` (e.g. -m model.gguf -t 1)
# The balancer's address is printed when every replica is healthy. Needs haproxy (Debian: haproxy;
# scripts/test.sh installs it). EDITSPEC_BIN overrides the editspec binary.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
bin=${EDITSPEC_BIN:-$here/../build/bin/editspec}
n=2 port=8080 balance=key dir=""
usage() { awk 'NR > 1 && !/^#/ { exit } NR > 1' "$0" | sed 's/^# \{0,1\}//'; }
while [ $# -gt 0 ]; do
    case $1 in
    --replicas) n=$2; shift 2 ;;
    --port) port=$2; shift 2 ;;
    --balance) balance=$2; shift 2 ;;
    --dir) dir=$2; shift 2 ;;
    -h|--help) usage; exit 0 ;;
    --) shift; break ;;
    *) echo "replicas: unknown option '$1' (--help)" >&2; exit 2 ;;
    esac
done
case $balance in
key) algo="hash var(txn.cache_key)" ;;
roundrobin) algo=roundrobin ;;
*) echo "replicas: --balance $balance: expected key or roundrobin" >&2; exit 2 ;;
esac
[[ $n =~ ^[1-9][0-9]?$ ]] || { echo "replicas: --replicas $n: expected 1..99" >&2; exit 2; }
[[ $port =~ ^[0-9]+$ ]] && [ "$port" -ge 1 ] && [ $((port + n)) -le 65535 ] || { echo "replicas: --port $port out of range" >&2; exit 2; }
command -v haproxy >/dev/null || { echo "replicas: haproxy is not installed (scripts/deb-install.sh haproxy)" >&2; exit 2; }
[ -x "$bin" ] || { echo "replicas: $bin is not built (scripts/build.sh)" >&2; exit 2; }
own_dir=""
[ -n "$dir" ] || { dir=$(mktemp -d /tmp/editspec-replicas.XXXXXX); own_dir=$dir; }
mkdir -p "$dir"

pids=()
stop() {
    trap - INT TERM EXIT
    # the balancer first (no new requests), then each replica drains (SIGTERM)
    for p in "${pids[@]+"${pids[@]}"}"; do kill -TERM "$p" 2>/dev/null || true; done
    wait 2>/dev/null || true
    [ -z "$own_dir" ] || rm -rf "$own_dir"
}
trap stop EXIT
trap 'exit 0' INT TERM

servers=""
for i in $(seq 1 "$n"); do
    p=$((port + i))
    "$bin" serve --port "$p" "$@" >"$dir/replica-$i.log" 2>&1 &
    echo $! >"$dir/replica-$i.pid"
    pids+=($!)
    servers+="    server r$i 127.0.0.1:$p"$'\n'
done
for i in $(seq 1 "$n"); do
    p=$((port + i))
    for _ in $(seq 1 600); do
        curl -fs --max-time 5 "http://127.0.0.1:$p/health" >/dev/null 2>&1 && break
        kill -0 "$(cat "$dir/replica-$i.pid")" 2>/dev/null || { echo "replicas: replica $i exited: $(tail -3 "$dir/replica-$i.log")" >&2; exit 1; }
        sleep 0.2
    done
    curl -fs --max-time 5 "http://127.0.0.1:$p/health" >/dev/null || { echo "replicas: replica $i not healthy after 120 s ($dir/replica-$i.log)" >&2; exit 1; }
done
awk -v bind="127.0.0.1:$port" -v algo="$algo" -v servers="${servers%$'\n'}" \
    '{ gsub(/@BIND@/, bind); gsub(/@BALANCE@/, algo); if ($0 == "@SERVERS@") $0 = servers; print }' \
    "$here/haproxy.cfg.in" >"$dir/haproxy.cfg"
haproxy -db -f "$dir/haproxy.cfg" >"$dir/haproxy.log" 2>&1 &
echo $! >"$dir/haproxy.pid"
pids=("$!" "${pids[@]}")
for _ in $(seq 1 100); do
    curl -fs --max-time 5 "http://127.0.0.1:$port/health" >/dev/null 2>&1 && break
    sleep 0.1
done
curl -fs --max-time 5 "http://127.0.0.1:$port/health" >/dev/null || { echo "replicas: haproxy did not come up ($dir/haproxy.log)" >&2; exit 1; }
echo "replicas: $n replicas behind http://127.0.0.1:$port ($balance; logs and pids in $dir)"
# a replica that dies is the balancer's to route around (health checks); the balancer ending ends all
wait "${pids[0]}" || true
echo "replicas: haproxy ended ($dir/haproxy.log); stopping the replicas" >&2
