#!/bin/bash
# issue 71's cost-model line after the kernel changes: the apply replay of two 3k-token files, fresh cost cache each round
cd /work/main
out=${1:-/tmp/recheck}; mkdir -p $out
python3 bench/apply-sizes.py --out "$out/sizes.jsonl" >/dev/null && grep '"3k-' "$out/sizes.jsonl" > "$out/apply3k.jsonl"
for r in 1 2; do
  rm -rf "$out/cache-$r"
  EDITSPEC_CACHE=$out/cache-$r build/bin/editspec bench -m models/editspec-target.gguf --dataset "$out/apply3k.jsonl" --task apply \
     --replay --methods ar,auto -c 8192 -t 2 --setting "shipped model, replay of the reference, after issue 70's regions" \
     --out "$out/apply-$r" > "$out/apply-$r.log" 2>&1
  echo "round $r rc $?"; grep -E "^\| (ar|auto) " "$out/apply-$r/report.md" | cut -c1-160
done
