"""Fast-apply examples (issue 21): a piece of a file, a snippet of its change, and the merged file.

An LLM proposes a change as a snippet that elides unchanged code with comments ("# ... existing
code ..."); the model writes out the whole merged file. Examples are made from the pipeline's own
files: a window of consecutive lines of a file, one to three of its functions changed by the synthetic
edits of edits.py (re-indented to their place), sometimes a function added or removed, and a snippet
shaped as real ones are:

  - the changed lines with 0-4 unchanged lines of context around each change (at least one line
    around a deletion, which shows only by the lines that close up around it);
  - an elision marker on its own line, indented like the code after it (a quarter of the snippets: at
    column 0), wherever unchanged lines are
    left out: at the top, between hunks, at the end (now and then the top or end marker is left out,
    as LLMs do); several marker wordings;
  - optionally the one-line instruction of the edit.

The prompt is editspec's plain apply template (include/editspec/apply.h, the model has no chat
template), byte for byte: data.apply_prompt_render. Deterministic for a seed.
"""
from __future__ import annotations

import ast
import builtins
import difflib
import keyword
import random
import re
from dataclasses import dataclass

import edits

MARKERS = ["# ... existing code ...", "# ... existing code ...", "# ... existing code ...", "# ...",
           "# ... rest of the code ...", "# existing code", "# ... unchanged ...", "# (unchanged code)"]
CONTEXT_CHOICES = [0, 1, 1, 2, 2, 3, 3, 3, 4]


@dataclass
class apply_task:
    path: str
    kind: str          # "+"-joined edit kinds of the hunks ("add_function", "remove_function" ...)
    instruction: str   # "" = the template's default
    before: str        # the file (a window of its lines)
    update: str        # the snippet
    after: str         # the merged file


@dataclass
class _fn:
    start: int         # first line (0-based, decorators included)
    end: int           # one past the last line
    col: int
    source: str        # dedented (edits._snippet)
    name: str


def _functions(src: str, lines: list[str]) -> list[_fn]:
    """the file's functions and methods that edits.py can edit (3-30 lines, ...), outermost only"""
    try:
        tree = ast.parse(src)
    except SyntaxError:
        return []
    out = []

    def visit(node):
        for ch in ast.iter_child_nodes(node):
            if isinstance(ch, (ast.FunctionDef, ast.AsyncFunctionDef)):
                s = edits._snippet(lines, ch)
                if s is not None:
                    start = min([ch.lineno] + [d.lineno for d in ch.decorator_list]) - 1
                    out.append(_fn(start, ch.end_lineno, ch.col_offset, s, ch.name))
                    continue
                visit(ch)
            else:
                visit(ch)
    visit(tree)
    return out


def _indent(text: str, col: int) -> list[str]:
    pre = " " * col
    return [(pre + ln if ln.strip() else ln) for ln in text.splitlines(keepends=True)]


def snippet_make(before: str, after: str, rng: random.Random) -> str:
    """the snippet of the change before -> after, shaped at random as described above"""
    a, b = before.splitlines(keepends=True), after.splitlines(keepends=True)
    ops = [op for op in difflib.SequenceMatcher(a=a, b=b, autojunk=False).get_opcodes() if op[0] != "equal"]
    if not ops:
        return ""
    ctx = rng.choice(CONTEXT_CHOICES)
    if ctx == 0 and any(op[0] == "delete" for op in ops):
        ctx = 1
    marker = rng.choice(MARKERS)
    # shown ranges of `after`'s lines: each change with ctx lines around it, merged when they touch
    spans = []
    for _, i0, i1, j0, j1 in ops:
        s, e = max(0, j0 - ctx), min(len(b), j1 + ctx)
        if spans and s <= spans[-1][1]:
            spans[-1][1] = max(spans[-1][1], e)
        else:
            spans.append([s, e])
    drop_top, drop_end = rng.random() < 0.15, rng.random() < 0.15
    col0 = rng.random() < 0.25   # LLM snippets often put the markers at column 0 whatever the code's indent

    def mark(next_line: str) -> str:
        ind = len(next_line) - len(next_line.lstrip(" ")) if next_line.strip() and not col0 else 0
        return " " * ind + marker + "\n"
    out = []
    prev = 0
    for k, (s, e) in enumerate(spans):
        if s > prev and not (k == 0 and drop_top):
            out.append(mark(b[s] if s < len(b) else ""))
        out.extend(b[s:e])
        prev = e
    if prev < len(b) and not drop_end:
        out.append(mark(b[prev - 1] if prev > 0 else ""))
    text = "".join(out)
    return text if text.endswith("\n") else text + "\n"


def _window(lines: list[str], fns: list[_fn], rng: random.Random, max_chars: int):
    """a window [s, e) of whole lines around a random function, at most max_chars, holding the functions
    entirely inside it; None when the chosen function alone is too long"""
    f = rng.choice(fns)
    s, e = f.start, f.end
    if sum(len(x) for x in lines[s:e]) > max_chars:
        return None
    budget = rng.randint(sum(len(x) for x in lines[s:e]), max_chars)
    size = sum(len(x) for x in lines[s:e])
    while True:   # grow on a random side while it fits
        grow = [d for d in ("up", "down") if (d == "up" and s > 0) or (d == "down" and e < len(lines))]
        if not grow:
            break
        d = rng.choice(grow)
        ln = lines[s - 1] if d == "up" else lines[e]
        if size + len(ln) > budget:
            break
        size += len(ln)
        if d == "up":
            s -= 1
        else:
            e += 1
    return s, e


def _edit_of(fn: _fn, path: str, rng: random.Random):
    kinds = list(edits.EDIT_KINDS)
    rng.shuffle(kinds)
    for k in kinds[:4]:
        es = edits.edits_for_function(edits.function_snippet(path, fn.name, fn.name, fn.source), rng, [k])
        if es:
            return es[0]
    return None


