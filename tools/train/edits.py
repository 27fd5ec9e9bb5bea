"""Synthetic code edits: (instruction, code before, code after) made from real functions by programmatic edits.

    for fn in functions_extract(source, path):          # function snippets, dedented, ASCII, size-filtered
        for e in edits_for_function(fn, rng):           # every applicable edit kind, one candidate each
            e.instruction, e.before, e.after, e.kind

Edits are made on the text (the AST gives positions), so every line the edit does not touch stays
byte-identical, comments and layout included: an edit changes a few lines, like a real one. Each result
must parse; the kinds where a position bug could slip through (rename, wrap in try) are checked against
the same edit done on the AST.

Kinds (EDIT_KINDS): rename_variable, rename_function, add_parameter, remove_parameter, add_validation,
change_constant, add_docstring, delete_statement, wrap_try, loop_to_comprehension, comprehension_to_loop.

Deterministic: the choices come from the rng passed in (random.Random(seed-derived)).
"""
from __future__ import annotations

import ast
import copy
import random
import re
import textwrap
from dataclasses import dataclass

EDIT_KINDS = ["rename_variable", "rename_function", "add_parameter", "remove_parameter", "add_validation",
              "change_constant", "add_docstring", "delete_statement", "wrap_try", "loop_to_comprehension",
              "comprehension_to_loop"]

FUNC_MAX_LINES = 30
FUNC_MAX_CHARS = 900
FUNC_MIN_LINES = 3


@dataclass
class function_snippet:
    path: str
    qualname: str
    name: str
    source: str       # dedented, ends with "\n"


@dataclass
class code_edit:
    kind: str
    instruction: str
    before: str
    after: str
    path: str = ""
    qualname: str = ""


# ----------------------------------------------------------------------------
# function extraction

def functions_extract(source: str, path: str) -> list[function_snippet]:
    """every (async) function of a module, decorators included, dedented to column 0"""
    try:
        tree = ast.parse(source)
    except SyntaxError:
        return []
    lines = source.splitlines(keepends=True)
    out = []

    def visit(node, prefix):
        for ch in ast.iter_child_nodes(node):
            if isinstance(ch, (ast.FunctionDef, ast.AsyncFunctionDef)):
                q = prefix + ch.name
                snip = _snippet(lines, ch)
                if snip is not None:
                    out.append(function_snippet(path, q, ch.name, snip))
                visit(ch, q + ".")
            elif isinstance(ch, ast.ClassDef):
                visit(ch, prefix + ch.name + ".")
            else:
                visit(ch, prefix)

    visit(tree, "")
    return out


def _snippet(lines, node) -> str | None:
    start = min([node.lineno] + [d.lineno for d in node.decorator_list])
    end = node.end_lineno
    n = end - start + 1
    if n < FUNC_MIN_LINES or n > FUNC_MAX_LINES:
        return None
    seg = lines[start - 1:end]
    text = "".join(seg)
    if not text.isascii() or "\t" in text or "\r" in text or len(text) > FUNC_MAX_CHARS + node.col_offset * n:
        return None
    ind = node.col_offset
    pre = " " * ind
    for ln in seg:
        if ln.strip() and not ln.startswith(pre):
            return None   # a multi-line string at a lower indentation: dedenting would change it
    text = "".join(ln[ind:] if ln.strip() else "\n" for ln in seg)
    if not text.endswith("\n"):
        text += "\n"
    if len(text) > FUNC_MAX_CHARS:
        return None
    try:
        t = ast.parse(text)
    except SyntaxError:
        return None
    if len(t.body) != 1 or not isinstance(t.body[0], (ast.FunctionDef, ast.AsyncFunctionDef)):
        return None
    # after dedenting, string values must not change (multi-line strings indented with the function)
    if ast.dump(_strip_pos(t.body[0])) != ast.dump(_strip_pos(copy.deepcopy(node))):
        return None
    return text


def _strip_pos(node):
    for n in ast.walk(node):
        for a in ("lineno", "col_offset", "end_lineno", "end_col_offset"):
            if hasattr(n, a):
                setattr(n, a, 0)
    return node


