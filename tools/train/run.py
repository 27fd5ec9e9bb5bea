#!/usr/bin/env python3
"""The training pipeline, end to end, in one command (see tools/train/README.md).

    python3 tools/train/run.py --preset full  --seed 1 --out build/train-out      # the shipped models, <= 2 h on 2 cores
    python3 tools/train/run.py --preset smoke --seed 1 --out build/train-smoke    # minutes: checks every stage
    python3 tools/train/run.py ... --ship     # also copy the GGUFs and the model card to models/

Stages, each cached in OUT (a stage whose stamp matches its inputs is skipped; training resumes from
its last checkpoint):

    build      cmake tools/train -> build/train/bin/editspec-train-{tokenize,eval,bench-opt}   (-j1)
    corpus     the standard library files, split by module into train / held-out      data/corpus.json
    edits      synthetic edits from the functions of both splits                        data/edits-*.jsonl
    tokenizer  BPE trained on the training files (or DeepSeek-Coder's vocabulary)      data/tokenizer.gguf
    tokenize   llama.cpp tokenizes everything; edit tokens get their kinds             data/*.npy, *.npz
    applies    fast-apply tasks (file piece, snippet, merged file) from both splits     apply-data/
    fim-data   fill-in-the-middle examples, the FIM tokens added to the vocabulary     fim-data/
    train      pre-train the target (code + edits) and, beside it, the draft; then     target/ draft/
               the target fine-tuned on apply tasks at a longer context, then         target-apply/
               on FIM examples with apply tasks and edits mixed in (shipped)          target-fim/
    labels     the target's own answers to training edits (EfficientEdit §III-B)            labels/
    finetune   the draft fine-tuned twice on them: plain (answer tokens) and
               edit-oriented (EfficientEdit eq. 8: new-line tokens only)               draft-plain/ draft-edit/
    eval       held-out metrics through llama.cpp and editspec                          eval/summary.json
    apply-eval held-out apply tasks (and CanItEdit's) through `editspec bench`          eval/apply.json
    fim-eval   next-line exact match on held-out files, with and without the suffix   eval/fim.json
    card       the model card                                                           MODEL_CARD.md

With --jobs 2 (the default) the two pre-trainings run at the same time, one thread each (the target
goes on with two once the draft has finished), then the labels in two shards, then the two
fine-tunings; every other process uses one thread (torch, OpenBLAS and OpenMP pinned to 1).
"""
from __future__ import annotations

import argparse
import hashlib
import json
import os
import shutil
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
DEBIAN_PYTHON = "/usr/bin/python3"

# ----------------------------------------------------------------------------
# presets: model shapes, schedules, data sizes

TARGET_SHAPE = {"n_embd": 384, "n_layer": 7, "n_head": 6, "n_head_kv": 6, "n_ff": 1152, "tied": True}
DRAFT_SHAPE = {"n_embd": 256, "n_layer": 4, "n_head": 4, "n_head_kv": 4, "n_ff": 768, "tied": True}

