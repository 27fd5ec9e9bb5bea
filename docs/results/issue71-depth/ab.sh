#!/bin/bash
# The A/B of README.md: the apply replay of two 3k-token files on the shipped target, an editspec before
# the depth curves (OLD) and after (NEW), alternated, ROUNDS rounds, each run with a fresh cost cache.
#   OLD=/path/to/old/editspec NEW=build/bin/editspec docs/results/issue71-depth/ab.sh OUT_DIR
set -u
out=${1:?usage: ab.sh OUT_DIR}
mkdir -p "$out"
python3 bench/apply-sizes.py --out "$out/sizes.jsonl" >/dev/null && grep '"3k-' "$out/sizes.jsonl" > "$out/apply3k.jsonl"
for r in $(seq 1 "${ROUNDS:-2}"); do
    for v in new old; do
        if [ $v = new ]; then es=${NEW:-build/bin/editspec}; else es=${OLD:?OLD=old editspec binary}; fi
        rm -rf "$out/cache-$v-$r"
        EDITSPEC_CACHE=$out/cache-$v-$r $es bench -m models/editspec-target.gguf --dataset "$out/apply3k.jsonl" --task apply \
            --replay --methods ar,auto -c 8192 -t 2 --setting "shipped model, replay of the reference, $v" \
            --out "$out/apply-$v-$r" >"$out/apply-$v-$r.log" 2>&1
        echo "$v $r rc $?"; grep -E "^\| (ar|auto) " "$out/apply-$v-$r/report.md" | cut -c1-140
    done
done