# ----------------------------------------------------------------------------
# text editing by AST positions (1-based lines, 0-based columns; snippets are ASCII, so bytes = chars)

def text_apply(src: str, edits: list[tuple[int, int, int, int, str]]) -> str:
    """edits: (line, col, end_line, end_col, replacement); non-overlapping"""
    lines = src.splitlines(keepends=True)
    starts = [0]
    for ln in lines:
        starts.append(starts[-1] + len(ln))

    def off(line, col):
        return starts[line - 1] + col

    out = src
    for (l0, c0, l1, c1, rep) in sorted(edits, key=lambda e: (e[0], e[1]), reverse=True):
        a, b = off(l0, c0), off(l1, c1)
        out = out[:a] + rep + out[b:]
    return out


def _fn(tree):
    return tree.body[0]


def _body_start(fn):
    """index of the first statement after the docstring"""
    b = fn.body
    if b and isinstance(b[0], ast.Expr) and isinstance(b[0].value, ast.Constant) and isinstance(b[0].value.value, str):
        return 1
    return 0


def _indent_of(src_lines, stmt) -> str:
    return src_lines[stmt.lineno - 1][:stmt.col_offset]


def _names_in(src: str) -> set[str]:
    return set(re.findall(r"[A-Za-z_][A-Za-z0-9_]*", src))


def _param_names(fn) -> list[ast.arg]:
    a = fn.args
    return a.posonlyargs + a.args + a.kwonlyargs + ([a.vararg] if a.vararg else []) + ([a.kwarg] if a.kwarg else [])


def _pick(rng: random.Random, xs):
    return xs[rng.randrange(len(xs))] if xs else None


NEW_NAMES = ["value", "item", "result", "count", "data", "node", "key", "index", "total", "buf", "entry", "text",
             "name", "path", "size", "items", "values", "obj", "target", "source", "parts", "line", "chunk",
             "state", "config", "offset", "limit", "pending", "current", "output"]

VERB_SYNONYMS = {"get": "fetch", "fetch": "get", "make": "create", "create": "make", "is": "check", "set": "assign",
                 "read": "load", "load": "read", "write": "save", "save": "write", "find": "lookup", "parse": "decode",
                 "add": "append", "remove": "delete", "delete": "remove", "build": "construct", "run": "execute",
                 "handle": "process", "process": "handle", "update": "refresh", "init": "setup", "show": "display",
                 "print": "emit", "check": "verify", "format": "render", "open": "acquire", "close": "release"}

NEW_PARAMS = [("verbose", "False"), ("timeout", "None"), ("strict", "True"), ("encoding", "'utf-8'"),
              ("limit", "10"), ("debug", "False"), ("retries", "3"), ("callback", "None"), ("default", "None"),
              ("max_depth", "5")]

EXCEPTIONS = ["Exception", "ValueError", "KeyError", "OSError", "TypeError", "RuntimeError"]


# ----------------------------------------------------------------------------
# the edit kinds: each returns a code_edit or None

class _rename(ast.NodeTransformer):
    def __init__(self, old, new):
        self.old, self.new = old, new

    def visit_Name(self, n):
        if n.id == self.old:
            n.id = self.new
        return n

    def visit_arg(self, n):
        if n.arg == self.old:
            n.arg = self.new
        self.generic_visit(n)
        return n


