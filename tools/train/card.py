"""The model card of a pipeline run (OUT/MODEL_CARD.md), made from the run's own records."""
from __future__ import annotations

import json
import os
import platform
import time


def _load(path, default=None):
    try:
        return json.load(open(path))
    except (OSError, ValueError):
        return default


def _pct(x):
    return f"{100 * x:.1f}%" if isinstance(x, (int, float)) else "n/a"


def _per_draft_table(L: list, intro: str, columns: list, results: dict, cells) -> None:
    """a table with a row per fine-tune: cells(result) gives the row's cells after the name"""
    L.append(intro)
    L.append("| draft | " + " | ".join(columns) + " |")
    L.append("|" + " --- |" * (len(columns) + 1))
    for n in ("draft", "draft-plain", "draft-edit"):
        if n in results:
            L.append(f"| {n} | " + " | ".join(cells(results[n])) + " |")


DRAFT_ROLES = {"draft-edit": "draft (edit-oriented fine-tune)", "draft-plain": "draft (plain fine-tune)"}


def shipped_draft(out: str) -> str:
    """the fine-tune that ships as editspec-draft.gguf: the one with more tokens per target pass in the whole
    EfficientEdit (`--method efficientedit` on the held-out edits), the edit-oriented one on a tie or
    without that measurement"""
    ee = _load(os.path.join(out, "eval", "summary.json"), {}).get("efficientedit", {})
    return max(("draft-edit", "draft-plain"), key=lambda n: ee.get(n, {}).get("tokens_per_pass", 0.0))


