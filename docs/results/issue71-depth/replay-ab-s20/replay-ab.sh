#!/bin/bash
# the apply replay (3k-token files, shipped target) with b2b79cc's libggml-cpu preloaded (old) and this build's (new), alternated
cd /work/main
out=${1:-/tmp/replay-ab}; mkdir -p $out
python3 bench/apply-sizes.py --out "$out/sizes.jsonl" >/dev/null && grep '"3k-' "$out/sizes.jsonl" > "$out/apply3k.jsonl"
for r in 1 2; do for v in new old; do
  pre=""; [ $v = old ] && pre="LD_PRELOAD=${OLD_LIB:?OLD_LIB=the libggml-cpu.so.0 of main at b2b79cc}"
  rm -rf $out/cache-$v-$r
  env $pre EDITSPEC_CACHE=$out/cache-$v-$r build/bin/editspec bench -m models/editspec-target.gguf --dataset $out/apply3k.jsonl --task apply \
     --replay --methods ar,auto -c 8192 -t 2 --setting "shipped model, replay of the reference, $v libggml-cpu" --out $out/apply-$v-$r > $out/apply-$v-$r.log 2>&1
  echo "$v $r rc $?"; grep -E "^\| (ar|auto) " $out/apply-$v-$r/report.md | cut -c1-160
done; done
