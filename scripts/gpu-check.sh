#!/usr/bin/env bash
# The GPU check of issue 42, run on a lent CUDA machine in one call (docs/gpu.md): builds the pinned
# llama.cpp with its CUDA backend, then runs a prebuilt editspec against it: batch invariance per
# weight type with flash attention off and on, the pass-cost curve, llama-bench, and real-shape
# replays of edits (ds13 shape) and fast apply (6.7B shape) against llama.cpp's drafters.
#
#   scripts/gpu-check.sh DIR      DIR holds bin/editspec (built on a CPU machine: the same libllama
#                                 API), lib/ (its system libraries) and llama-src.tar.xz (the pinned
#                                 source tree); results go to $OUT (default ./gpu-out)
#
# Every stage runs only while time is left (GPU_CHECK_SECONDS, default 570) so that a lease's
# one command ends with its results written. A dry run on a CPU machine checks the script itself:
#   EDITSPEC_BACKEND=cpu GPU_CHECK_SHAPE=tiny-256 GPU_CHECK_BIG=tiny-256 OUT=/tmp/gpu-out scripts/gpu-check.sh DIR
set -uo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
carry=$(cd "${1:?usage: scripts/gpu-check.sh DIR}" && pwd)
carried=$carry
out=${OUT:-$root/gpu-out}
mkdir -p "$out"
deadline=$((SECONDS + ${GPU_CHECK_SECONDS:-570}))
log=$out/log.txt
say() { echo "[$SECONDS s] $*" | tee -a "$log"; }
left() { echo $((deadline - SECONDS)); }
# stage NEEDED_SECONDS NAME COMMAND...: runs COMMAND if NEEDED_SECONDS are left, killed at the deadline
stage() {
    local need=$1 name=$2
    shift 2
    if [ "$(left)" -lt "$need" ]; then
        say "skip $name: $(left) s left, needs about $need"
        return 1
    fi
    say "start $name"
    # functions below are exported: timeout runs them through bash
    timeout "$(left)" bash -c '"$@"' _ "$@"
    local rc=$?
    say "end $name (rc $rc)"
    return $rc
}

{
    nvidia-smi --query-gpu=name,memory.total,driver_version,clocks.sm,clocks.max.sm --format=csv
    nvcc --version | tail -2
    cmake --version | head -1
    echo "cores: $(nproc)"
} >>"$log" 2>&1

# --- llama.cpp with CUDA for this GPU's architecture: built here, or carried prebuilt as
# DIR/cuda.tar.xz (an install prefix with bin/llama-bench, built where the same CUDA release is)
shape=${GPU_CHECK_SHAPE:-deepseek-coder-1.3b}
big=${GPU_CHECK_BIG:-deepseek-coder-6.7b}
if [ -f "$carry/cuda.tar.xz" ]; then
    prefix=/tmp/cuda-prefix
    rm -rf "$prefix" && mkdir -p "$prefix" && tar -xJf "$carry/cuda.tar.xz" -C "$prefix"
    say "llama.cpp: prebuilt, unpacked to $prefix"
    [ -f "$prefix/bin/llama-bench" ] && cp "$prefix/bin/llama-bench" /tmp/llama-bench
    # the tarball may hold editspec too (es/: bin/, lib/, models), packed with the libraries to fit
    # the call's 64 MiB
    [ -d "$prefix/es" ] && carry=$prefix/es
