#!/bin/bash
# stock llama-bench with editspec's libggml-cpu before (a521ecf74e38) and after (a79d2d30c8fa) the Q chunk held in a register, alternated
C=$(ls -d ~/.cache/editspec/llama.cpp-de3ff815*); P=$C/build-peers-default/bin
for r in 1 2; do for v in before after; do for m in ds13-q4km qwen15-q4km; do
  if [ $v = before ]; then L=$C/install-bi-a521ecf74e38-v4/lib; else L=$C/install-bi-a79d2d30c8fa-v4/lib; fi
  echo "## round $r $v $m"
  LD_LIBRARY_PATH=$P LD_PRELOAD=$L/libggml-cpu.so.0 $P/llama-bench -m ${MD:-/tmp/i70}/$m.gguf -t 2 -fa 1 -d 3072 -p 1,4,8 -n 0 -r 5 -o md 2>&1 | grep -E "pp[0-9]"
done; done; done