def edit_rename_variable(src, tree, rng, fname):
    fn = _fn(tree)
    if any(isinstance(n, (ast.Global, ast.Nonlocal)) for n in ast.walk(fn)):
        return None
    params = [a.arg for a in _param_names(fn) if a.arg not in ("self", "cls")]
    assigned = sorted({n.id for n in ast.walk(fn) if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Store)})
    cands = sorted(set(params) | set(assigned))
    cands = [c for c in cands if len(c) > 1 and c != fname]
    old = _pick(rng, cands)
    if old is None:
        return None
    used = _names_in(src)
    fresh = [n for n in NEW_NAMES if n not in used]
    new = _pick(rng, fresh)
    if new is None:
        return None
    edits = []
    for n in ast.walk(fn):
        if isinstance(n, ast.Name) and n.id == old:
            edits.append((n.lineno, n.col_offset, n.end_lineno, n.end_col_offset, new))
        elif isinstance(n, ast.arg) and n.arg == old:
            edits.append((n.lineno, n.col_offset, n.lineno, n.col_offset + len(old), new))
    if not edits:
        return None
    after = text_apply(src, edits)
    want = _rename(old, new).visit(copy.deepcopy(tree))
    if not _same_ast(after, want):
        return None
    is_param = old in params
    instr = _pick(rng, [
        f"Rename the {'parameter' if is_param else 'variable'} `{old}` to `{new}`.",
        f"Rename `{old}` to `{new}` in `{fname}`.",
        f"In `{fname}`, rename the {'parameter' if is_param else 'local variable'} `{old}` to `{new}`.",
    ])
    return code_edit("rename_variable", instr, src, after)


def edit_rename_function(src, tree, rng, fname):
    fn = _fn(tree)
    words = fname.strip("_").split("_")
    lead = fname[:len(fname) - len(fname.lstrip("_"))]
    if not words or not words[0]:
        return None
    if words[0] in VERB_SYNONYMS:
        words = [VERB_SYNONYMS[words[0]]] + words[1:]
    else:
        words = ["do"] + words
    new = lead + "_".join(words)
    if new in _names_in(src) or new == fname:
        return None
    line = src.splitlines(keepends=True)[fn.lineno - 1]
    m = re.search(r"\bdef\s+(" + re.escape(fname) + r")\b", line)
    if not m:
        return None
    edits = [(fn.lineno, m.start(1), fn.lineno, m.end(1), new)]
    for n in ast.walk(fn):   # recursive calls by the bare name
        if isinstance(n, ast.Name) and n.id == fname:
            edits.append((n.lineno, n.col_offset, n.end_lineno, n.end_col_offset, new))
    after = text_apply(src, edits)
    want = copy.deepcopy(tree)
    _fn(want).name = new
    _rename(fname, new).visit(want)
    if not _same_ast(after, want):
        return None
    instr = _pick(rng, [f"Rename the function `{fname}` to `{new}`.",
                        f"Rename `{fname}` to `{new}`, including recursive calls."])
    return code_edit("rename_function", instr, src, after)


def _signature_simple(fn) -> bool:
    a = fn.args
    return not (a.posonlyargs or a.vararg or a.kwonlyargs or a.kwarg)


def edit_add_parameter(src, tree, rng, fname):
    fn = _fn(tree)
    if not _signature_simple(fn):
        return None
    used = _names_in(src)
    opts = [p for p in NEW_PARAMS if p[0] not in used]
    p = _pick(rng, opts)
    if p is None:
        return None
    name, default = p
    a = fn.args
    if a.args:
        last = a.args[-1]
        end = (last.end_lineno, last.end_col_offset)
        if a.defaults and len(a.defaults) >= 1:
            d = a.defaults[-1]
            end = max(end, (d.end_lineno, d.end_col_offset))
        edits = [(end[0], end[1], end[0], end[1], f", {name}={default}")]
    else:
        line = src.splitlines(keepends=True)[fn.lineno - 1]
        m = re.search(r"\bdef\s+" + re.escape(fname) + r"\s*\(\s*\)", line)
        if not m:
            return None
        col = line.index("(", m.start()) + 1
        edits = [(fn.lineno, col, fn.lineno, line.index(")", col), f"{name}={default}")]
    after = text_apply(src, edits)
    if not _parses(after):
        return None
    t2 = _fn(ast.parse(after))
    if [x.arg for x in t2.args.args] != [x.arg for x in a.args] + [name]:
        return None
    instr = _pick(rng, [f"Add a parameter `{name}` with default value `{default}` to `{fname}`.",
                        f"Add a keyword argument `{name}={default}` at the end of the parameters of `{fname}`.",
                        f"Give `{fname}` a new last parameter `{name}` defaulting to `{default}`."])
    return code_edit("add_parameter", instr, src, after)