else
    src=/tmp/llama-src
    rm -rf "$src" && mkdir -p "$src" && tar -xJf "$carry/llama-src.tar.xz" -C "$src"
    export EDITSPEC_LLAMA_SRC=$src EDITSPEC_BACKEND=${EDITSPEC_BACKEND:-cuda} EDITSPEC_CUDA_ARCH=${EDITSPEC_CUDA_ARCH:-90}
    export EDITSPEC_CACHE=/tmp/editspec-cache-$EDITSPEC_BACKEND
    t0=$SECONDS
    if ! prefix=$("$root/scripts/setup-llama.sh" 2>>"$log" | tail -n 1) || [ ! -d "$prefix/lib" ]; then
        say "error: the CUDA build of llama.cpp failed"
        tail -60 "$EDITSPEC_CACHE"/llama.cpp-*/build-*/CMakeFiles/CMakeError.log 2>/dev/null >>"$log"
        exit 1
    fi
    say "llama.cpp CUDA build: $((SECONDS - t0)) s, installed at $prefix"
    # llama-bench from the same build, in the background while the models are made
    build=$(ls -d "$EDITSPEC_CACHE"/llama.cpp-*/build-* | head -1)
    (g++ -O2 -DNDEBUG -std=c++17 -I"$src/tools/llama-bench" -I"$prefix/include" -I"$prefix/include/llama-common" \
        "$src/tools/llama-bench/llama-bench.cpp" "$src/tools/llama-bench/main.cpp" "$build/common/build-info.cpp" \
        -L"$prefix/lib" -lllama-common -lllama -lggml -lggml-base -lpthread -o /tmp/llama-bench >>"$log" 2>&1) &
fi
export LD_LIBRARY_PATH=$prefix/lib:$carry/lib:/usr/local/cuda/lib64
es=$carry/bin/editspec
# a newer editspec than the tarball's, carried beside it (DIR/editspec.xz: the stripped binary, xz)
if [ -f "$carried/editspec.xz" ]; then
    xz -dc "$carried/editspec.xz" >/tmp/editspec-new && chmod +x /tmp/editspec-new && es=/tmp/editspec-new
    say "editspec: DIR/editspec.xz"
fi
vocab=$prefix/share/editspec/vocab
"$es" check-exact --help >/dev/null || { say "error: editspec does not run here"; ldd "$es" >>"$log"; exit 1; }

# --- models: random weights, real shapes and tokenizers; stages in the order of the issue's bar
m=/tmp/models
mkdir -p $m
make_model() { "$es" make-model -s "$1" --type "$2" -o "$m/$1-$2.gguf" --vocab-dir "$vocab" >/dev/null 2>>"$log.mm"; }
export -f make_model
export es m vocab log out root
# GPU_CHECK_PLAN=serve (issue 53): N clients against `editspec serve --parallel N` and `llama-server -np N`
# (stock kernels, CUDA graphs on, all layers on the GPU), bench/concurrency.py: plain greedy completions on
# the ds13 shape, editspec exact (its default) and with the stock kernels (EDITSPEC_CUDA_EXACT=0, labelled);
# edits with `prediction` on DIR/target-q8_0.gguf (the shipped target, quantized so the exact mode holds)
if [ "${GPU_CHECK_PLAN:-}" = serve ]; then
    ds=$m/$shape-q8_0.gguf
    runs=${GPU_CHECK_SERVE:-plain-exact,edit-exact,plain-stock} # which of the three, in order
    conc() { python3 "$root/bench/concurrency.py" --es "$es" --peers "$prefix/bin" --peer-args "-ngl 99" --threads 4 "$@"; }
    export -f conc; export prefix
    clients=${GPU_CHECK_CLIENTS:-1,2,4,8,16,32}
    plain=(--model "$ds" --mode plain --clients "$clients" --requests 4 --n-predict 128 --es-args "${GPU_CHECK_ES_ARGS:-}")
    # edits: the 2 x 32 smallest CanItEdit items fit a slot of 2048 tokens with a 400-token answer; a
    # round is under a second at few clients, so 3 rounds (servers' order swapped) and medians
    edit=(--model "$carry/target-q8_0.gguf" --mode edit --clients "$clients" --requests 2 --rounds 3 --max-tokens 400 --ctx 2048)
    [[ $runs == *plain* ]] && stage 30 "$shape q8_0" make_model "$shape" q8_0
    [[ $runs == *plain-exact* ]] && stage 120 "plain, exact" conc "${plain[@]}" --json "$out/plain-exact.json" >"$out/plain-exact.txt" 2>>"$log"
    [[ $runs == *edit-exact* ]] && stage 60 "edit, exact" conc "${edit[@]}" --json "$out/edit-exact.json" >"$out/edit-exact.txt" 2>>"$log"
    [[ $runs == *plain-stock* ]] && stage 90 "plain, stock kernels" env EDITSPEC_CUDA_EXACT=0 bash -c 'conc "$@"' _ "${plain[@]}" \
        --json "$out/plain-stock.json" >"$out/plain-stock.txt" 2>>"$log"
    for f in /tmp/concurrency-*.log; do echo "--- $f" >>"$log"; tail -4 "$f" >>"$log"; done
    for f in plain-exact edit-exact plain-stock; do echo "=== $f"; grep -v '^{' "$out/$f.txt" 2>/dev/null; done
    grep -E "skip|error|Error|exited|failed" "$log"
    exit 0
