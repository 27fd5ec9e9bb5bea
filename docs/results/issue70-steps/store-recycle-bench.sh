#!/bin/bash
# steady-state prompt store: one slot, --cache-ram for two ~1,000-token states, files A B C A B C ...: each
# save past the second evicts; prints each save's time from the log
ES=${ES:-/work/main/build/bin/editspec}; PORT=8778; M=${M:-/tmp/i70/ds13-q4km.gguf}
EDITSPEC_LOG=info $ES serve -m $M -t 2 --parallel ${PAR:-1} --ctx-size 2048 --cache-ram ${RAM:-450} --port $PORT > /tmp/s23/store-serve.log 2>&1 &
SP=$!
for i in $(seq 300); do curl -sf localhost:$PORT/health >/dev/null && break; sleep 1; done
python3 - <<PY
import json, urllib.request
files = [json.loads(l)["code_before"][:3600] for l in open("/work/main/.gpu/apply3k.jsonl")]
files.append(files[0][::-1][:3600])
def post(p):
    r = urllib.request.Request("http://127.0.0.1:$PORT/completion", json.dumps({"prompt": p, "n_predict": 1, "temperature": 0}).encode(), {"Content-Type": "application/json"})
    return json.load(urllib.request.urlopen(r))
for k in range(${N:-9}):
    post(files[k % 3])
PY
curl -s localhost:$PORT/metrics | grep prompt_store
kill $SP; wait $SP 2>/dev/null
grep "prompt store: kept" /tmp/s23/store-serve.log | sed 's/.*kept/kept/'
