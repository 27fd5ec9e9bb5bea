#!/bin/bash
# The cost model's probes on a quiet machine and beside other work (two busy loops on the two cores), and a curve
# cached beside other work fetched again on the quiet machine. Shipped target, 2 threads.
cd "$(git rev-parse --show-toplevel)"
es=build/bin/editspec
m=models/editspec-target.gguf
busy() { for i in 1 2; do (while :; do :; done) & done; }
quiet() { kill $(jobs -p) 2>/dev/null; wait 2>/dev/null; }
cost() { "$es" cost -m $m -t 2 --depths 0 --max 64 "$@" 2>/dev/null | grep -E "^# probes|^ +(1|4|8|32|64) "; }
for round in 1 2; do
  echo "== round $round, quiet: editspec cost --fresh --no-save"; cost --fresh --no-save
  busy; echo "== round $round, beside two busy loops: editspec cost --fresh --no-save"; cost --fresh --no-save; quiet
done
c=$(mktemp -d)
busy; echo "== a first start beside two busy loops: the curve measured and cached (EDITSPEC_CACHE=$c)"
EDITSPEC_CACHE=$c cost; quiet
echo "== the next start on the quiet machine (EDITSPEC_LOG=info: what cost_model_get decided)"
EDITSPEC_CACHE=$c EDITSPEC_LOG=info "$es" cost -m $m -t 2 --depths 0 --max 64 2>&1 | grep -E "cost model: (cached|.*busier|the new)|^# probes|^ +(1|4|8|32|64) "
rm -rf "$c"