def file_parse(src: str) -> tuple[list[str], list[_fn]]:
    """a file's lines and editable functions (no functions: nothing to draw from it)"""
    lines = src.splitlines(keepends=True)
    if not lines or not lines[-1].endswith("\n"):
        return lines, []
    return lines, _functions(src, lines)


def task_make(path: str, lines: list[str], fns: list[_fn], rng: random.Random, max_chars: int) -> apply_task | None:
    """one apply task from a parsed file, or None when this draw does not give one"""
    if not fns:
        return None
    w = _window(lines, fns, rng, max_chars)
    if w is None:
        return None
    s, e = w
    inside = [f for f in fns if f.start >= s and f.end <= e]
    new = {}   # function start -> replacement lines (or [] for a removed one)
    kinds, instr = [], []
    r = rng.random()
    if r < 0.10 and len(inside) >= 2:
        # a new function: `before` lacks it (it is taken out), `after` has it
        f = rng.choice(inside[1:])
        new[f.start] = ("remove_from_before", f)
        kinds.append("add_function")
        instr.append(f"Add the function {f.name}.")
    elif r < 0.15 and len(inside) >= 2:
        f = rng.choice(inside)
        new[f.start] = ([], f)
        kinds.append("remove_function")
        instr.append(f"Remove the function {f.name}.")
    else:
        n = min(len(inside), rng.choice([1, 1, 2, 2, 3]))
        for f in rng.sample(inside, n):
            ed = _edit_of(f, path, rng)
            if ed is None:
                continue
            new[f.start] = (_indent(ed.after, f.col), f)
            kinds.append(ed.kind)
            instr.append(ed.instruction)
    if not new:
        return None
    before, after = [], []
    i = s
    for f_start in sorted(new):
        rep, f = new[f_start]
        before += lines[i:f.start]
        after += lines[i:f.start]
        if rep == "remove_from_before":
            after += lines[f.start:f.end]
        else:
            before += lines[f.start:f.end]
            after += rep
        i = f.end
    before += lines[i:e]
    after += lines[i:e]
    b, a = "".join(before), "".join(after)
    if a == b or not b.strip():
        return None
    up = snippet_make(b, a, rng)
    instruction = instr[0] if len(instr) == 1 and rng.random() < 0.5 else ""
    return apply_task(path, "+".join(kinds), instruction, b, up, a)


# names a scrambled task keeps: the language's own, and the words of the elision markers
_KEEP = set(keyword.kwlist) | set(dir(builtins)) | {"self", "cls"} | {w for m in MARKERS for w in re.findall(r"\w+", m)}
_WORD = re.compile(r"\b(?:[A-Za-z_][A-Za-z0-9_]*|[0-9]+)\b")
_ODD = "éüłøßñçåöäжлπλ中文"


def _random_name(rng: random.Random, taken: set[str]) -> str:
    while True:
        n = rng.randint(2, 14)
        chars = "abcdefghijklmnopqrstuvwxyz" * 3 + "ABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789__"
        s = rng.choice("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ_") + "".join(rng.choice(chars) for _ in range(n - 1))
        if rng.random() < 0.1:
            i = rng.randint(1, len(s))
            s = s[:i] + rng.choice(_ODD) + s[i:]
        if s not in taken and s not in _KEEP:
            taken.add(s)
            return s


def scramble(t: apply_task, rng: random.Random) -> apply_task:
    """the same task with about half of its names and numbers replaced, the same way everywhere, by
    random ones (a few with non-ASCII letters): a copy of the original cannot lean on what code usually
    says, so the model learns to copy any token exactly (issue 21: most wrong merges garble a name, a
    number or a byte of the unchanged code)"""
    words = sorted({w for w in _WORD.findall(t.before + t.update + t.after) if w not in _KEEP})
    taken = set(words)
    m = {}
    for w in words:
        if rng.random() < 0.5:
            continue
        if w.isdigit():
            m[w] = str(rng.randint(0, 10 ** rng.randint(1, 12) - 1))
        else:
            m[w] = _random_name(rng, taken)

    def sub(text: str) -> str:
        return _WORD.sub(lambda x: m.get(x.group(0), x.group(0)), text)
    # instructions name things in backticks or as "the function NAME."
    instr = re.sub(r"`[^`]*`|(?<=function )\w+", lambda x: sub(x.group(0)), t.instruction)
    return apply_task(t.path, t.kind, instr, sub(t.before), sub(t.update), sub(t.after))


def tasks_for_files(files: list[tuple[str, str]], seed: int, n_tasks: int, max_chars: int, tag: str,
                    scrambled: float = 0.0) -> list[apply_task]:
    """n_tasks tasks drawn from the files (path, text): rounds over the files in a seeded order, one
    draw per file a round, so the tasks spread over every file; a `scrambled` fraction of them with
    their names and numbers replaced (scramble)"""
    rng = random.Random(f"{seed}:applies:{tag}")
    parsed = {}
    order = list(range(len(files)))
    rng.shuffle(order)
    out, seen = [], set()
    for rnd in range(20):
        for i in order:
            if len(out) >= n_tasks:
                return out
            path, src = files[i]
            if i not in parsed:
                parsed[i] = file_parse(src)
            t = task_make(path, *parsed[i], random.Random(f"{seed}:{tag}:{rnd}:{path}"), max_chars)
            if t is None or (t.before, t.after) in seen:
                continue
            seen.add((t.before, t.after))
            if scrambled > 0 and rng.random() < scrambled:
                t = scramble(t, random.Random(f"{seed}:{tag}:scramble:{len(out)}"))
            out.append(t)
    return out