def card_write(out: str, preset: str, seed: int, timings: dict, total_seconds: float, overrides=()) -> str:
    dd = os.path.join(out, "data")
    corpus = _load(os.path.join(dd, "corpus.json"), {})
    es = _load(os.path.join(dd, "edits-stats.json"), {})
    ts = _load(os.path.join(dd, "tokenize-stats.json"), {})
    ev = _load(os.path.join(out, "eval", "summary.json"), {})
    runs = {n: (_load(os.path.join(out, n, "spec.json"), {}), _load(os.path.join(out, n, "done.json"), {}))
            for n in ("target", "target-apply", "target-fim", "draft", "draft-plain", "draft-edit")}
    apply_run = next(n for n in ("target-fim", "target-apply", "target") if runs[n][1] or n == "target")
    init_of = {"target-apply": "target", "target-fim": "target-apply", "draft-plain": "draft", "draft-edit": "draft"}
    fst = _load(os.path.join(out, "fim-data", "fim-stats.json"), {})
    fe = _load(os.path.join(out, "eval", "fim.json"), {})
    ap = _load(os.path.join(out, "eval", "apply.json"), {})
    ast = _load(os.path.join(out, "apply-data", "applies-stats.json"), {})
    L = []
    L.append("# editspec's small code models: target and draft\n")
    sets = "".join(f" --set {kv}" for kv in overrides)
    L.append(f"Made by `python3 tools/train/run.py --preset {preset} --seed {seed}{sets}` (tools/train/README.md) on "
             f"{platform.node() or 'this machine'}, {time.strftime('%Y-%m-%d')}; whole pipeline {total_seconds / 60:.0f} min (its stages as timed when they ran"
             + ("; the trainings taken from an earlier run, below, are not in it"
                if any(runs[n][1].get("from") for n in ("target", "target-apply", "target-fim")) else "")
             + ").\n")
    L.append("| file | role | parameters | layers x width | context | tokens seen | training time |")
    L.append("| --- | --- | --- | --- | --- | --- | --- |")
    ship = shipped_draft(out)
    for n, role, fname in ((apply_run, "target", "editspec-target.gguf"), (ship, DRAFT_ROLES[ship], "editspec-draft.gguf")):
        s, d = runs[n]
        m = s.get("model", {})
        tok = d.get("tokens", 0)
        secs = d.get("seconds", 0)
        while n in init_of:   # the trainings it started from
            n = init_of[n]
            tok += runs[n][1].get("tokens", 0)
            secs += runs[n][1].get("seconds", 0)
        L.append(f"| `{fname}` | {role} | {d.get('params', 0) / 1e6:.1f}M | {m.get('n_layer')} x {m.get('n_embd')} | "
                 f"{m.get('n_ctx')} | {tok / 1e6:.2f}M | {secs / 60:.0f} min |")
    L.append("\nBoth are `llama` architecture GGUF (F16 matrices, tied input/output embeddings) with the same "
             "tokenizer, load in stock llama.cpp and run with `editspec complete` / `editspec edit`.\n")
    L.append("## Data and licences\n")
    lic = corpus.get("licence", {})
    L.append(f"- Code: the CPython standard library sources at `{corpus.get('root')}` ({lic.get('version')}), "
             f"{len(corpus.get('train', []))} training files and {len(corpus.get('heldout', []))} held-out files "
             f"(whole modules held out: {', '.join(corpus.get('heldout_groups', []))}). Licence: {lic.get('licence')}.")
    L.append(f"- Edits: synthetic (instruction, code before, code after) triples made by tools/train/edits.py from "
             f"functions of those files: {ts.get('edits_train', {}).get('examples')} training edits, "
             f"{ts.get('edits_heldout', {}).get('examples')} held-out edits (from held-out files only). Kinds: {', '.join(sorted(es.get('train_kinds', {})))}.")
    if ast:
        a_tr = ast.get("applies_train", {})
        L.append(f"- Fast-apply tasks (tools/train/applies.py): windows of up to {ast.get('max_chars')} characters of the same "
                 f"files, one to three functions changed by those edits (or a function added or removed), the snippet of "
                 f"the change with elision markers: {a_tr.get('tasks')} training tasks from training files (with "
                 f"{a_tr.get('edits_mixed_in')} edits mixed in), {ast.get('applies_heldout', {}).get('examples')} held-out "
                 "tasks from held-out files.")
    if fst:
        f_tr = fst.get("fim_train", {})
        L.append(f"- Fill-in-the-middle examples (tools/train/fim.py): a prefix, a suffix and the middle between them cut "
                 f"from the training files in the shapes editors send (whole lines at the cursor, a line already begun, "
                 f"any span): {f_tr.get('examples')} training examples ({json.dumps(f_tr.get('shapes', {}))}) with "
                 f"{fst.get('apply_mixed_in')} examples of the fast-apply data (tasks and edits) and "
                 f"{fst.get('edits_mixed_in', 0)} of the pre-training's edits mixed in; {fst.get('fim_heldout', {}).get('examples')} "
                 "from held-out files for the trainer's check; the next-line positions of the evaluation from held-out files.")
    L.append("- No evaluation set (CanItEdit, HumanEval, ...) was used for training.\n")
    v = ts.get("vocab", {})
    L.append("## Tokenizer\n")
    L.append(f"Byte-level BPE with {v.get('n_vocab')} tokens trained by the pipeline on the training files "
             "(llama.cpp pre-tokenizer `gpt-2`, BOS `<|bos|>`, EOS `<|eos|>`). "
             f"Held-out code: {ts.get('code_heldout', {}).get('bytes', 0) / max(1, ts.get('code_heldout', {}).get('tokens', 1)):.2f} "
             "bytes per token (DeepSeek-Coder's 32k vocabulary: 3.09). Why not DeepSeek-Coder's: tools/train/README.md."
             + (f" The target and the shipped draft add three control tokens at the end, `<|fim_prefix|>` {fst['fim_ids']['pre']}, "
                f"`<|fim_suffix|>` {fst['fim_ids']['suf']} and `<|fim_middle|>` {fst['fim_ids']['mid']} (named in the GGUF's "
                "`tokenizer.ggml.fim_*_token_id`): the FIM fine-tune learns them; the draft's rows for them are zeros "
                "(`model.gguf_vocab_extend`), so every other id and the pre-trainings stay as they were."
                if fst.get("fim_ids") else "") + "\n")
    L.append("## Training\n")
    L.append("| run | init | steps | batch x context | lr | loss weights | tokens | time | tokens/s |")
    L.append("| --- | --- | --- | --- | --- | --- | --- | --- | --- |")
    for n, (s, d) in runs.items():
        if not s:
            continue
        w = s.get("weights", {})
        wt = ", ".join(f"{k} {v:g}" for k, v in w.items())
        init = "random" if not s.get("init") else (f"{init_of[n]} (its GGUF export)" if n.startswith("target") else "draft")
        L.append(f"| {n} | {init} | {s.get('steps')} | {s.get('batch')} x {s.get('model', {}).get('n_ctx')} | "
                 f"{s.get('lr')} | {wt} | {d.get('tokens', 0) / 1e6:.2f}M | {d.get('seconds', 0) / 60:.1f} min | "
                 f"{d.get('tokens', 0) / max(1, d.get('seconds', 1)):.0f} |")
    for n in ("target", "target-apply"):
        pre = runs[n][1]
        if pre.get("from"):
            L.append(f"\n`{n}` was not trained here: `--take {n}={pre['from']}` (sha256 "
                     f"{pre.get('sha256', '')[:16]}…), the export of an earlier run of this preset and seed, whose recorded "
                     "training spec the pipeline checked against this run's; the rows that start from it and every "
                     "stage after it ran here. Its training time is in that run's card, not in this one's total.")
    st = runs.get("target", (None, None))[0] or {}
    more = st.get("threads_more")
    L.append("\nAdamW (0.9, 0.95), weight decay 0.1 on matrices, warm-up then cosine to 10%, gradient clip 1.0, "
             "bf16 autocast (fp32 weights), the two pre-trainings side by side on the two cores, one thread each"
             + (f" until the draft's finished, then the target on {more['threads']} threads (the thread count changes no "
                "result, only the speed)" if more else "")
             + (f"; the target's first {st['copy_warmup']} steps are pure copy sequences ([BOS] w w, only the copy counted)"
                if st.get("copy_warmup") else "")
             + f". Stage times (s): {json.dumps(timings)}.\n")
    L.append("## Held-out results\n")
    sets = (("heldout", "held-out apply tasks (from held-out files)"), ("canitedit", "CanItEdit's edits as apply tasks (evaluation only)"))
    for name, label in [(n, l) for n, l in sets] + [(n + "-constrained", l + ", constrained (`--constrain`: every merged line a line "
                                                     "of the file or the snippet; lossy against free greedy decoding)") for n, l in sets]:
        r = ap.get(name)
        if not r:
            continue
        a_ = r.get("ar", {})
        ms = r.get("methods", {})
        best = ms.get("reuse+lookup-longest", {})
        L.append(f"Fast apply, {label}: {r.get('items_fit')} of {r.get('items_in')} fit the target's {runs[apply_run][0].get('model', {}).get('n_ctx')}-token "
                 f"context; greedy merged file exactly right {_pct(a_.get('exact_match'))}, unchanged lines reproduced "
                 f"{_pct(a_.get('unchanged_lines_reproduced'))}; `reuse+lookup-longest` {best.get('speedup_vs_ar', 0):.2f}x over `ar`, "
                 f"{best.get('tokens_per_pass', 0):.2f} tokens per target pass, identical to `ar`: {best.get('identical_to_ar')}; "
                 f"`reuse` {ms.get('reuse', {}).get('speedup_vs_ar', 0):.2f}x, {ms.get('reuse', {}).get('tokens_per_pass', 0):.2f} "
                 f"(`{r.get('command', '').split(' --out')[0].replace(out + '/', 'OUT/')}`).\n")
    if fe:
        v = fe.get("variants", {})
        L.append(f"Fill in the middle, next line: {fe.get('positions')} positions at the start of a non-blank line of the "
                 "held-out files, the whole lines around it as an editor sends them; greedy through `editspec serve`, the "
                 "answer's first line against the file's line. Exactly right: "
                 f"`/infill` with the suffix {_pct(v.get('infill_suffix', {}).get('exact_rate'))}, with an empty suffix "
                 f"{_pct(v.get('infill_no_suffix', {}).get('exact_rate'))}, `/completion` of the prefix alone "
                 f"{_pct(v.get('completion_prefix', {}).get('exact_rate'))} (right by `/infill` with the suffix and not by "
                 f"`/completion`: {fe.get('suffix_only_right')}, the other way round: {fe.get('prefix_only_right')}; "
                 "`evaluate.py --fim-only`).\n")
    ca = ev.get("code_acc", {})
    L.append("| model | next-token accuracy (held-out files) | cross-entropy (nats/token) |")
    L.append("| --- | --- | --- |")
    for n, r in ca.items():
        L.append(f"| {n} | {_pct(r.get('accuracy'))} | {r.get('nll_nats', 0):.3f} |")
    e = ev.get("edits", {}).get("target", {})
    L.append(f"\nHeld-out synthetic edits ({e.get('n')}), target, greedy: exact match {_pct(e.get('exact_match'))}, "
             f"unchanged lines reproduced {_pct(e.get('unchanged_lines_reproduced'))}. By kind: {json.dumps(e.get('exact_by_kind', {}))}.")
    L.append(f"(generated through {e.get('via')}).")
    tft = ev.get("edit_tf", {}).get("target", {})
    if "decision_acc" in tft:
        L.append(f"Teacher-forced on the same edits, the target predicts the decision token (the first answer token that "
                 f"differs from copying the original) right {_pct(tft['decision_acc'])} of the time (the copy instead: "
                 f"{_pct(tft.get('decision_predicts_copy'))}), new-line tokens {_pct(tft.get('new_token_acc'))}, copied tokens "
                 f"{_pct(tft.get('same_token_acc'))}.")
    L.append("\nGreedy draft-model speculation, gamma = 7, against the target:\n")
    L.append("| draft | held-out code: tokens per target pass | accepted per pass | held-out edits: tokens per pass | new-line token accuracy (teacher-forced) | decision token |")
    L.append("| --- | --- | --- | --- | --- | --- |")
    for n in ("draft", "draft-plain", "draft-edit"):
        sc = ev.get("spec_code", {}).get(n, {})
        se = ev.get("spec_edit", {}).get(n, {})
        tf = ev.get("edit_tf", {}).get(n, {})
        se_tpp = f"{se['tokens_per_pass']:.2f}" if "tokens_per_pass" in se else "not measured"
        L.append(f"| {n} | {sc.get('tokens_per_pass', 0):.2f} | {sc.get('accepted_per_pass', 0):.2f} | "
                 f"{se_tpp} | {_pct(tf.get('new_token_acc'))} | {_pct(tf.get('decision_acc'))} |")
    gp = ev.get("generate_phase", {})
    if gp:
        m = gp.get("draft-plain", {}).get("method", "reuse+sd")
        cap = f"; at most {m.split('@')[1]} draft nodes per pass, so no measured cost curve enters the figures" if "@" in m else ""
        _per_draft_table(L, f"\nIn EfficientEdit's setting (`editspec edit --method {m}`, greedy, the same held-out edits{cap}): "
                         "Reuse drafts the unchanged code and the draft model drafts only after a rejection, i.e. the edit's "
                         "new content (`draft`: the pre-trained draft before either fine-tuning):\n",
                         ["draft-model nodes verified", "accepted", "acceptance", "tokens per target pass"], gp,
                         lambda g: [str(g.get("model_drafted", 0)), str(g.get("model_accepted", 0)),
                                    _pct(g.get("model_acceptance")), f"{g.get('tokens_per_pass', 0):.2f}"])
    ee = ev.get("efficientedit", {})
    if ee:
        _per_draft_table(L, "\nThe paper's own comparison of the two losses (EfficientEdit Table II, *Our* vs *SFT*): the whole of "
                         f"EfficientEdit, `editspec edit --method {ee.get('draft-plain', {}).get('method', 'efficientedit')}` (Reuse, the draft model in the Generate phase "
                         "with the original's continuation below its path where it re-joins the original, entropy-aware "
                         "verification of the draft model's tokens: lossy), on the held-out edits:\n",
                         ["edits", "draft-model acceptance", "tokens per target pass", "exact (reference)", "unchanged lines",
                          "same as greedy"], ee,
                         lambda g: [str(g.get("n", 0)), _pct(g.get("model_acceptance")), f"{g.get('tokens_per_pass', 0):.2f}",
                                    _pct(g.get("exact_match")), _pct(g.get("unchanged_lines_reproduced")),
                                    _pct(g.get("same_as_greedy"))])
        pr = ev.get("paired", {})
        if pr:
            method = lambda g: ev.get(g, {}).get("draft-plain", {}).get("method", g)  # noqa: E731
            L.append("\nEdit by edit, draft-edit against draft-plain (target passes): " + "; ".join(
                f"{method(g)}: fewer on {v['fewer']}, more on {v['more']}, as many on {v['equal']}" for g, v in pr.items()) + ".")
        L.append(f"\n`editspec-draft.gguf` is `{shipped_draft(out)}`: the fine-tune with more tokens per target pass in this table "
                 "(the pipeline's rule, `card.shipped_draft`).")
    lab = _load(os.path.join(out, "labels", "labels-stats.json"), {})
    L.append("\n`draft-plain`: fine-tuned with the loss on every answer token; `draft-edit`: EfficientEdit's edit-oriented "
             "loss (EfficientEdit eq. 8), only tokens of lines that are new in the edited code; both on the same batches "
             "(half edit examples, half code windows), from the same pre-trained draft.")
    if lab:
        L.append(f"As in the paper, the edit answers they learn are the target's own: the target answered the first "
                 f"{lab.get('edits')} training edits greedily (stage `labels`, {lab.get('generate_seconds', 0) / 60:.1f} min; "
                 f"{lab.get('answers_equal_reference')} of them equal the reference answer), and the new lines are those of "
                 "its answer that are not in the original.\n")
    else:
        L.append("The reference answers stand in for the target's own outputs (the paper's labels).\n")
    path = os.path.join(out, "MODEL_CARD.md")
    with open(path + ".tmp", "w") as f:
        f.write("\n".join(L) + "\n")
    os.replace(path + ".tmp", path)
    return path