PRESETS = {
    # every stage at toy sizes: the pipeline works, the numbers mean nothing
    "smoke": {"n_vocab": 4096, "n_ctx": 512, "edits_train": 4000, "edits_heldout": 200,
              "target": {"shape": TARGET_SHAPE, "steps": 60, "batch": 4, "lr": 2e-3, "warmup": 20, "copy_warmup": 10},
              "draft": {"shape": DRAFT_SHAPE, "steps": 60, "batch": 4, "lr": 3e-3, "warmup": 20},
              "finetune": {"steps": 30, "batch": 4, "lr": 1e-3, "warmup": 5}, "labels": 40,
              "eval": {"spec_prompts": 10, "spec_gen": 32, "max_edits": 8, "spec_edits": 8}, "eval_every": 30,
              "apply": {"n_ctx": 1024, "steps": 30, "batch": 2, "lr": 3e-4, "warmup": 5, "p_edit": 0.85, "tasks_train": 300,
                        "tasks_heldout": 20, "max_chars": 1200, "edits_mix": 100},
              "fim": {"n_ctx": 1024, "steps": 30, "batch": 2, "lr": 3e-4, "warmup": 5, "p_edit": 0.9, "fim_train": 500,
                      "fim_heldout": 20, "apply_mix": 100, "eval_lines": 40, "order": "spm"}},
    # the test suite's preset (tests/train): toy shapes and steps on a small corpus (--corpus-root), every
    # stage in about a minute; checks that the pipeline runs and is deterministic, not what it learns
    "test": {"n_vocab": 384, "n_ctx": 512, "edits_train": 400, "edits_heldout": 12,
             "target": {"shape": {"n_embd": 64, "n_layer": 2, "n_head": 2, "n_head_kv": 2, "n_ff": 192, "tied": True},
                        "steps": 12, "batch": 2, "lr": 2e-3, "warmup": 4, "p_edit": 0.7, "copy_warmup": 3},
             "draft": {"shape": {"n_embd": 32, "n_layer": 1, "n_head": 2, "n_head_kv": 2, "n_ff": 96, "tied": True},
                       "steps": 12, "batch": 2, "lr": 3e-3, "warmup": 4, "p_edit": 0.7, "copy_warmup": 3},
             "finetune": {"steps": 6, "batch": 2, "lr": 1e-3, "warmup": 2}, "labels": 8,
             "eval": {"spec_prompts": 4, "spec_gen": 16, "max_edits": 6, "spec_edits": 4}, "eval_every": 6,
             "apply": {"n_ctx": 768, "steps": 6, "batch": 2, "lr": 3e-4, "warmup": 2, "p_edit": 0.85, "tasks_train": 40,
                       "tasks_heldout": 6, "max_chars": 800, "edits_mix": 20},
             "fim": {"n_ctx": 768, "steps": 6, "batch": 2, "lr": 3e-4, "warmup": 2, "p_edit": 0.9, "fim_train": 40,
                     "fim_heldout": 6, "apply_mix": 20, "edits_mix": 10, "eval_lines": 8, "order": "spm"}},
    # learning curves in ~8 minutes of one core each
    "short": {"n_vocab": 4096, "n_ctx": 512, "edits_train": 30000, "edits_heldout": 200,
              "target": {"shape": TARGET_SHAPE, "steps": 160, "batch": 4, "lr": 1e-3, "warmup": 30},
              "draft": {"shape": DRAFT_SHAPE, "steps": 320, "batch": 4, "lr": 1.5e-3, "warmup": 30},
              "finetune": {"steps": 60, "batch": 4, "lr": 5e-4, "warmup": 10}, "labels": 300,
              "eval": {"spec_prompts": 40, "spec_gen": 128, "max_edits": 200, "spec_edits": 40}, "eval_every": 40,
              "apply": {"n_ctx": 1024, "steps": 120, "batch": 2, "lr": 3e-4, "warmup": 20, "p_edit": 0.85, "tasks_train": 2000,
                        "tasks_heldout": 100, "max_chars": 1200, "edits_mix": 500},
              "fim": {"n_ctx": 1024, "steps": 120, "batch": 2, "lr": 3e-4, "warmup": 20, "p_edit": 0.9, "fim_train": 4000,
                      "fim_heldout": 100, "apply_mix": 1000, "eval_lines": 200, "order": "spm"}},
    # the shipped models: steps set from the throughput measured here (README.md): the draft ~6,500
    # tokens/s on one core (3000 x 2048: ~16 min), beside it the 7-layer target on the other core
    # ~2,300 (~1,100 steps by then), then on both cores ~3,800 (the other 8,500 steps: ~71 min). 70 % of
    # the sequences of both are edits and their first 300 steps pure copies: both teach the copying exact
    # edits need. Then the target answers 2,000 training edits (~4 min) and the two fine-tunings of
    # 1000 x 2048 run side by side (~5 min); data ~1.5 min, eval ~5 min: ~101 min in all (measured)
    "full": {"n_vocab": 4096, "n_ctx": 512, "edits_train": 30000, "edits_heldout": 200,
             "target": {"shape": TARGET_SHAPE, "steps": 9600, "batch": 4, "lr": 1e-3, "warmup": 100, "p_edit": 0.7,
                        "copy_warmup": 300},
             "draft": {"shape": DRAFT_SHAPE, "steps": 3000, "batch": 4, "lr": 1.5e-3, "warmup": 100, "p_edit": 0.7,
                       "copy_warmup": 300},
             "finetune": {"steps": 1000, "batch": 4, "lr": 5e-4, "warmup": 50, "p_edit": 0.5}, "labels": 2000,
             "eval": {"spec_prompts": 60, "spec_gen": 128, "max_edits": 200, "spec_edits": 60}, "eval_every": 400,
             # fast apply (issue 21): the pre-trained target fine-tuned on apply tasks at a longer context
             # (whole pieces of files: the code, the snippet and the merged code), with edits and code mixed in
             "apply": {"n_ctx": 1024, "steps": 1200, "batch": 2, "lr": 5e-4, "warmup": 50, "p_edit": 0.85,
                       "tasks_train": 8000, "tasks_heldout": 200, "max_chars": 1200, "edits_mix": 3000},
             # fill in the middle (issue 40): target-apply's export, its vocabulary grown by the three FIM
             # tokens, fine-tuned on FIM examples shaped as editors send them with apply tasks and edits
             # mixed in (tools/train/fim.py), as many of the pre-training's edits as FIM examples (with fewer
             # the edit skill decays: 4,000 apply examples alone, held-out edits 48 % exact to 37.5 %); this
             # is the shipped target. Suffix-prefix-middle: the middle
             # continues the prefix, which a small model learns far sooner than prefix-suffix-middle (500
             # steps of PSM: 0.7 % of held-out next lines exact, under the 7 % of plain completion)
             "fim": {"n_ctx": 1024, "steps": 2000, "batch": 2, "lr": 5e-4, "warmup": 50, "p_edit": 0.9, "fim_train": 20000,
                     "fim_heldout": 200, "apply_mix": 4000, "edits_mix": 20000, "eval_lines": 500, "order": "spm"}},
}

