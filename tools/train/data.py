"""Data stages of the pipeline: corpus split, synthetic edits, tokenizer, tokenized training arrays.

Every function here is deterministic for its arguments (seed included) and writes its outputs to a
temporary name first, so a stage is either complete or absent.

Edit examples are rendered exactly as `editspec edit` prompts a model without a chat template
(include/editspec/edit.h, edit_prompt_plain) and ended with EOS:

    <BOS>### Instruction:\\n{instruction}\\n### Original code:\\n{before}\\n### Edited code:\\n{after}<EOS>

Each token of an example gets a kind, from which the trainer's loss weights are made:

    KIND_PROMPT    0   BOS and the prompt
    KIND_SAME      1   a token of the answer on a line also in the original code (EfficientEdit's R)
    KIND_NEW       2   a token of the answer on a line that is new in the edited code (EfficientEdit's G)
    KIND_EOS       3   the final EOS
    KIND_CODE      4   plain code (training files)
    KIND_PAD       5   packing filler, never counted

A token belongs to the line holding its first byte; "new" lines come from a line diff (edits.lines_new).
"""
from __future__ import annotations

import json
import os
import random
import shutil
import subprocess
from collections import Counter, defaultdict

import numpy as np

import applies
import corpus
import edits

KIND_PROMPT, KIND_SAME, KIND_NEW, KIND_EOS, KIND_CODE, KIND_PAD = 0, 1, 2, 3, 4, 5


def edit_prompt_render(instruction: str, code: str) -> str:
    """editspec's plain edit template (src/decode/edit.cpp, edit_prompt_plain), byte for byte"""
    return "### Instruction:\n" + instruction + "\n### Original code:\n" + code + "\n### Edited code:\n"


APPLY_WINDOW = 3                         # apply.h APPLY_WINDOW
APPLY_WINDOW_GAP = "... lines left out ..."  # apply.h APPLY_WINDOW_GAP


def _lines(text: str) -> list[str]:
    """the text's lines, each with its '\n' (apply.h apply_lines: only '\n' ends a line)"""
    parts = text.split("\n")
    return [p + "\n" for p in parts[:-1]] + ([parts[-1]] if parts[-1] else [])


def apply_windows(code: str, update: str, window: int = APPLY_WINDOW) -> str:
    """apply.h apply_windows, byte for byte: the file's lines within `window` lines of a line the snippet
    quotes (4+ characters other than blanks, trailing blanks aside), a gap line for each run left out"""
    trim = lambda s: s.rstrip("\n\r \t")  # noqa: E731
    quoted = {trim(l) for l in _lines(update) if sum(c not in " \t" for c in trim(l)) >= 4}
    lines = _lines(code)
    keep = [False] * len(lines)
    for i, l in enumerate(lines):
        if trim(l) in quoted:
            for k in range(max(0, i - window), min(len(lines), i + window + 1)):
                keep[k] = True
    out, gap = [], False
    for i, l in enumerate(lines):
        if not keep[i]:
            gap = True
            continue
        if gap:
            out.append(APPLY_WINDOW_GAP + "\n")
        gap = False
        out.append(l if l.endswith("\n") else l + "\n")
    if gap:
        out.append(APPLY_WINDOW_GAP + "\n")
    return "".join(out)


def apply_prompt_render(instruction: str, update: str, code: str, view: str = "file") -> str:
    """editspec's plain apply template (include/editspec/apply.h, apply_prompt without a chat template,
    instruction first), byte for byte, showing the file as `view` says (apply_view: file, windows, none);
    the merged file and EOS follow it"""
    head = "### Instruction:\n" + (instruction or "Apply the update to the code.") + "\n### Update:\n" + update
    if view == "none":
        return head + "\n### Edited code:\n"
    shown = apply_windows(code, update) if view == "windows" else code
    return head + "\n### Original code:\n" + shown + "\n### Edited code:\n"


def _write_json(path, obj):
    tmp = path + ".tmp"
    with open(tmp, "w") as f:
        json.dump(obj, f, indent=1)
    os.replace(tmp, path)


def _write_jsonl(path, rows):
    tmp = path + ".tmp"
    with open(tmp, "w") as f:
        for r in rows:
            f.write(json.dumps(r) + "\n")
    os.replace(tmp, path)


