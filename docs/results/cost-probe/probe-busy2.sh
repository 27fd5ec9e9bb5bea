#!/bin/bash
# A curve cached beside other work (two busy loops), then three starts on the quiet machine: what each decided
cd "$(git rev-parse --show-toplevel)"
es=build/bin/editspec
m=models/editspec-target.gguf
busy() { for i in 1 2; do (while :; do :; done) & done; }
quiet() { kill $(jobs -p) 2>/dev/null; wait 2>/dev/null; }
for trial in 1 2; do
  c=$(mktemp -d)
  busy; echo "== trial $trial: a first start beside two busy loops (the curve measured and cached)"
  EDITSPEC_CACHE=$c "$es" cost -m $m -t 2 --depths 0 --max 64 2>/dev/null | grep -E "^# probes|^ +(1|8|32|64) "; quiet
  for start in 1 2 3; do
    echo "-- start $start on the quiet machine"
    EDITSPEC_CACHE=$c EDITSPEC_LOG=info "$es" cost -m $m -t 2 --depths 0 --max 64 2>&1 | grep -E "cost model: (cached|.*busier|the new)|^ +(8|32) "
  done
  rm -rf "$c"
done