def edit_remove_parameter(src, tree, rng, fname):
    fn = _fn(tree)
    if not _signature_simple(fn):
        return None
    a = fn.args
    loaded = {n.id for n in ast.walk(fn) if isinstance(n, ast.Name)}
    n_nodef = len(a.args) - len(a.defaults)
    cands = [i for i, x in enumerate(a.args) if x.arg not in ("self", "cls") and x.arg not in loaded]
    i = _pick(rng, cands)
    if i is None:
        return None

    def span(j):
        x = a.args[j]
        s = (x.lineno, x.col_offset)
        e = (x.end_lineno, x.end_col_offset)
        if j >= n_nodef:
            d = a.defaults[j - n_nodef]
            e = max(e, (d.end_lineno, d.end_col_offset))
        return s, e

    s, e = span(i)
    if i + 1 < len(a.args):
        e = span(i + 1)[0]
    elif i > 0:
        s = span(i - 1)[1]
    after = text_apply(src, [(s[0], s[1], e[0], e[1], "")])
    if not _parses(after):
        return None
    t2 = _fn(ast.parse(after))
    if [x.arg for x in t2.args.args] != [x.arg for j, x in enumerate(a.args) if j != i]:
        return None
    name = a.args[i].arg
    instr = _pick(rng, [f"Remove the unused parameter `{name}` from `{fname}`.",
                        f"`{name}` is never used in `{fname}`: remove it from the signature.",
                        f"Delete the parameter `{name}` of `{fname}`."])
    return code_edit("remove_parameter", instr, src, after)


def edit_add_validation(src, tree, rng, fname):
    fn = _fn(tree)
    bs = _body_start(fn)
    if bs >= len(fn.body) or fn.body[bs].lineno == fn.lineno:
        return None
    params = [x for x in fn.args.posonlyargs + fn.args.args + fn.args.kwonlyargs if x.arg not in ("self", "cls")]
    p = _pick(rng, params)
    if p is None:
        return None
    lines = src.splitlines(keepends=True)
    first = fn.body[bs]
    ind = _indent_of(lines, first)
    if ind.strip():
        return None
    ann = p.annotation.id if isinstance(p.annotation, ast.Name) else None
    v = p.arg
    style = rng.randrange(3)
    if ann in ("int", "str", "float", "list", "dict", "bool", "bytes", "tuple") and style != 0:
        check = f"if not isinstance({v}, {ann}):\n{ind}    raise TypeError(\"{v} must be {ann}\")\n"
        instr = _pick(rng, [f"Raise a TypeError if `{v}` is not a {ann}.",
                            f"Validate that `{v}` is an instance of `{ann}` and raise TypeError otherwise."])
    elif style == 2:
        check = f"if not {v}:\n{ind}    raise ValueError(\"{v} must not be empty\")\n"
        instr = _pick(rng, [f"Raise a ValueError if `{v}` is empty.",
                            f"Add input validation to `{fname}`: `{v}` must not be empty (raise ValueError)."])
    else:
        check = f"if {v} is None:\n{ind}    raise ValueError(\"{v} must not be None\")\n"
        instr = _pick(rng, [f"Raise a ValueError if `{v}` is None.",
                            f"Add input validation to `{fname}`: reject `{v}` being None with a ValueError.",
                            f"Check at the start of `{fname}` that `{v}` is not None."])
    after = text_apply(src, [(first.lineno, 0, first.lineno, 0, ind + check)])
    if not _parses(after):
        return None
    return code_edit("add_validation", instr, src, after)