def read_jsonl(path):
    with open(path) as f:
        return [json.loads(x) for x in f if x.strip()]


# ----------------------------------------------------------------------------
# stage: corpus

def stage_corpus(out_dir: str, seed: int, root: str, heldout_frac: float, log=print) -> dict:
    files = corpus.corpus_collect(root)
    split = corpus.corpus_split(files, seed, heldout_frac)
    man = {
        "root": root, "seed": seed, "heldout_frac": heldout_frac, "licence": corpus.corpus_licence(root),
        "train": [f.__dict__ for f in split["train"]], "heldout": [f.__dict__ for f in split["heldout"]],
        "heldout_groups": sorted({f.group for f in split["heldout"]}),
    }
    _write_json(os.path.join(out_dir, "corpus.json"), man)
    log(f"corpus: {len(files)} files, {sum(f.n_bytes for f in files) / 1e6:.1f} MB; held out "
        f"{len(split['heldout'])} files ({sum(f.n_bytes for f in split['heldout']) / 1e6:.2f} MB) in "
        f"{len(man['heldout_groups'])} groups")
    return man


# ----------------------------------------------------------------------------
# stage: edits

RARE_KINDS = ["remove_parameter", "loop_to_comprehension", "comprehension_to_loop", "change_constant", "add_validation"]
COMMON_KINDS = [k for k in edits.EDIT_KINDS if k not in RARE_KINDS]


EDIT_MAX_CHARS = 1450   # prompt + answer; ~3.1 bytes per token keeps an example under 512 tokens


def _function_edits(files, root, seed, per_function, log, tag):
    """per function: every applicable rare kind, plus `per_function` random common kinds; examples whose
    rendered text is longer than EDIT_MAX_CHARS are left out (they would not fit the context)"""
    out = []
    n_fn = 0
    for i, f in enumerate(files):
        src = open(os.path.join(root, f["path"]), encoding="utf-8").read()
        for fn in edits.functions_extract(src, f["path"]):
            n_fn += 1
            rng = random.Random(f"{seed}:{fn.path}:{fn.qualname}")
            kinds = RARE_KINDS + rng.sample(COMMON_KINDS, per_function)
            kinds = [k for k in edits.EDIT_KINDS if k in kinds]
            for e in edits.edits_for_function(fn, rng, kinds):
                if len(edit_prompt_render(e.instruction, e.before)) + len(e.after) > EDIT_MAX_CHARS:
                    continue
                out.append({"kind": e.kind, "instruction": e.instruction, "before": e.before, "after": e.after,
                            "path": e.path, "qualname": e.qualname})
        if log and (i + 1) % 200 == 0:
            log(f"edits ({tag}): {i + 1}/{len(files)} files, {n_fn} functions, {len(out)} edits")
    return out, n_fn


