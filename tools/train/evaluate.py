"""Held-out evaluation of the trained models, through stock llama.cpp (editspec-train-eval) and editspec.

    python3 tools/train/evaluate.py --out OUT [--eval-bin build/train/bin/editspec-train-eval]
                                    [--editspec build/bin/editspec] [--threads 1]

Reads OUT/data (held-out code and edits), OUT/target/model.gguf, OUT/draft-plain/model.gguf,
OUT/draft-edit/model.gguf (and OUT/draft/model.gguf, the draft before fine-tuning) and writes
OUT/eval/summary.json with:

  code_acc.{target,draft,...}   greedy next-token accuracy on the held-out files (all of them), llama.cpp
  spec_code.{draft-edit,...}    greedy draft-model speculation (gamma 7) against the target on held-out
                                code: tokens per target pass (accepted + 1) and accepted per pass
  edits.target                  200 held-out synthetic edits, greedy: exact match, unchanged lines reproduced
  edits.editspec                the same through `editspec edit` (when the binary has the subcommand)
  spec_edit.{draft-plain,draft-edit}  draft-model speculation on the held-out edits (the target's answers)
  generate_phase.{draft,draft-plain,draft-edit}  `editspec edit --method reuse+sd@16` (EfficientEdit, greedy): draft acceptance
  efficientedit.{draft,draft-plain,draft-edit}   `--method efficientedit@16` (entropy-aware, lossy): speed and quality
  paired.{generate_phase,efficientedit}  per edit, does draft-edit need fewer target passes than draft-plain
  edit_tf.{...}                 teacher-forced on the held-out edits (torch): accuracy on new-line and copied tokens,
                                and at the decision token (the first answer token that differs from copying the original)

The EfficientEdit runs cap the draft at 16 nodes per pass (`@16`) instead of sizing it by the measured cost
of a target pass: the figures then depend on the models only, not on how busy the machine was when editspec
measured its cost curve.
"""
from __future__ import annotations

import argparse
import difflib
import json
import os
import subprocess
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import data  # noqa: E402
import edits  # noqa: E402


def run_json(cmd, log):
    t = time.time()
    r = subprocess.run(cmd, capture_output=True, text=True)
    if r.returncode != 0:
        raise RuntimeError(f"{' '.join(cmd)} failed:\n{r.stderr[-2000:]}")
    log(f"eval: {os.path.basename(cmd[0])} {cmd[1]} {os.path.basename(cmd[3])}: {time.time() - t:.0f} s")
    return json.loads(r.stdout.strip().splitlines()[-1])


def lines_unchanged_reproduced(before: str, after: str, got: str) -> tuple[int, int]:
    """(reference lines that are not new and that `got` reproduces in order, reference lines that are not new)"""
    ref = after.splitlines(keepends=True)
    new = set(edits.lines_new(before, after))
    same_idx = [i for i in range(len(ref)) if i not in new]
    sm = difflib.SequenceMatcher(a=got.splitlines(keepends=True), b=ref, autojunk=False)
    matched = set()
    for blk in sm.get_matching_blocks():
        matched.update(range(blk.b, blk.b + blk.size))
    return sum(1 for i in same_idx if i in matched), len(same_idx)


def edit_scores(rows, outs) -> dict:
    exact = rep = tot = 0
    by_kind = {}
    for e, o in zip(rows, outs):
        ok = o == e["after"]
        exact += ok
        r, t = lines_unchanged_reproduced(e["before"], e["after"], o)
        rep += r
        tot += t
        k = by_kind.setdefault(e["kind"], [0, 0])
        k[0] += ok
        k[1] += 1
    return {"n": len(rows), "exact_match": exact / max(1, len(rows)), "unchanged_lines_reproduced": rep / max(1, tot),
            "exact_by_kind": {k: f"{v[0]}/{v[1]}" for k, v in sorted(by_kind.items())}}