fi
# GPU_CHECK_PLAN=heads (issue 60): a model's own MTP head driven by editspec (--method llama-draft-mtp) and
# by llama-server (--spec-type draft-mtp) on the mimo-7b shape (MiMo-7B's numbers, one MTP block, random
# weights, Q8_0): the head's draft step and generation speed, editspec exact (its default) and on the stock
# kernels with CUDA graphs (EDITSPEC_CUDA_EXACT=0 EDITSPEC_CUDA_GRAPHS=1, llama-server's kernels); then,
# time left, issue 53's edits with `prediction` at 4 clients in longer rounds (6 requests each, 3 rounds)
if [ "${GPU_CHECK_PLAN:-}" = heads ]; then
    hshape=${GPU_CHECK_HEADS_SHAPE:-mimo-7b}
    mm=$m/$hshape-q8_0.gguf
    mkdir -p /tmp/heads-logs
    heads() { python3 "$root/bench/heads.py" --es "$es" --peers "$prefix/bin" --peer-args "${GPU_CHECK_PEER_ARGS--ngl 99}" \
        --threads 4 --log-dir /tmp/heads-logs --requests 4 --rounds 2 --n-predict 128 "$@"; }
    export -f heads; export prefix
    stage 60 "$hshape q8_0" make_model "$hshape" q8_0
    stage 120 "heads, exact" heads --model "$mm" --json "$out/heads-exact.json" >"$out/heads-exact.txt" 2>>"$log"
    grep -h "statistics\|llama-draft-mtp:" /tmp/heads-logs/heads-*.log | tail -4 >>"$log"
    stage 120 "heads, stock kernels" env EDITSPEC_CUDA_EXACT=0 EDITSPEC_CUDA_GRAPHS=1 bash -c 'heads "$@"' _ --model "$mm" \
        --json "$out/heads-stock.json" >"$out/heads-stock.txt" 2>>"$log"
    grep -h "statistics\|llama-draft-mtp:" /tmp/heads-logs/heads-*.log | tail -4 >>"$log"
    rm -f "$mm"
    if [ -f "$carry/target-q8_0.gguf" ]; then
        conc() { python3 "$root/bench/concurrency.py" --es "$es" --peers "$prefix/bin" --peer-args "-ngl 99" --threads 4 "$@"; }
        export -f conc
        for spec in ${GPU_CHECK_EDIT_SPECS:-ngram-simple}; do # llama-server's --spec-type, each in turn
            stage 60 "edit, 4 clients, 6 requests, $spec" conc --model "$carry/target-q8_0.gguf" --mode edit --clients 4 \
                --requests 6 --rounds 3 --max-tokens 400 --ctx 2048 --spec-type "$spec" >"$out/edit-4-$spec.txt" 2>>"$log"
        done
    fi
    for f in "$out"/heads-exact.txt "$out"/heads-stock.txt "$out"/edit-4-*.txt; do
        echo "=== $(basename "$f" .txt)"; grep -v '^{' "$f" 2>/dev/null
    done
    grep -E "skip|error|Error|exited|failed|Traceback" "$log"
    exit 0
