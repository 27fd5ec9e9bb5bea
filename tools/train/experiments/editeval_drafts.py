"""Edit-oriented vs plain draft on real instruction-driven edits: EditEval (InstructCoder's authors, the
paper's training-data family; evaluation only, never trained on), the items whose prompt and reference
answer fit the models' training context.

    /usr/bin/python3 tools/train/experiments/editeval_drafts.py --run build/train-v7 [--n-ctx 512]
        [--methods reuse+sd@16,efficientedit@16] [--drafts draft,draft-plain,draft-edit]

For each draft and method: `editspec edit --json` on every item, greedy; prints draft-model nodes verified
and accepted, target passes, tokens per target pass, and per item which draft needed fewer passes.
Writes RUN/eval/editeval.json.
"""
from __future__ import annotations

import argparse
import json
import os
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
import data  # noqa: E402
import evaluate  # noqa: E402

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", "..", ".."))
EDITEVAL = os.path.join(ROOT, "..", "shared", "datasets", "editeval", "edit_eval.jsonl")


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--run", required=True, help="a pipeline run folder (OUT of run.py)")
    ap.add_argument("--n-ctx", type=int, default=512, help="keep items whose prompt + reference fit this many tokens")
    ap.add_argument("--methods", default="reuse+sd@16,efficientedit@16")
    ap.add_argument("--drafts", default="draft,draft-plain,draft-edit")
    ap.add_argument("--editspec", default=os.path.join(ROOT, "build", "bin", "editspec"))
    ap.add_argument("--tokenize", default=os.path.join(ROOT, "build", "train", "bin", "editspec-train-tokenize"))
    ap.add_argument("--threads", type=int, default=1)
    a = ap.parse_args()

    items = [json.loads(l) for l in open(EDITEVAL)]
    rows = [{"id": it["task_id"], "instruction": it["instruction"].strip(), "before": it["input"], "after": it["output"]}
            for it in items if it["input"].strip()]
    vocab = os.path.join(a.run, "data", "tokenizer.gguf")
    ev_dir = os.path.join(a.run, "eval")
    texts = [data.edit_prompt_render(r["instruction"], r["before"]) + r["after"] for r in rows]
    docs, _ = data._tokenize(a.tokenize, vocab, texts, os.path.join(ev_dir, "editeval-tok.jsonl"),
                             os.path.join(ev_dir, "editeval-tok.bin"))
    os.remove(os.path.join(ev_dir, "editeval-tok.bin"))
    keep = [r for r, (t, _) in zip(rows, docs) if len(t) + 2 <= a.n_ctx]   # + BOS, EOS
    print(f"EditEval: {len(items)} items, {len(rows)} with code, {len(keep)} fit {a.n_ctx} tokens", flush=True)

    target = os.path.join(a.run, "target", "model.gguf")
    res = {"n": len(keep), "n_ctx": a.n_ctx, "ids": [r["id"] for r in keep]}
    for m in a.methods.split(","):
        res[m] = {}
        for d in a.drafts.split(","):
            t = time.time()
            g = evaluate.generate_phase_via_editspec(a.editspec, target, os.path.join(a.run, d, "model.gguf"), keep,
                                                     a.threads, ev_dir, lambda s: None, method=m)
            outs = g.pop("outs")
            g["exact"] = sum(o == r["after"] for o, r in zip(outs, keep)) / len(keep)
            res[m][d] = g
            print(f"{m:18s} {d:12s} nodes {g['model_drafted']:5d} accepted {g['model_accepted']:5d} "
                  f"({g['model_acceptance']:.1%}) passes {g['target_passes']:5d} tokens {g['tokens']:6d} "
                  f"tokens/pass {g['tokens_per_pass']:.3f} exact {g['exact']:.1%} ({time.time() - t:.0f} s)", flush=True)
        if "draft-plain" in res[m] and "draft-edit" in res[m]:
            p = evaluate.paired(res[m]["draft-plain"]["passes_each"], res[m]["draft-edit"]["passes_each"])
            res[m]["paired_edit_vs_plain"] = p
            print(f"{m}: draft-edit vs draft-plain, target passes per item: fewer {p['fewer']}, more {p['more']}, "
                  f"equal {p['equal']}", flush=True)
    with open(os.path.join(ev_dir, "editeval.json"), "w") as fh:
        json.dump(res, fh, indent=1)


if __name__ == "__main__":
    main()