def apply_bench(editspec, target, dataset, out_dir, threads, log,
                methods=("ar", "reuse", "reuse+lookup-longest"), constrain=False) -> dict:
    """`editspec bench --task apply` on a CanItEdit-shaped file (the items that fit the target's training
    context), free or constrained (`--constrain`): per method exact match, speed over ar and tokens per
    pass; ar's outputs scored by edit_scores (exact, unchanged lines reproduced, by kind)"""
    methods = list(methods)
    t = time.time()
    cmd = [editspec, "bench", "-m", target, "--dataset", dataset, "--task", "apply", "--fit-train-ctx", "--methods",
           ",".join(methods), "-t", str(threads), "-n", "1024"] + (["--constrain"] if constrain else []) + ["--out", out_dir]
    r = subprocess.run(cmd, capture_output=True, text=True)
    if r.returncode != 0:
        raise RuntimeError(f"{' '.join(cmd)} failed:\n{r.stderr[-2000:]}")
    res = json.load(open(os.path.join(out_dir, "results.json")))
    items = {x["id"]: x for x in data.read_jsonl(dataset)}
    ar = [x for x in res["items"] if x["method"] == "ar"]
    rows = [{"before": items[x["item"]]["code_before"], "after": items[x["item"]]["code_after"],
             "kind": items[x["item"]].get("change_kind", "")} for x in ar]
    out = {"command": " ".join(cmd), "items_in": res["items_in"], "items_fit": len(ar), "seconds": round(time.time() - t, 1),
           "ar": edit_scores(rows, [x["code"] for x in ar]), "methods": {}}
    for m in methods:
        s = res["methods"][m]
        out["methods"][m] = {"exact": s["exact"], "checked": s["checked"], "speedup_vs_ar": s["speedup_vs_ar"],
                             "tokens_per_pass": s["mean_accepted_per_pass"], "tokens_per_s": s["tokens_per_s"],
                             "identical_to_ar": s["identical_to_ar"]}
    log(f"eval: apply {os.path.basename(dataset)}{' constrained' if constrain else ''}: {out['ar']['exact_match']:.3f} exact of {len(ar)} (of {res['items_in']}), "
        f"{methods[-1]} {out['methods'][methods[-1]]['speedup_vs_ar']:.2f}x, {time.time() - t:.0f} s")
    return out


def apply_eval(a, out, log):
    """OUT/eval/apply.json: the held-out apply tasks, and CanItEdit's (evaluation only) where it is found"""
    ev_dir = os.path.join(out, "eval")
    os.makedirs(ev_dir, exist_ok=True)
    target = os.path.join(out, a.target, "model.gguf")
    cie = os.path.join(os.environ.get("EDITSPEC_DATASETS", os.path.join(ROOT, "datasets")), "canitedit",
                       "normalized.jsonl")
    sets = [("heldout", os.path.join(out, "apply-data", "applies-heldout-bench.jsonl"))] + ([("canitedit", cie)] if os.path.exists(cie) else [])
    res = {"target": target}
    for name, dataset in sets:
        for constrain in (False, True):
            key = name + ("-constrained" if constrain else "")
            res[key] = apply_bench(a.editspec, target, dataset, os.path.join(ev_dir, "apply-" + key), a.threads, log, constrain=constrain)
    data._write_json(os.path.join(ev_dir, "apply.json"), res)