fi
# GPU_CHECK_PLAN=issue73: issue 73's bar in one call, for the exact default (batch-invariant kernels, the fixed
# split of K, the fixup in the kernel and one quantization per input: the patch's items 2 and 6) and for the
# candidate default, that mode with what is built but not yet measured on a GPU: the row-wise fusions
# (EDITSPEC_CUDA_FUSION=1, items 5 and 8), a CUDA graph per pass shape (EDITSPEC_CUDA_GRAPHS=1, item 7) and argmax
# outputs (EDITSPEC_DEVICE_ARGMAX=1, item 9). In the bar's order: check-exact of both (the candidate's knobs each
# alone where all three together fail), the pass cost of each knob, the CanItEdit edit replays on ds13 Q8_0 and
# Q4_K_M (exact, candidate, stock with llama.cpp's ngram-simple), plain completions at 1-32 clients against
# llama-server, the 3k-token applies on the 6.7B shape (DIR/apply3k.jsonl), then the other weight types. (A
# replay's outputs are the reference's whatever the kernels: check-exact is what says a mode is exact.)
if [ "${GPU_CHECK_PLAN:-}" = issue73 ]; then
    export LD_LIBRARY_PATH=$LD_LIBRARY_PATH:$prefix/bin # llama-server's own libraries (libmtmd, its impl) sit beside it
    ds=$m/$shape-q8_0.gguf
    q4=$m/$shape-q4_k_m.gguf
    qw=${GPU_CHECK_GQA_SHAPE:-qwen2.5-coder-1.5b}
    exact=$out/exact.txt
    ck() { "$es" check-exact -m "$1" --max 256 --prefix 0 --prefix 300 >>"$exact" 2>&1; echo "rc $? $(basename "$1") ${2:-}" >>"$exact"; }
    ck_step() { "$es" check-exact -m "$1" --max 64 --prefix 300 --requests 4 --requests 16 >>"$exact" 2>&1; echo "rc $? $(basename "$1") step ${2:-}" >>"$exact"; }
    passed() { tail -1 "$exact" | grep -q "^rc 0 "; }
    export -f ck ck_step; export exact
    model_and_check() { [ -f "$m/$1-$2.gguf" ] || make_model "$1" "$2"; ck "$m/$1-$2.gguf"; }
    export -f model_and_check
    stage 30 "$shape q8_0" make_model "$shape" q8_0
    stage 25 "check-exact $shape q8_0" ck "$ds" default
    # items 2 and 6 not exact or crashed: their first versions (the fixup launch, a quantization a matrix) one,
    # then the other, then both, for the whole plan, said in the log
    if ! passed; then
        for fallback in GGML_CUDA_BATCH_INVARIANT_FIXUP=launch GGML_CUDA_BATCH_INVARIANT_SHARE=0 \
                "GGML_CUDA_BATCH_INVARIANT_FIXUP=launch GGML_CUDA_BATCH_INVARIANT_SHARE=0"; do
            echo "== not exact or crashed with items 2 and 6: $fallback" >>"$exact"
            stage 25 "check-exact $shape q8_0, $fallback" env $fallback bash -c 'ck "$1" "$2"' _ "$ds" "$fallback"
            if passed; then
                say "items 2/6 not exact or crashed: $fallback for the plan"
                export $fallback
                break
            fi
        done
    fi
    # the candidate: the three knobs together; where that fails, each alone, and the ones that pass together
    cand="EDITSPEC_CUDA_FUSION=1 EDITSPEC_CUDA_GRAPHS=1 EDITSPEC_DEVICE_ARGMAX=1"
    stage 25 "check-exact $shape q8_0, candidate" env $cand bash -c 'ck "$1" "$2"' _ "$ds" candidate
    if ! passed; then
        ok=""
        for k in $cand; do
            stage 25 "check-exact $shape q8_0, $k" env $k bash -c 'ck "$1" "$2"' _ "$ds" "$k"
            passed && ok="$ok $k"
        done
        cand=${ok# }
        [ -n "$cand" ] && stage 25 "check-exact $shape q8_0, candidate $cand" env $cand bash -c 'ck "$1" "$2"' _ "$ds" "candidate $cand"
        passed || cand=""
    fi
    say "candidate: ${cand:-none (the exact default alone)}"
    echo "== candidate: ${cand:-none}" >>"$exact"
    export cand
    cenv() { env $cand "$@"; } # a command in the candidate's environment
    export -f cenv
    stage 45 "check-exact $shape q4_k_m" model_and_check "$shape" q4_k_m
    [ -n "$cand" ] && stage 25 "check-exact $shape q4_k_m, candidate" cenv bash -c 'ck "$1" candidate' _ "$q4"
    stage 45 "check-exact $qw q4_k_m" model_and_check "$qw" q4_k_m
    # the server's step: 4 and 16 requests in one decode (a GPU's layout: a KV stream each), each row against the
    # request alone (check-exact --requests)
    stage 40 "check-exact $shape q8_0, 4 and 16 requests" ck_step "$ds" default
    [ -n "$cand" ] && stage 30 "check-exact $shape q8_0, 4 and 16 requests, candidate" cenv bash -c 'ck_step "$1" candidate' _ "$ds"
    stage 30 "check-exact $shape q4_k_m, 4 and 16 requests" ck_step "$q4" default
    cost=$out/cost.txt
    for k in exact candidate fusion graphs argmax fixup-launch share-off split1 stock; do
        case $k in
        exact) env=() ;;
        candidate) env=($cand) ;;
        fusion) env=(EDITSPEC_CUDA_FUSION=1) ;;
        graphs) env=(EDITSPEC_CUDA_GRAPHS=1) ;;
        argmax) env=(EDITSPEC_DEVICE_ARGMAX=1) ;;
        fixup-launch) env=(GGML_CUDA_BATCH_INVARIANT_FIXUP=launch) ;;
        share-off) env=(GGML_CUDA_BATCH_INVARIANT_SHARE=0) ;;
        split1) env=(GGML_CUDA_BATCH_INVARIANT_SPLIT=1) ;;
        stock) env=(EDITSPEC_CUDA_EXACT=0) ;;
        esac
        echo "== cost, kernels: $k ${env[*]}" >>"$cost"
        stage 15 "cost $k" env "${env[@]}" "$es" cost -m "$ds" --fresh --no-save --max 256 --reps 5 >>"$cost" 2>>"$log"
    done
    knobs() { env | grep -E '^(EDITSPEC_CUDA_FUSION|EDITSPEC_CUDA_GRAPHS|EDITSPEC_DEVICE_ARGMAX|GGML_CUDA_BATCH_INVARIANT_[A-Z]+)=' | sort | tr '\n' ' '; }
    export -f knobs
    replay() { # NAME MODEL KERNELS METHODS
        "$es" bench --replay --dataset "$root/datasets/canitedit/normalized.jsonl" --kernels "$3" \
            --setting "real-shape replay, $(nvidia-smi --query-gpu=name --format=csv,noheader), kernels $3 $(knobs)" \
            --out "/tmp/bench-$1" -m "$2" --task edit --limit 20 --methods "$4" >>"$log" 2>&1
        cp "/tmp/bench-$1/report.md" "$out/$1-report.md"
        cp "/tmp/bench-$1/results.json" "$out/$1-results.json"
    }
    export -f replay; export ds q4
    stage 60 "edit replay q8_0, exact" replay edit-exact "$ds" exact ar,auto
    [ -n "$cand" ] && stage 60 "edit replay q8_0, candidate" cenv bash -c 'replay "$@"' _ edit-candidate "$ds" exact ar,auto
    stage 45 "edit replay q8_0, stock" replay edit-stock "$ds" stock ar,auto,llama-ngram-simple
    [ -n "$cand" ] && stage 60 "edit replay q4_k_m, candidate" cenv bash -c 'replay "$@"' _ q4-candidate "$q4" exact ar,auto
    stage 45 "edit replay q4_k_m, stock" replay q4-stock "$q4" stock ar,auto,llama-ngram-simple
    conc() { python3 "$root/bench/concurrency.py" --es "$es" --peers "$prefix/bin" --peer-args "-ngl 99" --threads 4 "$@"; }
    export -f conc; export prefix
    # both servers up at once, rounds back to back (--interleave); 16 clients for issue 70's host share
    if [ -x "$prefix/bin/llama-server" ]; then
        stage 60 "plain 1,8,16,32, exact" conc --model "$ds" --mode plain --clients "${GPU_CHECK_CLIENTS:-1,8,16,32}" \
            --interleave --requests 4 --n-predict 128 --json "$out/plain-exact.json" >"$out/plain-exact.txt" 2>>"$log"
        [ -n "$cand" ] && stage 50 "plain 1,8,32, candidate" cenv bash -c 'conc "$@"' _ --model "$ds" --mode plain \
            --clients "${GPU_CHECK_CLIENTS_CAND:-1,8,32}" --interleave --requests 4 --n-predict 128 \
            --json "$out/plain-candidate.json" >"$out/plain-candidate.txt" 2>>"$log"
    fi
    if [ -f "$carried/apply3k.jsonl" ]; then
        stage 60 "$big q8_0" make_model "$big" q8_0
        apply3k() { # NAME KERNELS
            "$es" bench --replay --dataset "$carried/apply3k.jsonl" --kernels "$2" --task apply --no-ar --methods auto -c 8192 \
                --setting "real-shape replay, $(nvidia-smi --query-gpu=name --format=csv,noheader), kernels $2 $(knobs)" \
                --out "/tmp/bench-$1" -m "$m/$big-q8_0.gguf" >>"$log" 2>&1
            cp "/tmp/bench-$1/report.md" "$out/$1-report.md"
            cp "/tmp/bench-$1/results.json" "$out/$1-results.json"
        }
        export -f apply3k; export big carried
        stage 30 "apply 3k, exact" apply3k apply3k-exact exact
        [ -n "$cand" ] && stage 30 "apply 3k, candidate" cenv bash -c 'apply3k "$@"' _ apply3k-candidate exact
        stage 25 "apply 3k, stock" apply3k apply3k-stock stock
        [ "$big" != "$shape" ] && rm -f "$m/$big-q8_0.gguf" # 7 GB; in a dry run (one tiny shape) it is the edits' model
    fi
    # the exact default's Q4_K_M row when there is no candidate (2026-11-28 measured it: 1,376 tok/s)
    [ -z "$cand" ] && stage 60 "edit replay q4_k_m, exact" replay q4-exact "$q4" exact ar,auto
    for t in q6_k q5_k_m q4_0 q8_0; do stage 30 "check-exact $qw $t" model_and_check "$qw" $t; done
    # llama.cpp's graphs crashed on speculative passes of changing sizes with the stock kernels (docs/gpu.md):
    # with a graph per pass shape (item 7), the stock kernels as llama-server runs them
    stage 45 "edit replay q8_0, stock, graphs" env EDITSPEC_CUDA_GRAPHS=1 bash -c 'replay "$@"' _ edit-stock-graphs "$ds" stock ar,auto
    # the 6.7B shape's K-quants (2026-11-28 checked its Q8_0 only), 128 tokens a pass at most as then
    ck_big() { [ -f "$m/$big-$1.gguf" ] || make_model "$big" "$1"; "$es" check-exact -m "$m/$big-$1.gguf" --max 128 \
        --prefix 0 --prefix 300 >>"$exact" 2>&1; echo "rc $? $big-$1.gguf ${2:-}" >>"$exact"; }
    export -f ck_big; export big
    stage 60 "check-exact $big q4_k_m" ck_big q4_k_m default
    [ -n "$cand" ] && stage 40 "check-exact $big q4_k_m, candidate" cenv bash -c 'ck_big q4_k_m candidate'
    say "done"
    echo "=== summary"
    grep -E "^rc |^== candidate|differs" "$exact" | tail -40
    grep -v "^$" "$cost" | grep -E "^==|^ +(1|8|16|32|64|128|256) "
    for f in edit-exact edit-candidate edit-stock edit-stock-graphs q4-exact q4-candidate q4-stock apply3k-exact apply3k-candidate apply3k-stock; do
        [ -f "$out/$f-report.md" ] || continue
        echo "== $f"; grep -E "^\| (ar|auto|llama)" "$out/$f-report.md" | head -4
        # issue 73 item 5: a decode with outputs waits for the device, so "other ms" is the host's own time
        awk -F'|' '$2 ~ /^ (ar|auto) $/ { d = $9 + 0; c = $10 + 0; o = $12 + 0; if (d + c + o > 0)
            printf "%s: host share %.3f (draft %.0f + other %.0f ms of %.0f; passes %d)\n", $2, (d + o) / (d + c + o), d, o, d + c + o, $6 }' \
            "$out/$f-report.md"
    done
    for f in plain-exact plain-candidate; do
        grep -v '^{' "$out/$f.txt" 2>/dev/null
        # the engine's host share, the steps' layout and the output rows read in place / copied (item 5), per round
        grep '^{' "$out/$f.txt" 2>/dev/null | python3 -c 'import json, sys