def stage_edits(out_dir: str, seed: int, n_heldout: int, max_train: int, log=print) -> dict:
    man = json.load(open(os.path.join(out_dir, "corpus.json")))
    root = man["root"]
    train, n_fn_train = _function_edits(man["train"], root, seed, 2, log, "train")
    held, n_fn_held = _function_edits(man["heldout"], root, seed, 2, log, "heldout")
    # training: cap each kind so common kinds do not drown the rare ones, then shuffle
    rng = random.Random(f"{seed}:edits:train")
    by_kind = defaultdict(list)
    for e in train:
        by_kind[e["kind"]].append(e)
    cap = max_train // len(edits.EDIT_KINDS)
    train_sel = []
    for k in edits.EDIT_KINDS:
        xs = by_kind[k]
        rng.shuffle(xs)
        train_sel.extend(xs[:cap])
    # fill up to max_train from the common kinds' leftovers
    rest = [e for k in edits.EDIT_KINDS for e in by_kind[k][cap:]]
    rng.shuffle(rest)
    train_sel.extend(rest[:max(0, max_train - len(train_sel))])
    rng.shuffle(train_sel)
    # held-out: round-robin over kinds, one edit per function at most
    rng = random.Random(f"{seed}:edits:heldout")
    hk = defaultdict(list)
    for e in held:
        hk[e["kind"]].append(e)
    for k in hk:
        rng.shuffle(hk[k])
    held_sel, used_fn = [], set()
    n_want = n_heldout + n_heldout // 10   # spares: tokenize keeps the first n_heldout that fit the context
    while len(held_sel) < n_want and any(hk.values()):
        for k in edits.EDIT_KINDS:
            while hk.get(k):
                e = hk[k].pop()
                key = (e["path"], e["qualname"])
                if key in used_fn:
                    continue
                used_fn.add(key)
                held_sel.append(e)
                break
            if len(held_sel) >= n_want:
                break
    for i, e in enumerate(held_sel):
        e["id"] = f"heldout-{i:04d}"
    _write_jsonl(os.path.join(out_dir, "edits-train.jsonl"), train_sel)
    _write_jsonl(os.path.join(out_dir, "edits-heldout.jsonl"), held_sel)
    stats = {"functions_train": n_fn_train, "functions_heldout": n_fn_held, "edits_train_all": len(train),
             "edits_train": len(train_sel), "edits_heldout": len(held_sel),
             "train_kinds": Counter(e["kind"] for e in train_sel), "heldout_kinds": Counter(e["kind"] for e in held_sel)}
    _write_json(os.path.join(out_dir, "edits-stats.json"), stats)
    log(f"edits: {len(train_sel)} training edits (of {len(train)}) from {n_fn_train} functions; "
        f"{len(held_sel)} held-out edits from {n_fn_held} functions")
    return stats


# ----------------------------------------------------------------------------
# stage: tokenizer

def stage_tokenizer(out_dir: str, kind: str, n_vocab: int, vocab_dir: str, log=print) -> str:
    path = os.path.join(out_dir, "tokenizer.gguf")
    if kind == "deepseek-coder":
        import shutil
        src = os.path.join(vocab_dir, "ggml-vocab-deepseek-coder.gguf")
        shutil.copyfile(src, path + ".tmp")
        os.replace(path + ".tmp", path)
        log(f"tokenizer: DeepSeek-Coder's vocabulary ({src})")
        return path
    import bpe
    man = json.load(open(os.path.join(out_dir, "corpus.json")))
    texts = [open(os.path.join(man["root"], f["path"]), encoding="utf-8").read() for f in man["train"]]
    # the edit instructions are English the code lacks: include the training edits' instructions
    texts += [e["instruction"] for e in read_jsonl(os.path.join(out_dir, "edits-train.jsonl"))]
    texts.append(edit_prompt_render("", ""))
    merges = bpe.bpe_train(texts, n_vocab, log=log)
    bpe.bpe_save_vocab_gguf(path, merges)
    log(f"tokenizer: BPE, {n_vocab} tokens, trained on {sum(map(len, texts)) / 1e6:.1f} MB")
    return path


# ----------------------------------------------------------------------------
# stage: tokenize

def _tokenize(tool, vocab, texts, path_jsonl, path_bin):
    _write_jsonl(path_jsonl, [{"text": t} for t in texts])
    r = subprocess.run([tool, "-v", vocab, "-i", path_jsonl, "-o", path_bin], capture_output=True, text=True)
    if r.returncode != 0:
        raise RuntimeError(f"tokenize failed: {r.stderr}")
    docs = []
    raw = open(path_bin, "rb").read()
    off = 0
    while off < len(raw):
        n = int(np.frombuffer(raw, np.uint32, 1, off)[0])
        off += 4
        t = np.frombuffer(raw, np.int32, n, off).copy()
        off += 4 * n
        s = np.frombuffer(raw, np.uint32, n, off).copy()
        off += 4 * n
        docs.append((t, s))
    os.remove(path_jsonl)
    return docs, r.stderr.strip()


def vocab_special(vocab_gguf: str) -> dict:
    from model import gguf_import
    gguf = gguf_import()
    r = gguf.GGUFReader(vocab_gguf)

    def get(k, d=None):
        f = r.fields.get(k)
        return f.contents() if f is not None else d
    n = len(r.fields["tokenizer.ggml.tokens"].data)
    return {"n_vocab": n, "bos": int(get("tokenizer.ggml.bos_token_id")), "eos": int(get("tokenizer.ggml.eos_token_id")),
            "pad": int(get("tokenizer.ggml.padding_token_id", get("tokenizer.ggml.eos_token_id"))),
            "add_bos": bool(get("tokenizer.ggml.add_bos_token", True))}


