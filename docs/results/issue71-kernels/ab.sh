#!/usr/bin/env bash
# Issue 71 item 2: the patch's Q4_K and Q6_K kernels (items 7, 8) against the library before them,
# alternated, one `editspec cost` each per round. OLD: the previous install's libggml-cpu.so.0.
#   OLD=~/.cache/editspec/llama.cpp-<commit>/install-bi-394e37825140-v4/lib/libggml-cpu.so.0 \
#   MODEL=ds13-q4km.gguf docs/results/issue71-kernels/ab.sh 2 > out.txt
set -euo pipefail
rounds=${1:-2}
bin=${BIN:-build/bin/editspec}
for r in $(seq 1 "$rounds"); do
    for lib in new old; do
        echo "## round $r, $lib"
        if [ "$lib" = old ]; then pre=$OLD; else pre=; fi
        LD_PRELOAD=$pre "$bin" cost -m "$MODEL" -t 2 --fresh --no-save --prefix 256 --depths ${DEPTHS:-3072} \
            --max 8 --reps 10 2>&1 | grep -v "^editspec\|^load\|^llama"
    done
done