for l in sys.stdin:
    r = json.loads(l)
    if "host_share" in r: print(r["server"], r["clients"], "clients: host_share", r["host_share"], "copy_share", r.get("copy_share"), "layout_share", r.get("layout_share"), "rows lent/copied", r.get("rows_lent"), r.get("rows_copied"), "argmax steps", r.get("argmax_steps_share"))'
    done
    grep -E "identical_to_ar=|CUDA error|skip|error|Traceback" "$log" | tail -16
    exit 0
fi
for t in f16 q8_0 q4_k_m; do stage 5 "tiny-256 $t" make_model tiny-256 $t; done
ds=$m/$shape-q8_0.gguf
[ -f "$ds" ] || stage 30 "$shape q8_0" make_model "$shape" q8_0

# --- batch invariance: every type, flash attention off and on
exact=$out/exact.txt
check() { "$es" check-exact -m "$1" --max 256 --prefix 0 --prefix 300 $2 >>"$exact" 2>&1; echo "rc $?" >>"$exact"; }
export -f check
export exact
check_all() {
    for f in "$@"; do
        for fa in "" --flash-attn; do stage 10 "check-exact $(basename "$f") $fa" check "$f" "$fa"; done
    done
}
# GPU_CHECK_PLAN=invariant: the batch-invariant mode of patches/ggml-cuda-batch-invariant.patch
# (GGML_CUDA_BATCH_INVARIANT=1; fusion off) against the stock paths: exactness, pass cost, llama-bench,
# and the edit replay with flash attention on
if [ "${GPU_CHECK_PLAN:-}" = invariant ]; then
    inv() { GGML_CUDA_BATCH_INVARIANT=1 GGML_CUDA_DISABLE_FUSION=1 "$@"; }
    export -f inv
    [ "$shape" != tiny-256 ] && stage 30 "$shape q4_k_m" make_model "$shape" q4_k_m
    exact=$out/exact-invariant.txt
    for f in $m/tiny-256-q8_0.gguf $m/tiny-256-q4_k_m.gguf "$ds" $m/$shape-q4_k_m.gguf $m/tiny-256-f16.gguf; do
        [ -f "$f" ] || continue
        stage 10 "invariant check-exact $(basename "$f") FA" bash -c 'inv "$0" check-exact -m "$1" --max 256 --prefix 0 --prefix 300 --flash-attn >>"$2" 2>&1; echo "rc $?" >>"$2"' "$es" "$f" "$exact"
    done
    stage 10 "invariant check-exact $(basename "$ds") no FA" bash -c 'inv "$0" check-exact -m "$1" --max 256 --prefix 0 --prefix 300 >>"$2" 2>&1; echo "rc $?" >>"$2"' "$es" "$ds" "$exact"
    for mode in stock invariant; do
        run_mode() { if [ "$mode" = invariant ]; then inv "$@"; else "$@"; fi; }
        export -f run_mode; export mode
        stage 10 "cost $mode FA" run_mode "$es" cost -m "$ds" --fresh --no-save --max 256 --reps 5 --flash-attn >>"$out/cost-invariant.txt" 2>>"$log"
        echo "($mode)" >>"$out/cost-invariant.txt"
        stage 20 "llama-bench $mode" run_mode /tmp/llama-bench -m "$ds" -ngl 99 -fa 1 -p 8,64,512 -n 128 -r 3 >>"$out/cost-invariant.txt" 2>>"$log"
    done
    stage 60 "invariant edit replay" bash -c 'inv "$0" bench --replay --dataset "$1/datasets/canitedit/normalized.jsonl" --setting "real-shape replay, batch-invariant mode, flash attention" --out /tmp/bench-inv -m "$2" --task edit --limit 20 --flash-attn --methods ar,reuse+lookup-longest,auto,llama-ngram-simple >>"$3" 2>&1; cp /tmp/bench-inv/report.md "$4/edit-invariant-report.md"' "$es" "$root" "$ds" "$log" "$out"
    echo "=== summary"
    grep -E "^# |^ +[0-9]+ +[0-9]+ +[0-9]+ |^rc " "$exact"
    cat "$out/cost-invariant.txt" | grep -v "^$"
    grep -E "identical_to_ar=|CUDA error" "$log"
    exit 0
