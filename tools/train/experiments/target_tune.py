"""Experiment (fifth session): short fine-tunings of a pipeline run's target on its edits, and their greedy
edits. None of them ships; tools/train/README.md has the figures.

    python3 tools/train/experiments/target_tune.py --run build/train-v4 --variant balanced [--steps 400]

variants (400 steps, lr 3e-4 -> 3e-5, two threads, from RUN/target/ckpt.pt):
  new3      the run's own edit mix, new-line tokens weighted x3
  balanced  every edit kind equally often, with inverse edits added (rename back, add <-> remove a parameter,
            loop <-> comprehension)
  decision  balanced, and the decision token (the first answer token that differs from copying the original)
            weighted x5: it is marked `new` and the rest of the answer `same`, so train.py needs no new kind

Writes RUN/exp-<variant>/ (data, the training, result.json): exact edits and unchanged lines through
`editspec edit` on the 200 held-out edits, and teacher-forced accuracies (evaluate.teacher_forced).
"""
from __future__ import annotations

import argparse
import ast
import json
import os
import random
import re
import shutil
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
TRAIN = os.path.dirname(HERE)
ROOT = os.path.dirname(os.path.dirname(TRAIN))
sys.path.insert(0, TRAIN)
import data  # noqa: E402
import edits  # noqa: E402
import evaluate  # noqa: E402


def _swap(instr, a, b):
    return instr.replace(f"`{a}`", "\0").replace(f"`{b}`", f"`{a}`").replace("\0", f"`{b}`")


def _params(code):
    for n in ast.walk(ast.parse(code)):
        if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef)):
            return [a.arg for a in n.args.args]
    return []


def inverse(e, rng):
    """the edit that undoes `e`, as an edit of a held-out kind, or None"""
    k, ins, fname = e["kind"], e["instruction"], e["qualname"].split(".")[-1]
    t = re.findall(r"`([^`]+)`", ins)
    inv = dict(e, before=e["after"], after=e["before"])
    if k == "rename_function" and len(t) >= 2:
        inv["instruction"] = _swap(ins, t[0], t[1])
    elif k == "rename_variable":
        o = [x for x in t if x != fname]
        if len(o) != 2:
            return None
        inv["instruction"] = _swap(ins, o[0], o[1])
    elif k == "add_parameter":
        new = [p for p in _params(e["after"]) if p not in _params(e["before"])]
        if len(new) != 1:
            return None
        inv["kind"] = "remove_parameter"
        inv["instruction"] = rng.choice([f"Remove the unused parameter `{new[0]}` from `{fname}`.",
                                         f"`{new[0]}` is never used in `{fname}`: remove it from the signature.",
                                         f"Delete the parameter `{new[0]}` of `{fname}`."])
    elif k == "loop_to_comprehension":
        inv["kind"] = "comprehension_to_loop"
        inv["instruction"] = rng.choice([f"Rewrite the list comprehension assigned to `{t[0]}` as a for loop.",
                                         f"Expand the comprehension that builds `{t[0]}` into an explicit loop with append."])
    elif k == "comprehension_to_loop":
        inv["kind"] = "loop_to_comprehension"
        inv["instruction"] = rng.choice([f"Convert the loop that builds `{t[0]}` into a list comprehension.",
                                         f"Replace the for loop appending to `{t[0]}` with a list comprehension."])
    else:
        return None
    return inv


