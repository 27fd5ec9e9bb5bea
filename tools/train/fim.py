"""Fill-in-the-middle examples and the next-line evaluation (issue 40).

An editor asks for the text at its cursor with the code before it (the prefix) and after it (the
suffix). editspec's server builds the prompt as llama.cpp's /infill does (src/server/api.cpp):

    [BOS] <|fim_prefix|> prefix <|fim_suffix|> suffix <|fim_middle|> typed   -> middle, EOS

each part tokenized on its own; `typed` is llama.vim's `prompt` (the text already on the cursor's
line), empty for clients that put it at the end of the prefix. Examples are cut from the pipeline's
own files in the shapes editors send:

  - "line"  (50 %): the cursor at a line's start; the middle one or more whole lines without the last
    newline; the suffix starts with that newline (llama.vim, llama.vscode, Continue, Zed);
  - "typed" (25 %): the same, with the start of the first line already typed: at the end of the
    prefix (OpenAI-style FIM) or, half of the time, as `typed` after <|fim_middle|> (llama.vim);
  - "span"  (25 %): any 1-200 characters (classic FIM), the cursor anywhere.

The prefix is whole lines (up to a budget drawn between an eighth of max_prefix characters and all of
it), the suffix whole lines (likewise), empty a tenth of the time (the end of a file). Deterministic
for a seed.
"""
from __future__ import annotations

import random

SHAPES = ["line", "line", "typed", "span"]


def _lines(text: str) -> list[str]:
    return text.splitlines(keepends=True)


def _prefix_of(lines: list[str], i: int, max_chars: int) -> str:
    """whole lines before line i, at most max_chars of them (the nearest ones)"""
    out, n = [], 0
    for ln in reversed(lines[:i]):
        if n + len(ln) > max_chars:
            break
        out.append(ln)
        n += len(ln)
    return "".join(reversed(out))


def _suffix_of(lines: list[str], j: int, max_chars: int) -> str:
    """"\\n" + whole lines from line j (without the last one's newline), at most max_chars"""
    out, n = [], 0
    for ln in lines[j:]:
        if n + len(ln) > max_chars:
            break
        out.append(ln)
        n += len(ln)
    return "\n" + "".join(out).rstrip("\n") if out else "\n"


def fim_example(path: str, text: str, rng: random.Random, max_prefix: int, max_suffix: int, max_middle: int):
    """one example {path, shape, prefix, suffix, typed, middle} from text, or None (no place fits)"""
    lines = _lines(text)
    if len(lines) < 4:
        return None
    shape = rng.choice(SHAPES)
    max_prefix, max_suffix = rng.randint(max_prefix // 8, max_prefix), rng.randint(max_suffix // 8, max_suffix)
    if shape == "span":
        a = rng.randrange(0, len(text))
        b = min(len(text), a + rng.randint(1, 200))
        if b - a > max_middle:
            return None
        pre, mid = text[:a][-max_prefix:], text[a:b]
        suf = text[b:b + max_suffix]
        if not mid.strip():
            return None
        return {"path": path, "shape": shape, "prefix": pre, "suffix": suf, "typed": "", "middle": mid}
    i = rng.randrange(1, len(lines))
    if not lines[i].strip():
        return None
    r = rng.random()
    k = 1 if r < 0.6 else rng.randint(2, 3) if r < 0.85 else rng.randint(4, 8)
    j = min(len(lines), i + k)
    if not lines[j - 1].strip():
        return None
    mid = "".join(lines[i:j])
    mid = mid[:-1] if mid.endswith("\n") else mid
    if len(mid) > max_middle:
        return None
    pre = _prefix_of(lines, i, max_prefix)
    suf = "" if rng.random() < 0.1 else _suffix_of(lines, j, max_suffix)
    typed = ""
    if shape == "typed":
        first = lines[i].rstrip("\n")
        ind = len(first) - len(first.lstrip())
        if len(first) - ind < 2:
            return None
        cut = rng.randint(ind + 1, len(first) - 1)
        if rng.random() < 0.5:
            typed = mid[:cut]
        else:
            pre += mid[:cut]
        mid = mid[cut:]
    return {"path": path, "shape": shape, "prefix": pre, "suffix": suf, "typed": typed, "middle": mid}


def fim_examples(files: list[tuple[str, str]], seed: int, n: int, max_prefix: int, max_suffix: int,
                 max_middle: int = 400) -> list[dict]:
    """n examples from (path, text) files, drawn with a file chosen by its size"""
    rng = random.Random(f"fim-{seed}")
    weights = [len(t) for _, t in files]
    out, tries = [], 0
    while len(out) < n and tries < 20 * n:
        tries += 1
        path, text = rng.choices(files, weights)[0]
        e = fim_example(path, text, rng, max_prefix, max_suffix, max_middle)
        if e:
            out.append(e)
    return out


def next_line_tasks(files: list[tuple[str, str]], seed: int, n: int, max_prefix: int, max_suffix: int) -> list[dict]:
    """n held-out positions {path, prefix, suffix, line}: the cursor at the start of a non-blank line
    (not among a file's first 3), the line to write, the whole lines around it as an editor sends them"""
    rng = random.Random(f"next-line-{seed}")
    places = [(p, i) for p, t in files for i, ln in enumerate(_lines(t)) if i >= 3 and ln.strip()]
    rng.shuffle(places)
    text_of = dict(files)
    out = []
    for p, i in places[:n]:
        lines = _lines(text_of[p])
        out.append({"path": p, "prefix": _prefix_of(lines, i, max_prefix), "line": lines[i].rstrip("\n"),
                    "suffix": _suffix_of(lines, i + 1, max_suffix)})
    return out


def mix_edits(fim_dir: str, data_dir: str, n: int, seed: int) -> int:
    """appends n edits drawn from data_dir/edits-train.npz (the pre-training's own edits) to
    fim_dir/edits-train.npz, the FIM fine-tune's training set: apply data holds few edits, and 4,000
    of its examples alone still let the fine-tune take the held-out edits from 48 % exact to 37.5 %.
    Returns how many were appended"""
    import os

    import numpy as np

    import data
    if n <= 0:
        return 0
    src, dst = os.path.join(data_dir, "edits-train.npz"), os.path.join(fim_dir, "edits-train.npz")
    n_src = len(np.load(src)["offsets"]) - 1
    pick = sorted(random.Random(f"fim-edits-{seed}").sample(range(n_src), min(n, n_src)))
    tmp = dst + ".mix.npz"
    data._npz_join(tmp, [(dst, None), (src, pick)])
    os.replace(tmp, dst)
    return len(pick)