fi

# GPU_CHECK_EDIT_ONLY=1: only the edit replay, one process per group of methods (a crash in one
# method's run leaves the others' figures)
if [ -n "${GPU_CHECK_EDIT_ONLY:-}" ]; then
    edit_groups=("ar,auto,reuse+lookup-longest,lookup-longest" "ar,llama-ngram-simple" "ar,llama-ngram-map-k,llama-ngram-mod")
else
    check_all $m/tiny-256-*.gguf "$ds"
    edit_groups=("ar,auto,lookup-longest,reuse+lookup-longest,llama-ngram-simple,llama-ngram-map-k,llama-ngram-mod")
fi

# --- real-shape replays: CanItEdit edits on the ds13 shape, fast apply on the 6.7B shape
bench() {
    local name=$1
    shift
    "$es" bench --replay --dataset "$root/datasets/canitedit/normalized.jsonl" --setting "real-shape replay, $(nvidia-smi --query-gpu=name --format=csv,noheader)" \
        --out "/tmp/bench-$name" "$@" >>"$log" 2>&1
    cp "/tmp/bench-$name/report.md" "$out/$name-report.md"
}
export -f bench
for i in "${!edit_groups[@]}"; do
    stage 40 "edit replay $shape ${edit_groups[$i]}" bench "edit$i" -m "$ds" --task edit --limit 20 --methods "${edit_groups[$i]}"