def edit_change_constant(src, tree, rng, fname):
    fn = _fn(tree)
    consts = []
    for n in ast.walk(fn):
        if isinstance(n, ast.Constant) and type(n.value) in (int, float) and n.lineno == n.end_lineno:
            seg = ast.get_source_segment(src, n)
            if seg is not None and seg == repr(n.value):
                consts.append(n)
    counts = {}
    for n in consts:
        counts[repr(n.value)] = counts.get(repr(n.value), 0) + 1
    cands = [n for n in consts if counts[repr(n.value)] == 1 and len(re.findall(r"(?<![\w.])" + re.escape(repr(n.value)) + r"(?![\w.])", src)) == 1]
    n = _pick(rng, cands)
    if n is None:
        return None
    old = n.value
    if isinstance(old, int):
        new = _pick(rng, [old + 1, old * 2, old * 10, old + 100]) if old not in (0, 1) else _pick(rng, [2, 5, 10, 100])
        if new == old:
            new = old + 1
    else:
        new = _pick(rng, [old * 2, old / 2, round(old + 0.5, 6)])
    new_s = repr(new)
    after = text_apply(src, [(n.lineno, n.col_offset, n.end_lineno, n.end_col_offset, new_s)])
    if not _parses(after):
        return None
    instr = _pick(rng, [f"Change the constant `{repr(old)}` to `{new_s}` in `{fname}`.",
                        f"Replace the value `{repr(old)}` with `{new_s}`.",
                        f"Use `{new_s}` instead of `{repr(old)}` in `{fname}`."])
    return code_edit("change_constant", instr, src, after)


def edit_add_docstring(src, tree, rng, fname):
    fn = _fn(tree)
    if _body_start(fn) == 1 or fn.body[0].lineno == fn.lineno:
        return None
    lines = src.splitlines(keepends=True)
    first = fn.body[0]
    ind = _indent_of(lines, first)
    if ind.strip():
        return None
    words = [w for w in fname.strip("_").split("_") if w]
    if not words:
        return None
    verb = words[0]
    rest = " ".join(words[1:])
    doc = (verb.capitalize() + (" " + rest if rest else "") + ".")
    if rng.randrange(2):
        args = [x.arg for x in fn.args.args if x.arg not in ("self", "cls")]
        if args:
            doc = doc[:-1] + " from " + ", ".join(f"`{a}`" for a in args[:3]) + "."
    after = text_apply(src, [(first.lineno, 0, first.lineno, 0, f'{ind}"""{doc}"""\n')])
    if not _parses(after):
        return None
    instr = _pick(rng, [f"Add the docstring \"{doc}\" to `{fname}`.",
                        f"Document `{fname}` with a one-line docstring: {doc}",
                        f"Add a docstring to `{fname}` that says: {doc}"])
    return code_edit("add_docstring", instr, src, after)


def edit_delete_statement(src, tree, rng, fname):
    fn = _fn(tree)
    lines = src.splitlines(keepends=True)
    cands = []
    for n in ast.walk(fn):
        for field in ("body", "orelse", "finalbody"):
            block = getattr(n, field, None)
            if not isinstance(block, list) or len(block) < 2:
                continue
            for s in block:
                if isinstance(s, (ast.Assign, ast.AugAssign, ast.Expr)) and s.lineno == s.end_lineno \
                        and s.lineno != fn.lineno and not (isinstance(s, ast.Expr) and isinstance(s.value, ast.Constant)):
                    text = lines[s.lineno - 1].strip()
                    if text and sum(1 for ln in lines if ln.strip() == text) == 1 and lines[s.lineno - 1][:s.col_offset].strip() == "" \
                            and lines[s.lineno - 1].rstrip("\n")[s.end_col_offset:].strip() == "":
                        cands.append(s)
    s = _pick(rng, cands)
    if s is None:
        return None
    after = text_apply(src, [(s.lineno, 0, s.lineno + 1, 0, "")])
    if not _parses(after):
        return None
    stmt = lines[s.lineno - 1].strip()
    instr = _pick(rng, [f"Delete the statement `{stmt}`.",
                        f"Remove the line `{stmt}` from `{fname}`.",
                        f"`{stmt}` is not needed: remove it."])
    return code_edit("delete_statement", instr, src, after)