def examples_tokenize(tool, vocab, sp, prompts, rows, n_ctx, n_keep, path_base, tmp, split=False):
    """BOS + prompt + row["after"] + EOS for each row, with token kinds (same / new by a line diff of
    after against row["before"]), into path_base.npz (tokens, kinds, offsets, rows: the rows kept);
    examples longer than n_ctx + 1 tokens are dropped; at most n_keep kept (-1: all).
    split: the prompt and the answer tokenized apart, as editspec sees them (it tokenizes the prompt alone
    and generates the answer); joined, an answer that starts with spaces or a newline merges with the
    prompt's last newline into one prompt token, and the model never learns to write its first token"""
    dtype = np.uint16 if sp["n_vocab"] <= 65535 else np.int32
    if split:
        both, msg = _tokenize(tool, vocab, list(prompts) + [e["after"] for e in rows], tmp, path_base + ".bin")
        docs = []
        for (tp, sp_), (ta, sa), p in zip(both[:len(prompts)], both[len(prompts):], prompts):
            docs.append((np.concatenate([tp, ta]), np.concatenate([sp_, sa + len(p.encode())])))
    else:
        docs, msg = _tokenize(tool, vocab, [p + e["after"] for p, e in zip(prompts, rows)], tmp, path_base + ".bin")
    toks, kinds, offs, keep = [], [], [0], []
    n_drop = 0
    for i, ((t, s), p, e) in enumerate(zip(docs, prompts, rows)):
        if t.size + 2 > n_ctx + 1:
            n_drop += 1
            continue
        if 0 <= n_keep <= len(keep):
            break
        k = np.full(t.size, KIND_SAME, np.uint8)
        pb = len(p.encode())
        k[s < pb] = KIND_PROMPT
        line_starts = [pb]
        for ln in e["after"].splitlines(keepends=True):
            line_starts.append(line_starts[-1] + len(ln.encode()))
        new = set(edits.lines_new(e["before"], e["after"]))
        line_of = np.searchsorted(np.array(line_starts), s, side="right") - 1
        for j in range(t.size):
            if s[j] >= pb and line_of[j] in new:
                k[j] = KIND_NEW
        toks.append(np.concatenate([[sp["bos"]], t, [sp["eos"]]]))
        kinds.append(np.concatenate([[KIND_PROMPT], k, [KIND_EOS]]).astype(np.uint8))
        offs.append(offs[-1] + toks[-1].size)
        keep.append(i)
    np.savez(path_base + ".npz", tokens=np.concatenate(toks).astype(dtype),
             kinds=np.concatenate(kinds), offsets=np.array(offs, np.int64), rows=np.array(keep, np.int64))
    kc = Counter(np.concatenate(kinds).tolist())
    return {"examples": len(keep), "dropped_too_long": n_drop, "tokens": int(offs[-1]),
            "tokens_new": int(kc[KIND_NEW]), "tokens_same": int(kc[KIND_SAME]), "tokens_prompt": int(kc[KIND_PROMPT])}, msg