WEIGHTS_PRETRAIN = {"prompt": 0.0, "same": 1.0, "new": 1.0, "eos": 1.0, "code": 1.0}
WEIGHTS_PLAIN = {"prompt": 0.0, "same": 1.0, "new": 1.0, "eos": 1.0, "code": 1.0}
WEIGHTS_EDIT = {"prompt": 0.0, "same": 0.0, "new": 1.0, "eos": 0.0, "code": 1.0}


def log(msg):
    print(f"[{time.strftime('%H:%M:%S')}] {msg}", flush=True)


def ensure_python():
    """re-run under Debian's python3 when this interpreter has no torch (pyenv shims come first on PATH)"""
    try:
        import torch  # noqa: F401
        import numpy  # noqa: F401
        return
    except ImportError:
        pass
    if os.path.realpath(sys.executable) != os.path.realpath(DEBIAN_PYTHON) and os.path.exists(DEBIAN_PYTHON):
        os.execv(DEBIAN_PYTHON, [DEBIAN_PYTHON] + sys.argv)
    # the pipeline installs what it needs from Debian's packages, only where missing
    pkgs = ["python3-numpy", "python3-torch", "libopenblas0-pthread"]
    ok = subprocess.run([os.path.join(ROOT, "scripts", "deb-install.sh")] + pkgs).returncode == 0
    if ok and os.path.exists(DEBIAN_PYTHON):
        os.execv(DEBIAN_PYTHON, [DEBIAN_PYTHON] + sys.argv)
    sys.exit(f"run: torch is missing and could not be installed: apt-get install -y {' '.join(pkgs)}")


def editspec_bin() -> str:
    """the editspec CLI the evaluation runs: $EDITSPEC_BIN (the test suite's build), else build/bin/editspec"""
    return os.environ.get("EDITSPEC_BIN") or os.path.join(ROOT, "build", "bin", "editspec")


def llama_prefix() -> str:
    p = os.environ.get("LLAMA_PREFIX")
    if p:
        return p
    r = subprocess.run([os.path.join(ROOT, "scripts", "setup-llama.sh")], capture_output=True, text=True)
    if r.returncode != 0:
        sys.exit(f"run: scripts/setup-llama.sh failed:\n{r.stderr}")
    return r.stdout.strip().splitlines()[-1]


def env_one_thread(gguf_py: str) -> dict:
    e = dict(os.environ)
    e.update({"OPENBLAS_NUM_THREADS": "1", "OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1", "EDITSPEC_GGUF_PY": gguf_py,
              "PYTHONHASHSEED": "0"})
    return e


def env_for_scripts() -> dict:
    """the trainer's environment for scripts outside the pipeline (experiments/): one thread, the pinned
    llama.cpp's gguf-py, also set in this process (export reads it)"""
    env = env_one_thread(os.path.join(os.path.dirname(llama_prefix()), "src", "gguf-py"))
    os.environ["EDITSPEC_GGUF_PY"] = env["EDITSPEC_GGUF_PY"]
    return env


def src_hash(*names) -> str:
    """hash of pipeline source files: a stage's key includes the code that makes its output"""
    h = hashlib.sha256()
    for n in names:
        h.update(open(os.path.join(HERE, n), "rb").read())
    return h.hexdigest()[:16]


def key_of(obj) -> str:
    return hashlib.sha256(json.dumps(obj, sort_keys=True).encode()).hexdigest()[:16]


class stages:
    def __init__(self, out: str):
        self.out = out

    def done(self, name: str, key: str) -> bool:
        p = os.path.join(self.out, f"stage-{name}.json")
        return os.path.exists(p) and json.load(open(p)).get("key") == key

    def mark(self, name: str, key: str, info: dict | None = None):
        p = os.path.join(self.out, f"stage-{name}.json")
        with open(p + ".tmp", "w") as f:
            json.dump({"key": key, "time": time.strftime("%Y-%m-%d %H:%M:%S"), **(info or {})}, f, indent=1)
        os.replace(p + ".tmp", p)


def cpu_has_bf16() -> bool:
    try:
        return "avx512_bf16" in open("/proc/cpuinfo").read()
    except OSError:
        return False


def train_spec(name, out, data_dir, seed, preset, role, init="", weights=None, seed_offset=0):
    p = PRESETS[preset]
    r = p[role] if role in ("target", "draft", "apply", "fim") else p["finetune"]
    shape = p["draft" if role in ("draft", "finetune") else "target"]["shape"]
    return {
        "name": name, "data": data_dir, "out": os.path.join(out, name), "seed": seed + seed_offset,
        "model": {**shape, "n_vocab": p["n_vocab"], "n_ctx": r.get("n_ctx", p["n_ctx"])}, "init": init,
        "steps": r["steps"], "batch": r["batch"], "lr": r["lr"], "warmup": r["warmup"], "lr_min_frac": 0.1,
        "weight_decay": 0.1, "p_edit": r.get("p_edit", 0.5), "copy_warmup": r.get("copy_warmup", 0),
        "weights": weights or WEIGHTS_PRETRAIN,
        "eval_every": p["eval_every"], "ckpt_every": p["eval_every"], "log_every": 20, "threads": 1,
        "precision": "bf16" if cpu_has_bf16() else "fp32", "ftype": "f16",
    }


