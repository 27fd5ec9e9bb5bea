#!/bin/bash
# The second and third device calls of README.md, run on the lent H200 right after the first
# (GPU_CHECK_PLAN=issue73 scripts/gpu-check.sh .gpu), on its unpacked tarball and models:
# CUDA graphs in the exact mode, the ds13 Q4_K_M replays, the 6.7B check-exact, and ncu of one-token passes.
P=/tmp/cuda-prefix; [ -x $P/es/bin/editspec ] || { mkdir -p $P && tar -xJf .gpu/cuda.tar.xz -C $P; }
export LD_LIBRARY_PATH=$P/lib:$P/bin:$P/es/lib:/usr/local/cuda/lib64
es=$P/es/bin/editspec; m=/tmp/models; ds=$m/deepseek-coder-1.3b-q8_0.gguf; q4=$m/deepseek-coder-1.3b-q4_k_m.gguf
D=datasets/canitedit/normalized.jsonl; G="$(nvidia-smi --query-gpu=name --format=csv,noheader)"
echo "== cost exact, graphs on"; EDITSPEC_CUDA_GRAPHS=1 timeout 60 $es cost -m $ds --fresh --no-save --max 256 --reps 5 2>&1 | tail -20
rb() { n=$1; shift; timeout 100 $es bench --replay --dataset $D --setting "real-shape replay, $G, $n" --out /tmp/b-$n --task edit --limit 20 "$@" > $OUT/$n.log 2>&1
       echo "rc $? $n"; grep -E "^\| (ar|auto|llama)" /tmp/b-$n/report.md | cut -c1-120; cp /tmp/b-$n/report.md $OUT/$n-report.md; }
rb graphs-exact -m $ds --kernels exact --methods ar,auto
EDITSPEC_CUDA_GRAPHS=1 rb graphs-exact-on -m $ds --kernels exact --methods ar,auto
rb q4-exact -m $q4 --kernels exact --methods ar,auto
rb q4-stock -m $q4 --kernels stock --methods ar,auto,llama-ngram-simple
timeout 60 $es check-exact -m $m/deepseek-coder-6.7b-q8_0.gguf --max 128 --prefix 0 --prefix 300 2>&1 | tail -4
# third call: 800 kernels of one-token passes (after the prefix's), each timed by ncu, per kernel name
for k in exact stock; do
    timeout 100 ncu --clock-control none --metrics gpu__time_duration.sum --launch-skip 2000 --launch-count 800 --csv \
        --print-units base $es cost -m $ds --fresh --no-save --max 1 --reps 1 --kernels $k > $OUT/ncu-$k.csv 2>$OUT/ncu-$k.err
done
python3 - "$OUT" <<'PY'
import csv, sys, collections
for k in ("exact", "stock"):
    rows = [r for r in csv.reader(open(f"{sys.argv[1]}/ncu-{k}.csv")) if len(r) > 10]
    h = rows[0]; ni = h.index("Kernel Name"); vi = h.index("Metric Value"); gi = h.index("Grid Size")
    agg = collections.defaultdict(lambda: [0, 0.0, ""]); tot = 0.0
    for r in rows[1:]:
        try: v = float(r[vi].replace(",", ""))
        except ValueError: continue
        n = r[ni].split("(")[0][:70]; agg[n][0] += 1; agg[n][1] += v; agg[n][2] = r[gi]; tot += v
    print(f"== {k}: {len(rows)-1} kernels, {tot/1e3:.0f} us in all")
    for n, (c, v, g) in sorted(agg.items(), key=lambda x: -x[1][1])[:14]:
        print(f"{v/1e3:9.1f} us {c:5d}x  {v/c/1e3:6.2f} us  grid {g:14s} {n}")
PY