def balanced_data(src, dst, tok_tool, n_per_kind, log):
    os.makedirs(dst, exist_ok=True)
    for f in ("tokenizer.gguf", "corpus.json", "edits-heldout.jsonl"):
        shutil.copy(os.path.join(src, f), dst)
    rng = random.Random("tune:1")
    pool = {k: [] for k in edits.EDIT_KINDS}
    for e in data.read_jsonl(os.path.join(src, "edits-train.jsonl")):
        pool[e["kind"]].append(e)
        i = inverse(e, rng)
        if i is not None:
            pool[i["kind"]].append(i)
    log("pool by kind (with inverses): " + json.dumps({k: len(v) for k, v in pool.items()}))
    out = []
    for k in edits.EDIT_KINDS:
        rng.shuffle(pool[k])
        out.extend(pool[k][i % len(pool[k])] for i in range(n_per_kind))   # rare kinds repeat
    rng.shuffle(out)
    data._write_jsonl(os.path.join(dst, "edits-train.jsonl"), out)
    data.stage_tokenize(dst, tok_tool, 512, 200, log=log)


def mark_decisions(dd, tok_tool):
    """decision token -> `new`, the rest of every answer -> `same` (training split)"""
    import numpy as np
    z = dict(np.load(os.path.join(dd, "edits-train.npz")))
    kinds = z["kinds"].copy()
    kinds[kinds == data.KIND_NEW] = data.KIND_SAME
    for i, (d, _) in enumerate(evaluate.decision_points(tok_tool, dd, "train")):
        if d >= 0:
            kinds[z["offsets"][i] + d] = data.KIND_NEW
    z["kinds"] = kinds
    np.savez(os.path.join(dd, "edits-train.npz"), **z)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--run", required=True, help="a pipeline run's folder (with target/ckpt.pt and data/)")
    ap.add_argument("--variant", required=True, choices=["new3", "balanced", "decision"])
    ap.add_argument("--steps", type=int, default=400)
    a = ap.parse_args()
    log = lambda s: print(s, flush=True)  # noqa: E731
    import run as pipeline
    env = pipeline.env_for_scripts()
    run = os.path.abspath(a.run)
    out = os.path.join(run, f"exp-{a.variant}")
    tok_tool = os.path.join(ROOT, "build", "train", "bin", "editspec-train-tokenize")
    dd = os.path.join(run, "data")
    weights = {"prompt": 0.0, "same": 1.0, "new": 1.0, "eos": 1.0, "code": 1.0}
    if a.variant == "new3":
        weights["new"] = 3.0
    else:
        dd = os.path.join(out, "data")
        balanced_data(os.path.join(run, "data"), dd, tok_tool, 2000, log)
        if a.variant == "decision":
            mark_decisions(dd, tok_tool)
            weights["new"] = 5.0
    spec = json.load(open(os.path.join(run, "target", "spec.json")))
    spec.pop("threads_more", None)
    spec.update({"name": f"target-{a.variant}", "out": os.path.join(out, "train"), "data": dd, "seed": 3001,
                 "init": os.path.join(run, "target", "ckpt.pt"), "steps": a.steps, "lr": 3e-4, "warmup": 20, "p_edit": 0.9,
                 "copy_warmup": 0, "threads": 2, "eval_every": 200, "ckpt_every": 200, "weights": weights})
    os.makedirs(spec["out"], exist_ok=True)
    sp = os.path.join(out, "spec.json")
    json.dump(spec, open(sp, "w"), indent=1)
    subprocess.run([sys.executable, os.path.join(TRAIN, "train.py"), sp], check=True, env=env)
    import numpy as np
    hd = os.path.join(run, "data")
    keep = np.load(os.path.join(hd, "edits-heldout.npz"))["rows"]
    rows = [data.read_jsonl(os.path.join(hd, "edits-heldout.jsonl"))[i] for i in keep][:200]
    outs = evaluate.edits_via_editspec(os.path.join(ROOT, "build", "bin", "editspec"), os.path.join(spec["out"], "model.gguf"),
                                       rows, 2, out, log)
    res = {"edits": evaluate.edit_scores(rows, outs),
           "teacher_forced": evaluate.teacher_forced(os.path.join(spec["out"], "ckpt.pt"), hd, 512,
                                                     evaluate.decision_points(tok_tool, hd))}
    data._write_json(os.path.join(out, "result.json"), res)
    log(json.dumps(res))


if __name__ == "__main__":
    main()