def recorded_timings(out, timings):
    """stage seconds as measured by the runs that computed each stage: a stage found cached (well under a
    second) keeps the time recorded in OUT/run-timings.json, so a later `--ship` or resumed run reports
    the work, not the cache look-up"""
    path = os.path.join(out, "run-timings.json")
    stages = {}
    if os.path.exists(path):
        with open(path) as f:
            stages = json.load(f)
    for k, v in timings.items():
        if v >= 1.0 or k not in stages:
            stages[k] = v
    with open(path + ".tmp", "w") as f:
        json.dump(stages, f, indent=1)
    os.replace(path + ".tmp", path)
    return stages


def preset_set(p: dict, kv: str) -> None:
    """--set KEY=JSON: KEY a dotted path to an existing preset value (target.p_edit, eval.max_edits, ...)"""
    key, sep, val = kv.partition("=")
    if not sep:
        sys.exit(f"run: --set '{kv}': expected KEY=VALUE")
    try:
        v = json.loads(val)
    except ValueError:
        sys.exit(f"run: --set '{kv}': the value '{val}' is not JSON (a number, true/false, or a quoted string)")
    *path, last = key.split(".")
    d = p
    for k in path:
        if not isinstance(d.get(k), dict):
            sys.exit(f"run: --set '{kv}': the preset has no section '{k}' (sections: {', '.join(x for x in d if isinstance(d[x], dict))})")
        d = d[k]
    d[last] = v


