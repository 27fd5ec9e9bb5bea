#!/bin/bash
# issue 71's bar at HEAD, every line in one run (twenty-fifth session)
# usage: MODELS=DIR docs/results/issue71-kernels/bar-s25/bar71.sh OUT_DIR   (about 15 minutes)
cd "$(dirname "$0")/../../../.."
O=${1:-/tmp/bar71}; mkdir -p $O; MD=${MODELS:-/tmp/i70} # ds13*.gguf, qwen15-q4km.gguf: editspec make-model
I=${INSTALL:-$(ls -td ~/.cache/editspec/llama.cpp-*/install-bi-*-v4 | head -1)}/lib # editspec's libraries (the newest build)
P=$(ls -d ~/.cache/editspec/llama.cpp-de3ff815*/build-peers-default/bin)
date; git log --oneline -1
[ -f $MD/qwen15-q4km.gguf ] || build/bin/editspec make-model -s qwen2.5-coder-1.5b --type q4_k_m -o $MD/qwen15-q4km.gguf 2>&1 | tail -1
echo "== 1. editspec cost, depth 256 and 3072"
for r in 1 2; do for m in ds13-q4km qwen15-q4km; do
  echo "## round $r $m"; date
  build/bin/editspec cost -m $MD/$m.gguf -t 2 --fresh --no-save --prefix 256 --depths 3072 --max 8 --reps 10 2>&1 | grep -v "^editspec\|^load\|^llama"
done; done > $O/cost.txt 2>&1
echo "== 2. llama-bench stock vs editspec's library"
for r in 1 2; do for lib in ours stock; do for m in ds13-q4km qwen15-q4km; do
  [ $r = 2 ] && [ $m = qwen15-q4km ] && continue
  echo "## round $r $lib $m"; date
  if [ $lib = ours ]; then pre=$I/libggml-cpu.so.0; else pre=; fi
  LD_LIBRARY_PATH=$P LD_PRELOAD=$pre $P/llama-bench -m $MD/$m.gguf -t 2 -fa 1 -d 256,3072 -p 1,4,8 -n 16 -r 3 -o md 2>&1 | grep -E "^\|"
done; done; done > $O/llama-bench.txt 2>&1
echo "== 3. prompt encoding at depth"
for m in ds13 ds13-q4km; do
  echo "## $m"; date
  python3 bench/prompt-depth.py --model $MD/$m.gguf --rounds 2 2>&1 | grep "^{"
done > $O/prompt-depth.txt 2>&1
echo "== 4. cost model over depth, apply replay"
bash docs/results/issue71-depth/recheck/recheck.sh $O/recheck > $O/recheck.txt 2>&1
date; echo done