def edit_wrap_try(src, tree, rng, fname):
    fn = _fn(tree)
    bs = _body_start(fn)
    if bs >= len(fn.body) or fn.body[bs].lineno == fn.lineno:
        return None
    lines = src.splitlines(keepends=True)
    first = fn.body[bs]
    ind = _indent_of(lines, first)
    if ind.strip() or not ind:
        return None
    unit = " " * 4
    exc = _pick(rng, EXCEPTIONS)
    handler = _pick(rng, ["return None", "raise", "pass"])
    l0 = first.lineno - 1
    # decorators/comments after the body's last statement stay where they are
    l1 = fn.body[-1].end_lineno
    body = lines[l0:l1]
    new = [ind + "try:\n"] + [(unit + ln) if ln.strip() else ln for ln in body] + \
          [ind + f"except {exc}:\n", ind + unit + handler + "\n"]
    after = "".join(lines[:l0] + new + lines[l1:])
    if not _parses(after):
        return None
    want = copy.deepcopy(tree)
    wf = _fn(want)
    h = ast.parse(handler).body[0]
    tr = ast.Try(body=wf.body[bs:], handlers=[ast.ExceptHandler(type=ast.Name(exc, ast.Load()), name=None, body=[h])],
                 orelse=[], finalbody=[])
    wf.body = wf.body[:bs] + [tr]
    if not _same_ast(after, want):
        return None
    what = {"return None": "returns None", "raise": "re-raises it", "pass": "ignores it"}[handler]
    instr = _pick(rng, [f"Wrap the body of `{fname}` in a try/except that catches `{exc}` and {what}.",
                        f"Catch `{exc}` around the body of `{fname}`; the handler {what}."])
    return code_edit("wrap_try", instr, src, after)


def _blocks(fn):
    for n in ast.walk(fn):
        for field in ("body", "orelse", "finalbody"):
            block = getattr(n, field, None)
            if isinstance(block, list) and block and isinstance(block[0], ast.stmt):
                yield block


def _one_line(src, node):
    s = ast.get_source_segment(src, node)
    return s if s is not None and "\n" not in s else None


def edit_loop_to_comprehension(src, tree, rng, fname):
    fn = _fn(tree)
    lines = src.splitlines(keepends=True)
    cands = []
    for block in _blocks(fn):
        for a, f in zip(block, block[1:]):
            if not (isinstance(a, ast.Assign) and len(a.targets) == 1 and isinstance(a.targets[0], ast.Name)
                    and isinstance(a.value, ast.List) and not a.value.elts and isinstance(f, ast.For) and not f.orelse
                    and len(f.body) == 1 and a.lineno == a.end_lineno):
                continue
            var = a.targets[0].id
            inner, cond = f.body[0], None
            if isinstance(inner, ast.If) and not inner.orelse and len(inner.body) == 1:
                cond, inner = inner.test, inner.body[0]
            if not (isinstance(inner, ast.Expr) and isinstance(inner.value, ast.Call)
                    and isinstance(inner.value.func, ast.Attribute) and inner.value.func.attr == "append"
                    and isinstance(inner.value.func.value, ast.Name) and inner.value.func.value.id == var
                    and len(inner.value.args) == 1 and not inner.value.keywords):
                continue
            parts = [_one_line(src, inner.value.args[0]), _one_line(src, f.target), _one_line(src, f.iter)]
            if cond is not None:
                parts.append(_one_line(src, cond))
            if any(p is None for p in parts) or isinstance(f, ast.AsyncFor):
                continue
            if lines[f.end_lineno - 1].rstrip("\n")[f.body[0].end_col_offset if cond is None else inner.end_col_offset:].strip():
                continue
            cands.append((a, f, var, parts))
    c = _pick(rng, cands)
    if c is None:
        return None
    a, f, var, parts = c
    ind = _indent_of(lines, a)
    comp = f"{parts[0]} for {parts[1]} in {parts[2]}" + (f" if {parts[3]}" if len(parts) == 4 else "")
    new = f"{ind}{var} = [{comp}]\n"
    if len(new) > 100:
        return None
    after = "".join(lines[:a.lineno - 1] + [new] + lines[f.end_lineno:])
    if not _parses(after):
        return None
    instr = _pick(rng, [f"Convert the loop that builds `{var}` into a list comprehension.",
                        f"Replace the for loop appending to `{var}` with a list comprehension."])
    return code_edit("loop_to_comprehension", instr, src, after)