done
[ -n "${GPU_CHECK_EDIT_ONLY:-}" ] && { grep -E "identical_to_ar=|start edit replay|CUDA error|Abort" "$log"; exit 0; }
[ -f "$m/$big-q8_0.gguf" ] || stage 60 "$big q8_0" make_model "$big" q8_0
stage 60 "apply replay $big" bench big-apply -m "$m/$big-q8_0.gguf" --task apply --limit 10 \
    --methods ar,auto,reuse+lookup-longest,lookup-longest,llama-ngram-simple

# --- pass cost by size and llama-bench of the same build
wait
for fa in "" --flash-attn; do
    stage 20 "cost $fa" "$es" cost -m "$ds" --fresh --max 256 --reps 5 $fa >>"$out/cost.txt" 2>>"$log"
done
stage 40 llama-bench /tmp/llama-bench -m "$ds" -ngl 99 -fa 0,1 -p 64,256,512 -n 128 -r 3 >>"$out/cost.txt" 2>>"$log"

# --- the other real-shape types
if [ "$shape" != tiny-256 ]; then
    for t in f16 q4_k_m; do stage 30 "$shape $t" make_model "$shape" $t && check_all "$m/$shape-$t.gguf"; done
fi
say "done"

# the reply of a lease carries the end of the output: a short summary last
echo "=== summary"
grep -E "^# |^ +[0-9]+ +[0-9]+ +[0-9]+ |^rc " "$out/exact.txt" 2>/dev/null
cat "$out/cost.txt" 2>/dev/null | grep -v "^$"
grep -E "identical_to_ar=|start (edit|apply) replay|CUDA error" "$log" 2>/dev/null
grep -E "CUDA build|skip" "$log"
