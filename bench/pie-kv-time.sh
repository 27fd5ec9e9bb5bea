#!/usr/bin/env bash
# Issue 24's KV-update bar: a 1-line edit in the middle of a document of ~4k tokens, the time the KV
# update takes with each strategy (`editspec session`, kv_ms), in one run on one model.
#
#   bench/pie-kv-time.sh MODEL.gguf [THREADS] [FILE] [BYTES]
#
# FILE: a long source file (default: the standard library's argparse.py), cut to BYTES (default
# 14,000: ~3.7k tokens of argparse.py with DeepSeek-Coder's tokenizer; 15,500 gives ~4.1k).
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
editspec="$(dirname "$here")/build/bin/editspec"
model="${1:?usage: bench/pie-kv-time.sh MODEL.gguf [THREADS] [FILE] [BYTES]}"
threads="${2:-2}"
file="${3:-/usr/lib/python3.11/argparse.py}"
bytes="${4:-14000}"
script="$(mktemp)"
trap 'rm -f "$script"' EXIT
python3 - "$file" "$bytes" > "$script" <<'PY'
import json, sys
text = open(sys.argv[1], encoding="utf-8").read()
cut = int(sys.argv[2])
lines = text.splitlines(keepends=True)
doc, i = "", 0
while i < len(lines) and len(doc) + len(lines[i]) <= cut:
    doc += lines[i]; i += 1
mid = doc.find("\n", len(doc) // 2) + 1            # a line boundary half way through
print(json.dumps({"op": "open", "text": doc}))
print(json.dumps({"op": "edit", "offset": mid, "delete": 0, "insert": "        value = compute(value)  # an inserted line\n"}))
PY
for s in recompute pie conflict; do
    "$editspec" session "$script" -m "$model" --strategy "$s" -t "$threads" -c 4608 | STRATEGY=$s python3 -c '
import json, os, sys
ops = [json.loads(l) for l in sys.stdin]
e = [o for o in ops if o["op"] == "edit"][0]
print("%s: document %d tokens; edit at token %d: %d encoded, %d stale, KV update %.1f ms"
      % (os.environ["STRATEGY"], ops[0]["tokens"], e["first"], e["encoded"], e["stale"], e["kv_ms"]))'
done
