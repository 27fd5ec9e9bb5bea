"""Experiment (thirteenth session, issue 21): does the fast-apply model copy exactly with more apply
training, and more so when half of the training tasks have their names and numbers scrambled?

    /usr/bin/python3 tools/train/experiments/apply_more.py --run build/train-s12 --arm more|scrambled
        [--steps 1200] [--threads 1]

Both arms continue the run's apply fine-tuning (from RUN/target-apply/model.gguf) for the same steps,
learning rate and batch seeds; they differ only in the training tasks:
  more       the run's own apply data (RUN/apply-data: the same 8,000 tasks and 3,000 edits)
  scrambled  the same tasks, half of them with about half of their names and numbers replaced, the same
             way in the file, the snippet and the merged file, by random ones (applies.scramble)
Then `editspec bench --task apply --methods ar` (greedy) on the run's 200 held-out apply tasks.
Writes RUN/exp-apply-<arm>/ (data, the training, result.json). Nothing here ships.
"""
from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
TRAIN = os.path.dirname(HERE)
ROOT = os.path.dirname(os.path.dirname(TRAIN))
sys.path.insert(0, TRAIN)
import data  # noqa: E402
import evaluate  # noqa: E402


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--run", required=True, help="a full pipeline run's folder (with target-apply/ and apply-data/)")
    ap.add_argument("--arm", required=True, choices=["more", "scrambled"])
    ap.add_argument("--steps", type=int, default=1200)
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--eval-threads", type=int, default=2)
    a = ap.parse_args()
    log = lambda s: print(s, flush=True)  # noqa: E731
    import run as pipeline
    env = pipeline.env_for_scripts()
    run = os.path.abspath(a.run)
    out = os.path.join(run, f"exp-apply-{a.arm}")
    os.makedirs(out, exist_ok=True)
    base = json.load(open(os.path.join(run, "target-apply", "spec.json")))
    dd = os.path.join(run, "apply-data")
    if a.arm == "scrambled":
        dd = os.path.join(out, "data")
        if not os.path.exists(os.path.join(dd, "applies-stats.json")):
            st = json.load(open(os.path.join(run, "apply-data", "applies-stats.json")))
            pa = pipeline.PRESETS["full"]["apply"]
            tok_tool = os.path.join(ROOT, "build", "train", "bin", "editspec-train-tokenize")
            data.stage_applies(os.path.join(run, "data"), dd, tok_tool, base["seed"] - 3000, st["n_ctx"], pa["tasks_train"],
                               pa["tasks_heldout"], st["max_chars"], pa["edits_mix"], log=log, scrambled=0.5)
    spec = dict(base)
    spec.pop("threads_more", None)
    spec.update({"name": f"target-apply-{a.arm}", "out": os.path.join(out, "train"), "data": dd, "seed": 4001,
                 "init": os.path.join(run, "target-apply", "model.gguf"), "steps": a.steps, "lr": 3e-4, "warmup": 30,
                 "threads": a.threads, "eval_every": 400, "ckpt_every": 200})
    os.makedirs(spec["out"], exist_ok=True)
    sp = os.path.join(out, "spec.json")
    json.dump(spec, open(sp, "w"), indent=1)
    if not os.path.exists(os.path.join(spec["out"], "done.json")):
        subprocess.run([sys.executable, os.path.join(TRAIN, "train.py"), sp], check=True, env=env)
    res = evaluate.apply_bench(os.path.join(ROOT, "build", "bin", "editspec"), os.path.join(spec["out"], "model.gguf"),
                               os.path.join(run, "apply-data", "applies-heldout-bench.jsonl"), os.path.join(out, "eval"),
                               a.eval_threads, log, methods=["ar"])
    res["train"] = json.load(open(os.path.join(spec["out"], "done.json")))
    data._write_json(os.path.join(out, "result.json"), res)
    log(json.dumps({"arm": a.arm, "exact": res["ar"]["exact_match"], "unchanged": res["ar"].get("unchanged_lines_reproduced")}))


if __name__ == "__main__":
    main()