def stage_tokenize(out_dir: str, tool: str, n_ctx: int, n_heldout: int, log=print) -> dict:
    vocab = os.path.join(out_dir, "tokenizer.gguf")
    sp = vocab_special(vocab)
    man = json.load(open(os.path.join(out_dir, "corpus.json")))
    tmp = os.path.join(out_dir, "tok.tmp.jsonl")
    stats = {"vocab": sp}
    dtype = np.uint16 if sp["n_vocab"] <= 65535 else np.int32
    # code: train and held-out files, each document BOS + tokens
    for split in ("train", "heldout"):
        texts = [open(os.path.join(man["root"], f["path"]), encoding="utf-8").read() for f in man[split]]
        docs, msg = _tokenize(tool, vocab, texts, tmp, os.path.join(out_dir, f"code-{split}.bin"))
        stream = np.concatenate([np.concatenate([[sp["bos"]], t]) for t, _ in docs]).astype(dtype)
        np.save(os.path.join(out_dir, f"code-{split}.npy"), stream)
        stats[f"code_{split}"] = {"files": len(docs), "tokens": int(stream.size), "bytes": sum(len(t.encode()) for t in texts)}
        log(f"tokenize: code {split}: {msg}")
    # edits: BOS + prompt + after + EOS, with kinds; examples longer than n_ctx + 1 tokens are dropped
    for split in ("train", "heldout"):
        rows = read_jsonl(os.path.join(out_dir, f"edits-{split}.jsonl"))
        prompts = [edit_prompt_render(e["instruction"], e["before"]) for e in rows]
        st, msg = examples_tokenize(tool, vocab, sp, prompts, rows, n_ctx, n_heldout if split == "heldout" else -1,
                                    os.path.join(out_dir, f"edits-{split}"), tmp)
        stats[f"edits_{split}"] = st
        log(f"tokenize: edits {split}: {st['examples']} examples ({st['dropped_too_long']} longer than {n_ctx} tokens dropped), "
            f"{st['tokens']} tokens; {msg}")
    _write_json(os.path.join(out_dir, "tokenize-stats.json"), stats)
    return stats


# ----------------------------------------------------------------------------
# stage: applies (issue 21)