def edit_comprehension_to_loop(src, tree, rng, fname):
    fn = _fn(tree)
    lines = src.splitlines(keepends=True)
    cands = []
    for block in _blocks(fn):
        for s in block:
            if not (isinstance(s, ast.Assign) and len(s.targets) == 1 and isinstance(s.targets[0], ast.Name)
                    and isinstance(s.value, ast.ListComp) and len(s.value.generators) == 1 and s.lineno == s.end_lineno):
                continue
            g = s.value.generators[0]
            if g.is_async or len(g.ifs) > 1:
                continue
            parts = [_one_line(src, s.value.elt), _one_line(src, g.target), _one_line(src, g.iter)]
            if g.ifs:
                parts.append(_one_line(src, g.ifs[0]))
            if any(p is None for p in parts):
                continue
            if lines[s.lineno - 1][:s.col_offset].strip() or lines[s.lineno - 1].rstrip("\n")[s.end_col_offset:].strip():
                continue
            cands.append((s, parts))
    c = _pick(rng, cands)
    if c is None:
        return None
    s, parts = c
    var = s.targets[0].id
    ind = _indent_of(lines, s)
    u = "    "
    new = [f"{ind}{var} = []\n", f"{ind}for {parts[1]} in {parts[2]}:\n"]
    if len(parts) == 4:
        new += [f"{ind}{u}if {parts[3]}:\n", f"{ind}{u}{u}{var}.append({parts[0]})\n"]
    else:
        new += [f"{ind}{u}{var}.append({parts[0]})\n"]
    after = "".join(lines[:s.lineno - 1] + new + lines[s.lineno:])
    if not _parses(after):
        return None
    instr = _pick(rng, [f"Rewrite the list comprehension assigned to `{var}` as a for loop.",
                        f"Expand the comprehension that builds `{var}` into an explicit loop with append."])
    return code_edit("comprehension_to_loop", instr, src, after)


EDIT_FUNCS = {k: globals()["edit_" + k] for k in EDIT_KINDS}


def _parses(s: str) -> bool:
    try:
        t = ast.parse(s)
    except SyntaxError:
        return False
    return len(t.body) == 1


def _same_ast(after: str, want) -> bool:
    try:
        got = ast.parse(after)
    except SyntaxError:
        return False
    return ast.dump(_strip_pos(got)) == ast.dump(_strip_pos(copy.deepcopy(want)))


def edits_for_function(fn: function_snippet, rng: random.Random, kinds=EDIT_KINDS) -> list[code_edit]:
    """one candidate edit of every applicable kind (in EDIT_KINDS order)"""
    tree = ast.parse(fn.source)
    out = []
    for k in kinds:
        try:
            e = EDIT_FUNCS[k](fn.source, tree, rng, fn.name)
        except (ValueError, IndexError, AttributeError, TypeError, RecursionError):
            e = None
        if e is not None and e.after != e.before:
            e.path, e.qualname = fn.path, fn.qualname
            out.append(e)
    return out


def lines_new(before: str, after: str) -> list[int]:
    """indices of the lines of `after` that are not in `before` (EfficientEdit's G: the edit content),
    by a line diff (difflib): inserted and replacing lines"""
    import difflib
    a, b = before.splitlines(keepends=True), after.splitlines(keepends=True)
    out = []
    for tag, i0, i1, j0, j1 in difflib.SequenceMatcher(a=a, b=b, autojunk=False).get_opcodes():
        if tag in ("replace", "insert"):
            out.extend(range(j0, j1))
    return out


if __name__ == "__main__":
    import sys
    src = open(sys.argv[1]).read()
    rng = random.Random(1)
    for f in functions_extract(src, sys.argv[1])[:int(sys.argv[2]) if len(sys.argv) > 2 else 5]:
        for e in edits_for_function(f, rng):
            print("=" * 60, e.kind, "|", e.instruction)
            import difflib
            sys.stdout.writelines(difflib.unified_diff(e.before.splitlines(True), e.after.splitlines(True), n=1))