def _post(port: int, path: str, body: dict) -> dict:
    import urllib.request
    rq = urllib.request.Request(f"http://127.0.0.1:{port}{path}", data=json.dumps(body).encode(),
                                headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(rq, timeout=300) as r:
        return json.loads(r.read())


def fim_eval(a, out, log):
    """OUT/eval/fim.json: next-line exact match on the held-out positions of fim-data (fim.next_line_tasks)
    through `editspec serve`: /infill with llama.vim's fields (input_prefix, input_suffix, prompt) and
    the suffix, the same with an empty suffix (an editor at the end of a file), and /completion of the
    prefix alone; greedy, the first line of the answer against the file's line"""
    import socket
    target = os.path.join(out, a.target, "model.gguf")
    tasks = data.read_jsonl(os.path.join(out, "fim-data", "nextline-heldout.jsonl"))
    with socket.socket() as sk:
        sk.bind(("127.0.0.1", 0))
        port = sk.getsockname()[1]
    ev_dir = os.path.join(out, "eval")
    os.makedirs(ev_dir, exist_ok=True)
    cmd = [a.editspec, "serve", "-m", target, "--port", str(port), "-t", str(a.threads), "--max-tokens", "64"]
    logf = open(os.path.join(ev_dir, "fim-serve.log"), "w")
    srv = subprocess.Popen(cmd, stdout=logf, stderr=subprocess.STDOUT)
    t = time.time()
    try:
        for _ in range(600):
            try:
                import urllib.request
                urllib.request.urlopen(f"http://127.0.0.1:{port}/health", timeout=5)
                break
            except OSError:
                if srv.poll() is not None:
                    raise RuntimeError(f"{' '.join(cmd)} exited ({srv.returncode}); see {logf.name}")
                time.sleep(0.5)
        greedy = {"n_predict": 48, "temperature": 0, "stop": ["\n"], "cache_prompt": True}
        variants = {
            "infill_suffix": lambda x: ("/infill", {"input_prefix": x["prefix"], "input_suffix": x["suffix"], "prompt": "", **greedy}),
            "infill_no_suffix": lambda x: ("/infill", {"input_prefix": x["prefix"], "input_suffix": "", "prompt": "", **greedy}),
            # the prefix without its last newline: a prompt ending in a bare "\n" token cuts where the
            # tokenizer joins a newline with the next line's indentation, so the model would not continue it
            "completion_prefix": lambda x: ("/completion", {"prompt": x["prefix"][:-1], **greedy, "stop": [], "n_predict": 64}),
        }
        res = {"target": target, "positions": len(tasks), "command": " ".join(cmd), "variants": {}}
        outs = {}
        for name, make in variants.items():
            got = []
            for x in tasks:
                path, body = make(x)
                text = _post(port, path, body).get("content", "")
                # the completion's first line is the rest of the prefix's last line (empty, the newline)
                got.append(text.split("\n")[1] if name == "completion_prefix" and "\n" in text else text.split("\n")[0])
            outs[name] = got
            n = sum(g == x["line"] for g, x in zip(got, tasks))
            res["variants"][name] = {"exact": n, "exact_rate": round(n / max(1, len(tasks)), 4)}
            log(f"eval: fim next line, {name}: {n}/{len(tasks)} exact")
        both = outs["infill_suffix"], outs["completion_prefix"]
        res["suffix_only_right"] = sum(g == x["line"] != h for g, h, x in zip(*both, tasks))
        res["prefix_only_right"] = sum(h == x["line"] != g for g, h, x in zip(*both, tasks))
        res["seconds"] = round(time.time() - t, 1)
    finally:
        srv.terminate()
        srv.wait()
    data._write_jsonl(os.path.join(ev_dir, "fim-outputs.jsonl"),
                      [{"path": x["path"], "line": x["line"], **{k: v[i] for k, v in outs.items()}} for i, x in enumerate(tasks)])
    data._write_json(os.path.join(ev_dir, "fim.json"), res)


EE_CAP = 16   # draft nodes per pass in the EfficientEdit runs: fixed, so no measured cost curve enters the figures


def editspec_has_edit(editspec: str) -> bool:
    if not editspec or not os.path.exists(editspec):
        return False
    r = subprocess.run([editspec, "edit", "--help"], capture_output=True, text=True)
    return r.returncode == 0


# the layout the models are trained on (data.edit_prompt_render); `editspec edit` puts the file first by
# default (0b7c398), which the shipped target edits with at about half its exact rate
LAYOUT = ["--prompt-layout", "instruction-first"]


def edit_result(r, what: str, row_id: str) -> dict:
    """`editspec edit --json`'s answer. An answer the model did not finish within the edit's -n (a model
    early in training runs on) is not an error of the run: editspec exits 1 and prints its statistics
    with "complete": false and no code (issue 69: never a truncated file), which counts as a wrong edit"""
    if r.returncode == 0 or r.returncode == 1:
        try:
            j = json.loads(r.stdout)
        except ValueError:
            j = None
        if isinstance(j, dict) and (r.returncode == 0 or j.get("complete") is False):
            return j
    raise RuntimeError(f"{what} failed on {row_id}: {r.stderr[-1000:]}")


def edits_via_editspec(editspec, model, rows, threads, tmpdir, log):
    outs = []
    t = time.time()
    for i, e in enumerate(rows):
        f = os.path.join(tmpdir, "before.py")
        with open(f, "w") as fh:
            fh.write(e["before"])
        r = subprocess.run([editspec, "edit", "-m", model, "-f", f, "-i", e["instruction"], "-t", str(threads), "--json"] + LAYOUT,
                           capture_output=True, text=True)
        j = edit_result(r, "editspec edit", e["id"])
        outs.append(j.get("code", j.get("text", "")))
        if (i + 1) % 50 == 0:
            log(f"eval: editspec edit {i + 1}/{len(rows)} ({time.time() - t:.0f} s)")
    return outs


def generate_phase_via_editspec(editspec, target, draft, rows, threads, tmpdir, log, method="reuse+sd") -> dict:
    """EfficientEdit's setting (EfficientEdit §III): `editspec edit --method reuse+sd`, greedy. Reuse drafts
    the unchanged code; the draft model drafts only after a rejection, i.e. the edit's new content.
    Counts the draft model's nodes the target verified and accepted, and target passes. With
    method "efficientedit" the draft model's tokens are verified entropy-aware (lossy), as in the
    paper's comparison of its loss with plain fine-tuning (Table II); `outs` holds the edited code."""
    drafted = accepted = passes = tokens = 0
    outs, passes_each = [], []
    t = time.time()
    f = os.path.join(tmpdir, f"gen-{os.path.basename(os.path.dirname(draft))}-{method}.py")
    for i, e in enumerate(rows):
        with open(f, "w") as fh:
            fh.write(e["before"])
        r = subprocess.run([editspec, "edit", "-m", target, "--draft-model", draft, "--method", method, "-f", f,
                            "-i", e["instruction"], "-t", str(threads), "--json"] + LAYOUT, capture_output=True, text=True)
        j = edit_result(r, f"editspec edit --method {method}", e["id"])
        m = j.get("by_source", {}).get("model", {})
        drafted += m.get("drafted", 0)
        accepted += m.get("accepted", 0)
        passes += j.get("target_passes", 0)
        passes_each.append(j.get("target_passes", 0))
        tokens += j.get("tokens", 0)
        outs.append(j.get("code", j.get("text", "")))
    log(f"eval: {method} with {draft}: {len(rows)} edits ({time.time() - t:.0f} s)")
    return {"n": len(rows), "method": method, "model_drafted": drafted, "model_accepted": accepted,
            "model_acceptance": accepted / drafted if drafted else 0.0,
            "target_passes": passes, "tokens": tokens, "tokens_per_pass": tokens / passes if passes else 0.0, "outs": outs,
            "passes_each": passes_each}


def paired(a: list, b: list) -> dict:
    """per edit: on how many does `b` need fewer target passes than `a`, more, as many"""
    return {"fewer": sum(y < x for x, y in zip(a, b)), "more": sum(y > x for x, y in zip(a, b)),
            "equal": sum(y == x for x, y in zip(a, b))}


def decision_points(tok_tool: str, data_dir: str, split: str = "heldout") -> list:
    """per edit example of edits-SPLIT.npz, (index in its token row of the decision token: the first answer
    token that differs from copying the original code, the original's token there); (-1, -1) when the
    answer copies the original to its end"""
    import numpy as np
    z = np.load(os.path.join(data_dir, f"edits-{split}.npz"))
    tok, kinds, off, keep = z["tokens"], z["kinds"], z["offsets"], z["rows"]
    rows = data.read_jsonl(os.path.join(data_dir, f"edits-{split}.jsonl"))
    tmp = os.path.join(data_dir, f"decision-{split}.tmp")
    docs, _ = data._tokenize(tok_tool, os.path.join(data_dir, "tokenizer.gguf"), [rows[i]["before"] for i in keep],
                             tmp + ".jsonl", tmp + ".bin")
    os.remove(tmp + ".bin")
    out = []
    for i in range(len(off) - 1):
        k = kinds[off[i]:off[i + 1]]
        a0 = int((k != data.KIND_PROMPT).argmax())   # the answer's first token
        ans, orig = tok[off[i] + a0:off[i + 1]], docs[i][0]
        j = 0
        while j < min(len(ans), len(orig)) and ans[j] == orig[j]:
            j += 1
        out.append((a0 + j, int(orig[j]) if j < len(orig) else -1) if j < len(ans) else (-1, -1))
    return out


def teacher_forced(ckpt_path, data_dir, n_ctx, dec) -> dict:
    import numpy as np
    import torch
    from model import llama, model_config
    torch.set_num_threads(1)
    ck = torch.load(ckpt_path, map_location="cpu")
    net = llama(model_config(**ck["config"]))
    net.load_state_dict(ck["model"])
    net.eval()
    z = np.load(os.path.join(data_dir, "edits-heldout.npz"))
    tok, kinds, off = z["tokens"].astype(np.int64), z["kinds"], z["offsets"]
    c = {"new": [0, 0], "same": [0, 0]}
    n_dec = dec_ok = dec_copy = 0
    with torch.no_grad():
        for i in range(len(off) - 1):
            x = torch.from_numpy(tok[off[i]:off[i + 1]])[None]
            k = kinds[off[i] + 1:off[i + 1]]
            with torch.autocast("cpu", dtype=torch.bfloat16):
                lg = net(x[:, :-1])
            pred = lg.float()[0].argmax(-1)
            ok = (pred == x[0, 1:]).numpy()
            for name, kk in (("new", data.KIND_NEW), ("same", data.KIND_SAME)):
                c[name][0] += int(ok[k == kk].sum())
                c[name][1] += int((k == kk).sum())
            d, copy_tok = dec[i]
            if d > 0:   # pred[d - 1] predicts token d
                n_dec += 1
                dec_ok += int(ok[d - 1])
                dec_copy += int(int(pred[d - 1]) == copy_tok)
    return {**{f"{n}_token_acc": v[0] / max(1, v[1]) for n, v in c.items()},
            "decision_acc": dec_ok / max(1, n_dec), "decision_predicts_copy": dec_copy / max(1, n_dec)}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", required=True)
    ap.add_argument("--eval-bin", required=True)
    ap.add_argument("--editspec", default="")
    ap.add_argument("--threads", type=int, default=1, help="threads per job")
    ap.add_argument("--jobs", type=int, default=2, help="jobs at a time")
    ap.add_argument("--spec-prompts", type=int, default=60)
    ap.add_argument("--spec-gen", type=int, default=128)
    ap.add_argument("--max-edits", type=int, default=200)
    ap.add_argument("--spec-edits", type=int, default=60, help="held-out edits for draft-model speculation")
    ap.add_argument("--doc-tokens", type=int, default=1024, help="score the first N tokens of each held-out file (0 = all)")
    ap.add_argument("--target", default="target", help="the target's folder in OUT (target-apply: the shipped one)")
    ap.add_argument("--apply-only", action="store_true", help="only the fast-apply evaluation (eval/apply.json)")
    ap.add_argument("--fim-only", action="store_true", help="only the fill-in-the-middle evaluation (eval/fim.json)")
    ap.add_argument("--draft-file", default="model.gguf",
                    help="the drafts' GGUF in their folders (model-fim.gguf: with the FIM target's vocabulary)")
    a = ap.parse_args()
    log = lambda s: print(s, flush=True)  # noqa: E731
    if a.apply_only:
        apply_eval(a, a.out, log)
        return
    if a.fim_only:
        fim_eval(a, a.out, log)
        return
    out, dd = a.out, os.path.join(a.out, "data")
    ev_dir = os.path.join(out, "eval")
    os.makedirs(ev_dir, exist_ok=True)
    E, th = a.eval_bin, str(a.threads)
    dec = decision_points(os.path.join(os.path.dirname(E), "editspec-train-tokenize"), dd)
    models = {n: os.path.join(out, n, a.draft_file) for n in ("target", "draft", "draft-plain", "draft-edit")}
    models["target"] = os.path.join(out, a.target, "model.gguf")
    models = {n: p for n, p in models.items() if os.path.exists(p)}
    res = {"models": models}
    code_bin = os.path.join(dd, "code-heldout.bin")

    import numpy as np
    keep = np.load(os.path.join(dd, "edits-heldout.npz"))["rows"]   # the held-out edits that fit the context
    allrows = data.read_jsonl(os.path.join(dd, "edits-heldout.jsonl"))
    rows = [allrows[i] for i in keep][:a.max_edits]
    prompts = os.path.join(ev_dir, "edit-prompts.jsonl")
    data._write_jsonl(prompts, [{"text": data.edit_prompt_render(e["instruction"], e["before"])} for e in rows])

    # independent jobs, `jobs` at a time (one thread each): (result path, callable)
    jobs = []
    acc_args = ["--ctx", "512", "--stride", "384", "--doc-tokens", str(a.doc_tokens), "--threads", th]
    # the target's greedy edits: through `editspec edit` when the binary has it (the official number),
    # else through the eval tool's plain greedy generation (same prompt, same tokens)
    if editspec_has_edit(a.editspec):
        def edits_job():
            outs = edits_via_editspec(a.editspec, models["target"], rows, a.threads, ev_dir, log)
            return {**edit_scores(rows, outs), "via": "editspec edit", "outs": outs}
    else:
        def edits_job():
            gen_out = os.path.join(ev_dir, "edits-target.jsonl")
            r = run_json([E, "spec", "-m", models["target"], "-p", prompts, "--gen", "512", "--n-prompts", str(len(rows)),
                          "-o", gen_out, "--threads", th], log)
            outs = [json.loads(x)["text"] for x in open(gen_out)]
            return {**edit_scores(rows, outs), "via": "editspec-train-eval (no editspec edit)", "generation": r, "outs": outs}
    jobs.append((("edits", "target"), edits_job))
    for n, p in models.items():
        jobs.append((("code_acc", n), lambda p=p: run_json([E, "acc", "-m", p, "-t", code_bin] + acc_args, log)))
    for n in ("draft-plain", "draft-edit", "draft"):
        if n in models:
            jobs.append((("spec_code", n), lambda n=n: run_json(
                [E, "spec", "-m", models["target"], "-d", models[n], "-t", code_bin, "--gamma", "7", "--prompt-len", "128",
                 "--gen", str(a.spec_gen), "--n-prompts", str(a.spec_prompts), "--threads", th], log)))
    for n in ("draft-plain", "draft-edit"):
        if n in models:
            jobs.append((("spec_edit", n), lambda n=n: run_json(
                [E, "spec", "-m", models["target"], "-d", models[n], "-p", prompts, "--gamma", "7", "--gen", "512",
                 "--n-prompts", str(min(a.spec_edits, len(rows))), "--threads", th], log)))
    if editspec_has_edit(a.editspec):
        for n in ("draft", "draft-plain", "draft-edit"):
            if n in models:
                jobs.append((("generate_phase", n), lambda n=n: generate_phase_via_editspec(
                    a.editspec, models["target"], models[n], rows, a.threads, ev_dir, log, method=f"reuse+sd@{EE_CAP}")))
                jobs.append((("efficientedit", n), lambda n=n: generate_phase_via_editspec(
                    a.editspec, models["target"], models[n], rows, a.threads, ev_dir, log, method=f"efficientedit@{EE_CAP}")))
    for n in (a.target, "draft", "draft-plain", "draft-edit"):
        ck = os.path.join(out, n, "ckpt.pt")
        if os.path.exists(ck):
            jobs.append((("edit_tf", "target" if n == a.target else n), lambda ck=ck: teacher_forced(ck, dd, 512, dec)))
    from concurrent.futures import ThreadPoolExecutor
    with ThreadPoolExecutor(max_workers=a.jobs) as ex:
        futs = [(k, ex.submit(fn)) for k, fn in jobs]
        for (group, name), f in futs:
            res.setdefault(group, {})[name] = f.result()
    outs = res["edits"]["target"].pop("outs")
    for g in res.get("generate_phase", {}).values():
        g.pop("outs")
    for group in ("generate_phase", "efficientedit"):
        r = res.get(group, {})
        if "draft-plain" in r and "draft-edit" in r:
            res.setdefault("paired", {})[group] = paired(r["draft-plain"]["passes_each"], r["draft-edit"]["passes_each"])
    for g in res.get("efficientedit", {}).values():
        # quality of the lossy mode: against the reference answers, and against the exact mode's (greedy) answers
        o = g.pop("outs")
        g.update({k: v for k, v in edit_scores(rows[:len(o)], o).items() if k != "n"})
        g["same_as_greedy"] = sum(x == y for x, y in zip(o, outs)) / max(1, len(o))
    data._write_jsonl(os.path.join(ev_dir, "edits-target-outputs.jsonl"),
                      [{"id": e["id"], "kind": e["kind"], "exact": o == e["after"], "output": o} for e, o in zip(rows, outs)])
    data._write_json(os.path.join(ev_dir, "summary.json"), res)
    log("eval: " + json.dumps({"code_acc": {k: round(v["accuracy"], 4) for k, v in res["code_acc"].items()},
                               "spec_code_tokens_per_pass": {k: round(v["tokens_per_pass"], 3) for k, v in res.get("spec_code", {}).items()},
                               "edits_exact": res["edits"]["target"]["exact_match"], "edits_via": res["edits"]["target"]["via"],
                               "edits_unchanged_lines": res["edits"]["target"]["unchanged_lines_reproduced"],
                               "spec_edit_tokens_per_pass": {k: round(v["tokens_per_pass"], 3) for k, v in res.get("spec_edit", {}).items()},
                               "generate_phase_model_acceptance": {k: round(v["model_acceptance"], 4) for k, v in res.get("generate_phase", {}).items()},
                               "efficientedit": {k: {m: round(v[m], 4) for m in ("tokens_per_pass", "model_acceptance", "exact_match", "same_as_greedy")}
                                                 for k, v in res.get("efficientedit", {}).items()},
                               "edit_tf": res.get("edit_tf", {})}))


if __name__ == "__main__":
    main()
