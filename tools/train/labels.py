"""Stage `labels`: the target's own answers to training edits, the labels of the draft's fine-tunings.

EfficientEdit §III-B fine-tunes the draft on what the target writes, not on reference
answers: "we use LLM_target to generate c' from I and c", then masks every token of c' outside the
lines new against c. The draft drafts the target's edit content, so the target's habits (its copying
slips, its way of writing an edit) are what it has to predict.

    OUT/labels/edits-train.jsonl   the first N training edits that fit the context, `after` = the
                                   target's greedy answer (editspec-train-eval spec, speculation with
                                   the pre-trained draft: lossless, only faster), `reference` kept
    OUT/labels/*.npy, *.npz        tokenized by data.stage_tokenize as the reference data is, so the
                                   token kinds (same / new) come from the target's answer vs the original

The held-out edits keep their reference answers (evaluation compares against the target's outputs
itself where it matters). Deterministic: greedy decoding on one thread per shard.
"""
from __future__ import annotations

import json
import os
import shutil
import subprocess
import time

import numpy as np

import data

FILES_SHARED = ("corpus.json", "edits-heldout.jsonl", "tokenizer.gguf")


def _generate(eval_tool, target, draft, prompts, out_path, max_gen):
    cmd = [eval_tool, "spec", "-m", target, "-d", draft, "-p", prompts, "--gamma", "7", "--gen", str(max_gen),
           "--n-prompts", "0", "--threads", "1", "-o", out_path]
    return subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def stage_labels(out_dir: str, data_dir: str, eval_tool: str, tok_tool: str, target: str, draft: str,
                 n_edits: int, n_ctx: int, jobs: int, log=print) -> dict:
    """writes OUT/labels (see the module docstring); returns its statistics"""
    lab = os.path.join(out_dir, "labels")
    tmp = lab + ".tmp"
    shutil.rmtree(tmp, ignore_errors=True)
    os.makedirs(tmp)
    keep = np.load(os.path.join(data_dir, "edits-train.npz"))["rows"]
    rows = data.read_jsonl(os.path.join(data_dir, "edits-train.jsonl"))
    sel = [rows[i] for i in keep[:n_edits]]
    t0 = time.time()
    # shard i takes rows i, i + jobs, ...: one thread each
    procs = []
    for s in range(jobs):
        p = os.path.join(tmp, f"prompts-{s}.jsonl")
        data._write_jsonl(p, [{"text": data.edit_prompt_render(e["instruction"], e["before"])} for e in sel[s::jobs]])
        procs.append(_generate(eval_tool, target, draft, p, os.path.join(tmp, f"answers-{s}.jsonl"), n_ctx))
    shard_stats = []
    for s, pr in enumerate(procs):
        out, err = pr.communicate()
        if pr.returncode != 0:
            raise RuntimeError(f"labels: editspec-train-eval spec (shard {s}) failed:\n{err[-2000:]}")
        shard_stats.append(json.loads(out.strip().splitlines()[-1]))
    answers = [None] * len(sel)
    for s in range(jobs):
        for j, line in enumerate(open(os.path.join(tmp, f"answers-{s}.jsonl"))):
            answers[s + j * jobs] = json.loads(line)["text"]
    if any(a is None for a in answers):
        raise RuntimeError("labels: a shard returned fewer answers than prompts")
    secs = time.time() - t0
    labelled = [{**e, "reference": e["after"], "after": a} for e, a in zip(sel, answers)]
    data._write_jsonl(os.path.join(tmp, "edits-train.jsonl"), labelled)
    for f in FILES_SHARED:
        shutil.copyfile(os.path.join(data_dir, f), os.path.join(tmp, f))
    for s in range(jobs):
        os.remove(os.path.join(tmp, f"prompts-{s}.jsonl"))
    # the same tokenization and token kinds as the reference data
    tok = data.stage_tokenize(tmp, tok_tool, n_ctx, int(np.load(os.path.join(data_dir, "edits-heldout.npz"))["rows"].size),
                              log=log)
    same_as_ref = sum(a == e["after"] for a, e in zip(answers, sel))
    stats = {"edits": len(sel), "answers_equal_reference": same_as_ref, "generate_seconds": round(secs, 1),
             "tokens_generated": sum(x["n_gen"] for x in shard_stats), "shards": shard_stats,
             "edits_train": tok["edits_train"]}
    data._write_json(os.path.join(tmp, "labels-stats.json"), stats)
    shutil.rmtree(lab, ignore_errors=True)
    os.replace(tmp, lab)
    log(f"labels: {len(sel)} training edits answered by the target in {secs:.0f} s ({jobs} shards); "
        f"{same_as_ref} equal the reference answer")
    return stats
