"""Experiment (issue 59): does the fast-apply model need the whole file in its prompt?

    /usr/bin/python3 tools/train/experiments/apply_view.py --run RUN --view file|windows|none
        [--steps 600] [--init models/editspec-target.gguf] [--eval-only]

A cold apply reads the file twice, once as the prompt and once as the merged output that Reuse drafts
and the target verifies. Under the apply constraint the model only chooses, line by line, between the
file's next line and the snippet's; the prompt's view of the file (include/editspec/apply.h apply_view)
may be less than all of it:
  file     the whole file (today's prompt; the control arm: the same training, the same steps)
  windows  the file's lines within 3 lines of a line the snippet quotes (apply_windows)
  none     no file: the instruction and the snippet alone
Each arm continues the shipped target's training (--init, the FIM target) for --steps on the run's apply
data (RUN/apply-data: its 8,000 training tasks and the 3,000 edits mixed in), the apply tasks' prompts
rendered in the arm's view; the same steps, learning rate and batch seeds in every arm. Then each model
merges, constrained, greedy, in its view: the run's 200 held-out apply tasks and CanItEdit's apply tasks
that fit the training context with the whole file (the same items in every arm), through
`editspec bench --task apply --constrain --apply-view VIEW --prompt-layout instruction-first`.
--eval-only evaluates --init itself in the view (the untrained baseline).
Writes RUN/exp-view-<view>[-<steps>|-untrained]/ (data, the training, eval/, result.json). Nothing here ships.
RUN: a pipeline run of the shipped preset and seed with its `fim-data` stage (`run.py --preset full --seed 1
--until fim-data`: its tokenizer is the shipped target's).
"""
from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
TRAIN = os.path.dirname(HERE)
ROOT = os.path.dirname(os.path.dirname(TRAIN))
sys.path.insert(0, TRAIN)
import data  # noqa: E402

EDITSPEC = os.path.join(ROOT, "build", "bin", "editspec")
CANITEDIT = os.path.join(ROOT, "datasets", "canitedit", "normalized.jsonl")


def view_data(run: str, dd: str, view: str, log) -> None:
    """RUN/apply-data's examples with the apply prompts in `view`, tokenized with the FIM tokenizer"""
    if os.path.exists(os.path.join(dd, "done.json")):
        return
    tmp_dir = dd + ".tmp"
    shutil.rmtree(tmp_dir, ignore_errors=True)
    os.makedirs(tmp_dir)
    fd, ad = os.path.join(run, "fim-data"), os.path.join(run, "apply-data")
    for f in ("tokenizer.gguf", "code-train.npy", "code-heldout.npy", "corpus.json"):
        shutil.copyfile(os.path.join(fd, f), os.path.join(tmp_dir, f))
    vocab = os.path.join(tmp_dir, "tokenizer.gguf")
    sp = data.vocab_special(vocab)
    tool = os.path.join(ROOT, "build", "train", "bin", "editspec-train-tokenize")
    for split in ("train", "heldout"):
        rows = data.read_jsonl(os.path.join(ad, f"applies-{split}.jsonl"))
        prompts = [data.apply_prompt_render(r["instruction"], r["update"], r["before"], view) if "update" in r
                   else data.edit_prompt_render(r["instruction"], r["before"]) for r in rows]
        n_keep = -1 if split == "train" else len(np.load(os.path.join(ad, "edits-heldout.npz"))["rows"])
        st, msg = data.examples_tokenize(tool, vocab, sp, prompts, rows, 1024, n_keep,
                                         os.path.join(tmp_dir, f"edits-{split}"), os.path.join(tmp_dir, "tok.tmp.jsonl"),
                                         split=True)
        log(f"data: {view} {split}: {st['examples']} examples, {st['tokens']} tokens; {msg}")
    data._write_json(os.path.join(tmp_dir, "done.json"), {"view": view})
    shutil.rmtree(dd, ignore_errors=True)
    os.replace(tmp_dir, dd)


def fitting_canitedit(run: str, log) -> str:
    """CanItEdit's items that fit the shipped target's training context with the whole file in the prompt
    (the same items for every view): RUN/exp-view-canitedit.jsonl"""
    path = os.path.join(run, "exp-view-canitedit.jsonl")
    if os.path.exists(path):
        return path
    out = os.path.join(run, "exp-view-canitedit-fit")
    cmd = [EDITSPEC, "bench", "-m", os.path.join(ROOT, "models", "editspec-target.gguf"), "--dataset", CANITEDIT,
           "--task", "apply", "--fit-train-ctx", "--methods", "ar", "-n", "1", "--out", out]
    subprocess.run(cmd, check=True, capture_output=True)
    ids = {x["item"] for x in json.load(open(os.path.join(out, "results.json")))["items"]}
    rows = [r for r in data.read_jsonl(CANITEDIT) if r["id"] in ids]
    data._write_jsonl(path, rows)
    log(f"canitedit: {len(rows)} items fit with the whole file")
    return path