def stage_applies(data_dir: str, apply_dir: str, tool: str, seed: int, n_ctx: int, n_train: int, n_heldout: int,
                  max_chars: int, n_edits_mix: int, log=print, scrambled: float = 0.0) -> dict:
    """the apply fine-tuning's data folder (read by train.py like data_dir): apply tasks from the training
    files, plus the first n_edits_mix training edits so the edit skill stays trained, as edits-train.npz;
    apply tasks from the held-out files as edits-heldout.npz (the trainer's held-out check) and as
    applies-heldout.jsonl in CanItEdit's normalized fields (`editspec bench --task apply` reads it: the
    expected answer is code_after); the code streams and the tokenizer are data_dir's; a `scrambled`
    fraction of the training tasks has its names and numbers replaced (applies.scramble)"""
    tmp_dir = apply_dir + ".tmp"
    shutil.rmtree(tmp_dir, ignore_errors=True)
    os.makedirs(tmp_dir)
    man = json.load(open(os.path.join(data_dir, "corpus.json")))
    for f in ("tokenizer.gguf", "code-train.npy", "code-heldout.npy", "corpus.json"):
        shutil.copyfile(os.path.join(data_dir, f), os.path.join(tmp_dir, f))
    vocab = os.path.join(tmp_dir, "tokenizer.gguf")
    sp = vocab_special(vocab)
    tmp = os.path.join(tmp_dir, "tok.tmp.jsonl")
    stats = {"max_chars": max_chars, "n_ctx": n_ctx, "scrambled": scrambled}
    for split, n in (("train", n_train), ("heldout", n_heldout + n_heldout // 4)):
        files = [(f["path"], open(os.path.join(man["root"], f["path"]), encoding="utf-8").read()) for f in man[split]]
        tasks = applies.tasks_for_files(files, seed, n, max_chars, split, scrambled if split == "train" else 0.0)
        rows = [{"id": f"apply-{split}-{i:05d}", "kind": t.kind, "instruction": t.instruction, "update": t.update,
                 "before": t.before, "after": t.after, "path": t.path} for i, t in enumerate(tasks)]
        prompts = [apply_prompt_render(r["instruction"], r["update"], r["before"]) for r in rows]
        if split == "train" and n_edits_mix > 0:
            er = read_jsonl(os.path.join(data_dir, "edits-train.jsonl"))[:n_edits_mix]
            rows += er
            prompts += [edit_prompt_render(e["instruction"], e["before"]) for e in er]
        st, msg = examples_tokenize(tool, vocab, sp, prompts, rows, n_ctx, n_heldout if split == "heldout" else -1,
                                    os.path.join(tmp_dir, f"edits-{split}"), tmp, split=True)
        stats[f"applies_{split}"] = {**st, "tasks": len(tasks), "edits_mixed_in": len(rows) - len(tasks)}
        log(f"applies: {split}: {len(tasks)} apply tasks (+{len(rows) - len(tasks)} edits), {st['examples']} fit "
            f"{n_ctx} tokens ({st['dropped_too_long']} dropped), {st['tokens']} tokens; {msg}")
        _write_jsonl(os.path.join(tmp_dir, f"applies-{split}.jsonl"), rows)
        if split == "heldout":
            keep = np.load(os.path.join(tmp_dir, "edits-heldout.npz"))["rows"]
            _write_jsonl(os.path.join(tmp_dir, "applies-heldout-bench.jsonl"), [
                {"id": rows[i]["id"], "instruction_descriptive": rows[i]["instruction"] or "Apply the update to the code.",
                 "instruction_lazy": "", "code_before": rows[i]["before"], "code_after": rows[i]["after"],
                 "update": rows[i]["update"], "tests": "", "change_kind": rows[i]["kind"]} for i in keep])
    _write_json(os.path.join(tmp_dir, "applies-stats.json"), stats)
    shutil.rmtree(apply_dir, ignore_errors=True)
    os.replace(tmp_dir, apply_dir)
    return stats


# ----------------------------------------------------------------------------
# stage: fim (issue 40)

def fim_tokenize(tool, vocab, sp, fim_ids, rows, n_ctx, n_keep, path_base, tmp, order="psm"):
    """[BOS] PRE prefix SUF suffix MID typed | middle EOS for each row (fim.fim_example), or with
    order "spm" [BOS] SUF suffix PRE prefix MID typed | middle EOS, each part tokenized on its own as
    editspec's server does (src/server/api.cpp); kinds: the prompt up to `typed` KIND_PROMPT, the
    middle KIND_NEW, then KIND_EOS; examples longer than n_ctx + 1 tokens dropped; the same npz fields
    as examples_tokenize"""
    parts = ("prefix", "suffix", "typed", "middle")
    docs, msg = _tokenize(tool, vocab, [r[k] for r in rows for k in parts], tmp, path_base + ".bin")
    dtype = np.uint16 if sp["n_vocab"] <= 65535 else np.int32
    toks, kinds, offs, keep, n_drop = [], [], [0], [], 0
    for i, r in enumerate(rows):
        pre, suf, typed, mid = (docs[4 * i + j][0] for j in range(4))
        p_part, s_part = np.concatenate([[fim_ids["pre"]], pre]), np.concatenate([[fim_ids["suf"]], suf])
        first, second = (s_part, p_part) if order == "spm" else (p_part, s_part)
        prompt = np.concatenate([[sp["bos"]], first, second, [fim_ids["mid"]], typed])
        t = np.concatenate([prompt, mid, [sp["eos"]]])
        if t.size > n_ctx + 1:
            n_drop += 1
            continue
        if 0 <= n_keep <= len(keep):
            break
        kinds.append(np.concatenate([np.full(prompt.size, KIND_PROMPT), np.full(mid.size, KIND_NEW), [KIND_EOS]]).astype(np.uint8))
        toks.append(t)
        offs.append(offs[-1] + t.size)
        keep.append(i)
    if not toks:
        raise ValueError(f"fim: none of {len(rows)} FIM examples fits n_ctx = {n_ctx} tokens")
    np.savez(path_base + ".npz", tokens=np.concatenate(toks).astype(dtype), kinds=np.concatenate(kinds),
             offsets=np.array(offs, np.int64), rows=np.array(keep, np.int64))
    os.remove(path_base + ".bin")
    return {"examples": len(keep), "dropped_too_long": n_drop, "tokens": int(offs[-1]),
            "tokens_middle": int(sum((k == KIND_NEW).sum() for k in kinds))}, msg


def _npz_join(path: str, parts: list[tuple[str, list | None]]) -> None:
    """path.npz = the examples of each (npz path, their indices; None: all) in turn, rows renumbered"""
    toks, kinds, offs = [], [], [0]
    for p, pick in parts:
        z = np.load(p)
        o, t, k = z["offsets"], z["tokens"], z["kinds"]   # an NpzFile reads an array at each z[...]
        for i in (range(len(o) - 1) if pick is None else pick):
            toks.append(t[o[i]:o[i + 1]])
            kinds.append(k[o[i]:o[i + 1]])
            offs.append(offs[-1] + int(o[i + 1] - o[i]))
    dtype = np.result_type(*[t.dtype for t in toks])
    np.savez(path, tokens=np.concatenate(toks).astype(dtype), kinds=np.concatenate(kinds),
             offsets=np.array(offs, np.int64), rows=np.arange(len(offs) - 1, dtype=np.int64))


def stage_fim(data_dir: str, apply_dir: str, fim_dir: str, tool: str, seed: int, n_ctx: int, n_train: int,
              n_heldout: int, n_apply_mix: int, n_eval: int, order: str = "psm", log=print) -> dict:
    """the FIM fine-tuning's data folder (read by train.py like data_dir): tokenizer.gguf with the FIM
    tokens (bpe.vocab_add_fim); edits-train.npz = FIM examples from the training files, then n_apply_mix
    examples drawn from apply_dir's (its apply tasks come first and its edits last, so a draw, not the
    first ones: a FIM fine-tune that saw only apply tasks lost the edits, 48 % exact to 0 %) so those
    skills stay trained;
    edits-heldout.npz = FIM examples from the held-out files (the trainer's held-out check);
    nextline-heldout.jsonl = n_eval next-line positions in the held-out files (fim.next_line_tasks);
    order: the prompt's layout (fim_tokenize)"""
    import bpe
    import fim
    tmp_dir = fim_dir + ".tmp"
    shutil.rmtree(tmp_dir, ignore_errors=True)
    os.makedirs(tmp_dir)
    for f in ("code-train.npy", "code-heldout.npy", "corpus.json"):
        shutil.copyfile(os.path.join(data_dir, f), os.path.join(tmp_dir, f))
    vocab = os.path.join(tmp_dir, "tokenizer.gguf")
    ids = bpe.vocab_add_fim(os.path.join(data_dir, "tokenizer.gguf"), vocab)
    sp = vocab_special(vocab)
    man = json.load(open(os.path.join(data_dir, "corpus.json")))
    tmp = os.path.join(tmp_dir, "tok.tmp.jsonl")
    stats = {"fim_ids": ids, "n_ctx": n_ctx, "order": order}
    for split, n in (("train", n_train), ("heldout", n_heldout)):
        files = [(f["path"], open(os.path.join(man["root"], f["path"]), encoding="utf-8").read()) for f in man[split]]
        # characters of prefix and suffix for an n_ctx-token window: ~3.3 bytes per token with the shipped
        # tokenizer, so ~2/3 of the window at most, and a middle of up to 400 characters
        max_prefix, max_suffix = n_ctx * 3 // 2, n_ctx * 3 // 4
        rows = fim.fim_examples(files, seed + (0 if split == "train" else 1), n + n // 4, max_prefix, max_suffix)
        base = os.path.join(tmp_dir, f"fim-{split}")
        st, msg = fim_tokenize(tool, vocab, sp, ids, rows, n_ctx, n, base, tmp, order)
        st["shapes"] = dict(Counter(rows[i]["shape"] for i in np.load(base + ".npz")["rows"]))
        stats[f"fim_{split}"] = st
        log(f"fim: {split}: {st['examples']} FIM examples ({st['dropped_too_long']} longer than {n_ctx} tokens dropped), "
            f"{st['tokens']} tokens; {msg}")
        if split == "train":
            apply_npz = os.path.join(apply_dir, "edits-train.npz")
            n_apply = len(np.load(apply_npz)["offsets"]) - 1
            pick = sorted(random.Random(f"fim-mix-{seed}").sample(range(n_apply), min(n_apply_mix, n_apply)))
            _npz_join(os.path.join(tmp_dir, "edits-train.npz"), [(base + ".npz", None), (apply_npz, pick)])
        else:
            shutil.copyfile(base + ".npz", os.path.join(tmp_dir, "edits-heldout.npz"))
            _write_jsonl(os.path.join(tmp_dir, "nextline-heldout.jsonl"),
                         fim.next_line_tasks(files, seed, n_eval, max_prefix, max_suffix))
    stats["apply_mixed_in"] = n_apply_mix
    _write_json(os.path.join(tmp_dir, "fim-stats.json"), stats)
    shutil.rmtree(fim_dir, ignore_errors=True)
    os.replace(tmp_dir, fim_dir)
    return stats