def run_trainings(specs, env, jobs, deps=None, on_done=None):
    """runs train.py on each spec, at most `jobs` at a time, a spec only after the specs named in
    deps[name] have finished; output lines go to OUT/<name>/train.log, the main ones to the console"""
    deps = deps or {}
    pending = list(specs)
    running, finished = [], set()
    names = {s["name"] for s in specs}
    deps = {n: [d for d in ds if d in names] for n, ds in deps.items()}   # the others are done already
    while pending or running:
        for s in list(pending):
            if len(running) >= jobs:
                break
            if any(d not in finished for d in deps.get(s["name"], [])):
                continue
            pending.remove(s)
            os.makedirs(s["out"], exist_ok=True)
            sp = os.path.join(s["out"], "spec.json")
            with open(sp, "w") as f:
                json.dump(s, f, indent=1)
            logf = open(os.path.join(s["out"], "train.log"), "a")
            pr = subprocess.Popen([sys.executable, os.path.join(HERE, "train.py"), sp], env=env, stdout=subprocess.PIPE,
                                  stderr=subprocess.STDOUT, text=True, bufsize=1)
            os.set_blocking(pr.stdout.fileno(), False)
            running.append((s, pr, logf))
        time.sleep(0.5)
        for item in list(running):
            s, pr, logf = item
            while True:
                line = pr.stdout.readline()
                if not line:
                    break
                logf.write(line)
                logf.flush()
                if "eval step" in line or "done:" in line or "resumed" in line or "parameters" in line or \
                        any(f"step {k}/" in line for k in range(0, 100000, 100)):
                    log(line.rstrip()[:300])
            if pr.poll() is not None:
                rest = pr.stdout.read() or ""
                logf.write(rest)
                logf.close()
                running.remove(item)
                if pr.returncode != 0:
                    for pr2 in running:
                        pr2[1].terminate()
                    raise RuntimeError(f"training '{s['name']}' failed (exit {pr.returncode}); see {s['out']}/train.log:\n{rest[-3000:]}")
                finished.add(s["name"])
                if on_done:
                    on_done(s)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--preset", default="full", choices=sorted(PRESETS))
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--out", default="")
    ap.add_argument("--jobs", type=int, default=2, help="trainings at a time (one thread each)")
    ap.add_argument("--tokenizer", default="bpe", choices=["bpe", "deepseek-coder"])
    ap.add_argument("--scale", type=float, default=1.0,
                    help="multiply every training's steps (e.g. 0.7 on a slower or shared machine); deterministic for a given value")
    ap.add_argument("--vocab", type=int, default=0, help="BPE vocabulary size (0 = the preset's)")
    ap.add_argument("--set", action="append", default=[], metavar="KEY=JSON",
                    help="override a preset value for an experiment, e.g. --set target.p_edit=0.9 --set edits_train=60000 "
                         "(stages whose inputs change are re-run; use another --out)")
    ap.add_argument("--corpus-root", default="")
    ap.add_argument("--until", default="", help="stop after this stage")
    ap.add_argument("--ship", action="store_true", help="copy the GGUFs and the card to models/")
    ap.add_argument("--pretrained-target", default="", metavar="GGUF",
                    help="take this GGUF as the target's pre-training instead of running it (~87 min): it must be that "
                         "stage's export for this preset and seed, which its recorded training spec is checked against "
                         "(models/editspec-target.gguf before issue 21 is, for --preset full --seed 1)")
    ap.add_argument("--take", action="append", default=[], metavar="NAME=GGUF",
                    help="take a training's result from this GGUF instead of running it, checked against its recorded "
                         "spec like --pretrained-target (NAME: target, target-apply or target-fim; models/editspec-target.gguf "
                         "of df13679..8a53dd9 is target-apply for --preset full --seed 1); its folder's ckpt.pt comes "
                         "with it when there (the teacher-forced evaluation reads it)")
    a = ap.parse_args()
    takes = {}
    for kv in a.take:
        name, sep, path = kv.partition("=")
        if not sep or name not in ("target", "target-apply", "target-fim"):
            sys.exit(f"run: --take {kv}: give NAME=GGUF with NAME target, target-apply or target-fim")
        takes[name] = path
    if a.pretrained_target:
        takes.setdefault("target", a.pretrained_target)
    ensure_python()
    sys.path.insert(0, HERE)
    t_start = time.time()
    out = os.path.abspath(a.out or os.path.join(ROOT, "build", f"train-{a.preset}-s{a.seed}"))
    dd = os.path.join(out, "data")
    os.makedirs(dd, exist_ok=True)
    st = stages(out)
    p = PRESETS[a.preset]
    if a.vocab:
        p["n_vocab"] = a.vocab
    for kv in a.set:
        preset_set(p, kv)
    if a.scale != 1.0:
        for role in ("target", "draft", "finetune", "apply"):
            p[role]["steps"] = max(1, int(round(p[role]["steps"] * a.scale)))

    prefix = llama_prefix()
    gguf_py = os.path.join(os.path.dirname(prefix), "src", "gguf-py")
    os.environ["EDITSPEC_GGUF_PY"] = gguf_py
    env = env_one_thread(gguf_py)
    for k in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS"):
        os.environ[k] = "1"
    import data
    timings = {}

    def timed(name, fn):
        t = time.time()
        fn()
        timings[name] = round(time.time() - t, 1)
        if a.until == name:
            log(f"run: stopping after stage {name} (--until)")
            sys.exit(0)

    # build
    bdir = os.path.join(ROOT, "build", "train")
    tools_src = sorted(f for f in os.listdir(HERE) if f.endswith((".cpp", ".txt")))
    k_build = key_of([prefix] + [hashlib.sha256(open(os.path.join(HERE, f), "rb").read()).hexdigest() for f in tools_src])

    def do_build():
        if st.done("build", k_build) and os.path.exists(os.path.join(bdir, "bin", "editspec-train-eval")):
            return
        log("build: tools/train (cmake, -j1)")
        # a cache made against another llama.cpp install keeps its llama_DIR, and the tools would link
        # that install's libllama with this one's libggml
        if os.path.exists(os.path.join(bdir, "CMakeCache.txt")):
            os.remove(os.path.join(bdir, "CMakeCache.txt"))
        subprocess.run(["cmake", "-S", HERE, "-B", bdir, f"-DEDITSPEC_LLAMA_PREFIX={prefix}", "-DCMAKE_BUILD_TYPE=Release"],
                       check=True, stdout=subprocess.DEVNULL)
        subprocess.run(["cmake", "--build", bdir, "-j1"], check=True, stdout=subprocess.DEVNULL)
        st.mark("build", k_build)
    timed("build", do_build)
    tok_tool = os.path.join(bdir, "bin", "editspec-train-tokenize")
    eval_tool = os.path.join(bdir, "bin", "editspec-train-eval")

    # data stages
    import corpus
    root = a.corpus_root or corpus.corpus_root_default()
    k_corpus = key_of(["corpus", a.seed, root, 0.05, src_hash("corpus.py", "data.py")])

    def do_corpus():
        if not st.done("corpus", k_corpus):
            data.stage_corpus(dd, a.seed, root, 0.05, log=log)
            st.mark("corpus", k_corpus)
    timed("corpus", do_corpus)
    k_edits = key_of(["edits", k_corpus, p["edits_heldout"], p["edits_train"], src_hash("edits.py", "data.py")])

    def do_edits():
        if not st.done("edits", k_edits):
            data.stage_edits(dd, a.seed, p["edits_heldout"], p["edits_train"], log=log)
            st.mark("edits", k_edits)
    timed("edits", do_edits)
    k_tok = key_of(["tokenizer", k_edits, a.tokenizer, p["n_vocab"], src_hash("bpe.py")])

    def do_tokenizer():
        if not st.done("tokenizer", k_tok):
            data.stage_tokenizer(dd, a.tokenizer, p["n_vocab"], os.path.join(prefix, "share", "editspec", "vocab"), log=log)
            st.mark("tokenizer", k_tok)
    timed("tokenizer", do_tokenizer)
    k_tokenize = key_of(["tokenize", k_tok, p["n_ctx"], p["edits_heldout"], src_hash("data.py")])

    def do_tokenize():
        if not st.done("tokenize", k_tokenize):
            data.stage_tokenize(dd, tok_tool, p["n_ctx"], p["edits_heldout"], log=log)
            st.mark("tokenize", k_tokenize)
    timed("tokenize", do_tokenize)
    ad = os.path.join(out, "apply-data")
    pa = p["apply"]
    k_applies = key_of(["applies", k_tokenize, a.seed, {k: pa[k] for k in ("n_ctx", "tasks_train", "tasks_heldout", "max_chars", "edits_mix")},
                        src_hash("applies.py", "data.py", "edits.py")])

    def do_applies():
        if not st.done("applies", k_applies):
            data.stage_applies(dd, ad, tok_tool, a.seed, pa["n_ctx"], pa["tasks_train"], pa["tasks_heldout"], pa["max_chars"],
                               pa["edits_mix"], log=log)
            st.mark("applies", k_applies)
    timed("applies", do_applies)
    n_vocab = data.vocab_special(os.path.join(dd, "tokenizer.gguf"))["n_vocab"]
    if n_vocab != p["n_vocab"]:
        p["n_vocab"] = n_vocab   # DeepSeek-Coder's vocabulary
    fd = os.path.join(out, "fim-data")
    pf = p["fim"]
    k_fim_data = key_of(["fim-data", k_applies, a.seed, pf, src_hash("fim.py", "data.py", "bpe.py")])

    def do_fim_data():
        if not st.done("fim-data", k_fim_data):
            data.stage_fim(dd, ad, fd, tok_tool, a.seed, pf["n_ctx"], pf["fim_train"], pf["fim_heldout"], pf["apply_mix"],
                           pf["eval_lines"], pf.get("order", "psm"), log=log)
            import fim
            n_mix = fim.mix_edits(fd, dd, pf.get("edits_mix", 0), a.seed)
            if n_mix:
                log(f"fim: train: {n_mix} of the pre-training's edits mixed in")
                s = json.load(open(os.path.join(fd, "fim-stats.json")))
                data._write_json(os.path.join(fd, "fim-stats.json"), {**s, "edits_mixed_in": n_mix})
            st.mark("fim-data", k_fim_data)
    timed("fim-data", do_fim_data)
    fim_vocab = os.path.join(fd, "tokenizer.gguf")

    # training
    s_target = train_spec("target", out, dd, a.seed, a.preset, "target")
    s_draft = train_spec("draft", out, dd, a.seed, a.preset, "draft", seed_offset=1000)
    if a.jobs >= 2:   # the draft finishes first; its core then goes to the target (no result changes, so not in the key)
        s_target["threads_more"] = {"threads": 2, "after": os.path.join(s_draft["out"], "done.json")}
    k_train_src = src_hash("train.py", "model.py")
    s_target_key = {k: v for k, v in s_target.items() if k != "threads_more"}
    k_target, k_draft = key_of([k_tokenize, s_target_key, k_train_src]), key_of([k_tokenize, s_draft, k_train_src])

    # fast apply: the pre-trained target's export fine-tuned on apply tasks (init from the GGUF, so a run
    # given --pretrained-target makes the same model as one that pre-trained)
    s_apply = train_spec("target-apply", out, ad, a.seed, a.preset, "apply", init=os.path.join(out, "target", "model.gguf"),
                         weights=WEIGHTS_PRETRAIN, seed_offset=3000)
    if a.jobs >= 2:
        s_apply["threads_more"] = {"threads": 2, "after": os.path.join(s_draft["out"], "done.json")}
    k_apply = key_of([k_target, k_applies, {k: v for k, v in s_apply.items() if k != "threads_more"}, k_train_src])

    # fill in the middle: target-apply's export with the FIM tokens added, fine-tuned (the shipped target)
    s_fim = train_spec("target-fim", out, fd, a.seed, a.preset, "fim", init=os.path.join(out, "target-apply", "model.gguf"),
                       weights=WEIGHTS_PRETRAIN, seed_offset=4000)
    s_fim["model"]["n_vocab"] = data.vocab_special(fim_vocab)["n_vocab"]
    s_fim["fim_order"] = pf.get("order", "psm")   # recorded in the GGUF (editspec.fim_order), read by editspec serve
    if a.jobs >= 2:
        s_fim["threads_more"] = {"threads": 2, "after": os.path.join(s_draft["out"], "done.json")}
    k_fim = key_of([k_apply, k_fim_data, {k: v for k, v in s_fim.items() if k != "threads_more"}, k_train_src])
    specs = {"target": s_target, "draft": s_draft, "target-apply": s_apply, "target-fim": s_fim}
    deps = {"target-apply": ["target"], "target-fim": ["target-apply"]}

    def take(name, path):
        """a training's result is the given export: checked against the spec this run would train with"""
        import model as model_py
        s = specs[name]
        want = {k: v for k, v in s.items() if k not in ("out", "data", "init", "threads", "threads_more")}
        net = model_py.llama(model_py.model_config(**s["model"]))
        try:
            got = json.loads(model_py.model_load_gguf(net, path).get("editspec.train.spec", "{}"))
        except (ValueError, OSError) as e:
            sys.exit(f"run: --take {name}={path}: {e}; it is not this preset's {name}")
        for k in ("threads", "threads_more"):   # scheduling details (and a path), no result depends on them
            got.pop(k, None)
        if got != json.loads(json.dumps(want, sort_keys=True)):
            diff = sorted(k for k in set(got) | set(want) if got.get(k) != want.get(k))
            sys.exit(f"run: --take {name}={path}: made by another training spec (differs in {', '.join(diff) or '?'}); "
                     f"it is not this preset's {name}")
        os.makedirs(s["out"], exist_ok=True)
        shutil.copyfile(path, os.path.join(s["out"], "model.gguf"))
        ck = os.path.join(os.path.dirname(os.path.abspath(path)), "ckpt.pt")
        if os.path.exists(ck):
            shutil.copyfile(ck, os.path.join(s["out"], "ckpt.pt"))
        done = {"name": name, "from": os.path.abspath(path), "sha256": hashlib.sha256(open(path, "rb").read()).hexdigest(),
                "steps": s["steps"], "tokens": s["steps"] * s["batch"] * s["model"]["n_ctx"], "params": net.cfg.n_params()}
        src_done = os.path.join(os.path.dirname(os.path.abspath(path)), "done.json")
        if os.path.exists(src_done):   # its training time, for the card
            done["seconds"] = json.load(open(src_done)).get("seconds", 0)
        data._write_json(os.path.join(s["out"], "done.json"), done)
        st.mark(name, keys[name], done)
        log(f"train: {name}: taken from {path} (its recorded spec matches; sha256 {done['sha256'][:12]})")

    def do_train():
        # the pre-trainings, one thread each, side by side; the apply fine-tuning once the target is done,
        # then the FIM one. --until NAME of a training runs only it and what it starts from
        for name in ("target", "target-apply", "target-fim"):
            if name in takes and not st.done(name, keys[name]):
                take(name, takes[name])
        names = list(specs)
        if a.until in specs:
            names, grow = [a.until], True
            while grow:
                more = [d for n in names if not st.done(n, keys[n]) for d in deps.get(n, []) if d not in names]
                names, grow = names + more, bool(more)
        todo = [specs[n] for n in specs if n in names and not st.done(n, keys[n])]
        if "draft" not in [s["name"] for s in todo]:   # no sibling on the other core: take both from the start
            todo = [{**s, "threads": s["threads_more"]["threads"]} if "threads_more" in s else s for s in todo]
        run_todo(todo, deps=deps)
        if a.until in specs:
            log(f"run: stopping after training {a.until} (--until)")
            sys.exit(0)
    keys = {"target": k_target, "draft": k_draft, "target-apply": k_apply, "target-fim": k_fim}

    def run_todo(todo, deps=None):
        for s in todo:   # a stale run starts over; an interrupted one (same settings, no stamp) resumes
            ck = os.path.join(s["out"], "spec.json")
            stamp = os.path.join(out, f"stage-{s['name']}.json")
            sched = ("threads", "threads_more")   # scheduling only: no result depends on them
            if os.path.exists(ck) and {k: v for k, v in json.load(open(ck)).items() if k not in sched} != \
                    {k: v for k, v in s.items() if k not in sched}:
                log(f"train: {s['name']}: settings changed, starting over")
                shutil.rmtree(s["out"])
            elif os.path.exists(s["out"]) and os.path.exists(stamp):
                # same settings but other inputs (the data, the code, or the model it starts from, whose
                # path names it): the stage key differs, so the old checkpoint must not be resumed
                log(f"train: {s['name']}: inputs changed, starting over")
                shutil.rmtree(s["out"])
            if os.path.exists(stamp):   # an interrupted new run then resumes
                os.remove(stamp)
        if todo:
            log(f"train: {', '.join(s['name'] for s in todo)} ({a.jobs} at a time, one thread each)")
            run_trainings(todo, env, a.jobs, deps=deps,
                          on_done=lambda s: st.mark(s["name"], keys[s["name"]], json.load(open(os.path.join(s["out"], "done.json")))))
    timed("train", do_train)

    # the draft's fine-tuning labels: the target's own answers to training edits (EfficientEdit §III-B)
    ld = os.path.join(out, "labels")
    k_labels = key_of([k_target, k_draft, p["labels"], p["n_ctx"], src_hash("labels.py", "data.py", "eval.cpp")])

    def do_labels():
        if st.done("labels", k_labels):
            return
        import labels
        try:
            labels.stage_labels(out, dd, eval_tool, tok_tool, os.path.join(out, "target", "model.gguf"),
                                os.path.join(out, "draft", "model.gguf"), p["labels"], p["n_ctx"], max(1, a.jobs), log=log)
        except ValueError as e:   # data.stage_tokenize's np.concatenate of no examples
            sys.exit(f"run: labels: none of the target's answers fits n_ctx = {p['n_ctx']} tokens with its prompt "
                     f"(an undertrained target that never ends its answers?): {e}")
        st.mark("labels", k_labels)
    timed("labels", do_labels)

    # the draft fine-tuned twice on the same labelled batches: plain (every answer token) and edit-oriented (eq. 8)
    dck = os.path.join(out, "draft", "ckpt.pt")
    s_plain = train_spec("draft-plain", out, ld, a.seed, a.preset, "finetune", init=dck, weights=WEIGHTS_PLAIN, seed_offset=2000)
    s_edit = train_spec("draft-edit", out, ld, a.seed, a.preset, "finetune", init=dck, weights=WEIGHTS_EDIT, seed_offset=2000)
    k_plain, k_edit = key_of([k_draft, k_labels, s_plain, k_train_src]), key_of([k_draft, k_labels, s_edit, k_train_src])
    keys.update({"draft-plain": k_plain, "draft-edit": k_edit})

    def do_finetune():
        run_todo([s for s in (s_plain, s_edit) if not st.done(s["name"], keys[s["name"]])])
        # the drafts with the FIM target's vocabulary (its added tokens as zero rows), so they draft for it
        import model as model_py
        for n in ("draft", "draft-plain", "draft-edit"):
            model_py.gguf_vocab_extend(os.path.join(out, n, "model.gguf"), fim_vocab, os.path.join(out, n, "model-fim.gguf"))
    timed("finetune", do_finetune)

    # evaluation (of the shipped target, target-fim, with the drafts that share its vocabulary)
    k_eval = key_of([k_fim, k_plain, k_edit, p["eval"], src_hash("evaluate.py", "eval.cpp", "model.py")])

    def do_eval():
        if st.done("eval", k_eval):
            return
        e = p["eval"]
        subprocess.run([sys.executable, os.path.join(HERE, "evaluate.py"), "--out", out, "--eval-bin", eval_tool, "--target", "target-fim",
                        "--draft-file", "model-fim.gguf",
                        "--editspec", editspec_bin(), "--threads", "1",
                        "--spec-prompts", str(e["spec_prompts"]), "--spec-gen", str(e["spec_gen"]),
                        "--max-edits", str(e["max_edits"]), "--spec-edits", str(e["spec_edits"]), "--jobs", str(a.jobs)],
                       check=True, env=env)
        st.mark("eval", k_eval)
    timed("eval", do_eval)

    def evaluate_part(name, key, flag):
        """a stage that runs one part of evaluate.py on the shipped target"""
        if st.done(name, key):
            return
        subprocess.run([sys.executable, os.path.join(HERE, "evaluate.py"), "--out", out, flag, "--target", "target-fim",
                        "--editspec", editspec_bin(), "--eval-bin", eval_tool, "--threads", str(max(1, a.jobs))],
                       check=True, env=env)
        st.mark(name, key)

    # fast apply on the held-out apply tasks (and CanItEdit's, where the dataset is found: evaluation only)
    k_apply_eval = key_of([k_fim, k_plain, k_applies, src_hash("evaluate.py")])
    timed("apply-eval", lambda: evaluate_part("apply-eval", k_apply_eval, "--apply-only"))
    # fill in the middle: next-line exact match on held-out files with and without the suffix
    k_fim_eval = key_of([k_fim, k_fim_data, src_hash("evaluate.py")])
    timed("fim-eval", lambda: evaluate_part("fim-eval", k_fim_eval, "--fim-only"))

    # model card
    def do_card():
        import card
        stages = recorded_timings(out, timings)
        card.card_write(out, a.preset, a.seed, stages, sum(stages.values()), a.set)
    timed("card", do_card)
    if a.ship:
        mdir = os.path.join(ROOT, "models")
        os.makedirs(mdir, exist_ok=True)
        shutil.copyfile(os.path.join(out, "target-fim", "model.gguf"), os.path.join(mdir, "editspec-target.gguf"))
        import card
        ship = card.shipped_draft(out)   # the better fine-tune in the whole EfficientEdit (the card says which)
        shutil.copyfile(os.path.join(out, ship, "model-fim.gguf"), os.path.join(mdir, "editspec-draft.gguf"))
        shutil.copyfile(os.path.join(out, "MODEL_CARD.md"), os.path.join(mdir, "MODEL_CARD.md"))
        log(f"ship: models/editspec-target.gguf, models/editspec-draft.gguf ({ship}), models/MODEL_CARD.md")
    log(f"run: done in {(time.time() - t_start) / 60:.1f} min; stage seconds {json.dumps(timings)}; results in {out}")


if __name__ == "__main__":
    main()