def merge_eval(model: str, dataset: str, view: str, out_dir: str, threads: int, log,
               layout: str = "instruction-first") -> dict:
    """constrained greedy merges in `view` by `auto` (equal to ar: tests/request/test-apply-constraint.cpp):
    exact matches and times"""
    cmd = [EDITSPEC, "bench", "-m", model, "--dataset", dataset, "--task", "apply", "--fit-train-ctx", "--constrain",
           "--apply-view", view, "--prompt-layout", layout, "--no-ar", "--methods", "auto", "-t", str(threads),
           "-n", "1024", "--out", out_dir]
    if not os.path.exists(os.path.join(out_dir, "results.json")):
        subprocess.run(cmd, check=True, capture_output=True)
    res = json.load(open(os.path.join(out_dir, "results.json")))
    auto = [x for x in res["items"] if x["method"] == "auto"]
    out = {"command": " ".join(cmd), "items": len(auto),
           "exact": res["methods"]["auto"]["exact"], "checked": res["methods"]["auto"]["checked"],
           "prompt_tokens": sum(x.get("prompt_tokens", 0) for x in auto),
           "prompt_ms": round(sum(x.get("prompt_ms", 0.0) for x in auto)), "gen_ms": round(sum(x["gen_ms"] for x in auto)),
           "passes": sum(x["target_passes"] for x in auto), "tokens": sum(x["tokens"] for x in auto),
           "wrong": sorted(x["item"] for x in auto if not x.get("exact"))}
    log(f"eval: {os.path.basename(dataset)} {view}: {out['exact']}/{out['checked']} exact, "
        f"{out['passes']} passes, prompt {out['prompt_tokens']} tokens")
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--run", required=True, help="a pipeline run with apply-data/ and fim-data/")
    ap.add_argument("--view", required=True, choices=["file", "windows", "none"])
    ap.add_argument("--steps", type=int, default=600)
    ap.add_argument("--init", default=os.path.join(ROOT, "models", "editspec-target.gguf"))
    ap.add_argument("--eval-only", action="store_true", help="evaluate --init in the view, no training")
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--layout", default="instruction-first",
                    help="the prompt layout of the evaluation (auto: today's apply prompt, the file first)")
    ap.add_argument("--tag", default="", help="the output folder's suffix (default: the steps, or 'untrained')")
    a = ap.parse_args()
    log = lambda s: print(s, flush=True)  # noqa: E731
    import run as pipeline
    env = pipeline.env_for_scripts()
    run = os.path.abspath(a.run)
    out = os.path.join(run, f"exp-view-{a.view}-" + (a.tag or ("untrained" if a.eval_only else str(a.steps))))
    os.makedirs(out, exist_ok=True)
    model = os.path.abspath(a.init)
    res = {"view": a.view, "init": model}
    if not a.eval_only:
        dd = os.path.join(run, f"exp-view-data-{a.view}")
        view_data(run, dd, a.view, log)
        spec = pipeline.train_spec(f"target-view-{a.view}", out, dd, 4101, "full", "apply", init=model,
                                   weights=pipeline.WEIGHTS_PRETRAIN)   # as the apply fine-tune
        spec["model"]["n_vocab"] = data.vocab_special(os.path.join(dd, "tokenizer.gguf"))["n_vocab"]
        spec.update({"steps": a.steps, "lr": 3e-4, "warmup": 30, "threads": a.threads, "eval_every": 200,
                     "ckpt_every": 100, "out": os.path.join(out, "train")})
        os.makedirs(spec["out"], exist_ok=True)
        sp = os.path.join(out, "spec.json")
        json.dump(spec, open(sp, "w"), indent=1)
        if not os.path.exists(os.path.join(spec["out"], "done.json")):
            subprocess.run([sys.executable, os.path.join(TRAIN, "train.py"), sp], check=True, env=env)
        model = os.path.join(spec["out"], "model.gguf")
        res["train"] = json.load(open(os.path.join(spec["out"], "done.json")))
    heldout = os.path.join(run, "apply-data", "applies-heldout-bench.jsonl")
    res["layout"] = a.layout
    res["heldout"] = merge_eval(model, heldout, a.view, os.path.join(out, "eval-heldout"), a.threads, log, a.layout)
    res["canitedit"] = merge_eval(model, fitting_canitedit(run, log), a.view, os.path.join(out, "eval-canitedit"),
                                  a.threads, log, a.layout)
    data._write_json(os.path.join(out, "result.json"), res)
    log(json.dumps({"view": a.view, "steps": 0 if a.eval_only else a.steps,
                    "heldout": f"{res['heldout']['exact']}/{res['heldout']['checked']}",
                    "canitedit": f"{res['canitedit']['exact']}/{res['canitedit']['checked']}"}))


if __name__ == "__main__":
    main()
