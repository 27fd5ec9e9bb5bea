#!/usr/bin/env python3
"""Cold fast-apply tasks on real files of about 1k, 3k and 8k tokens (issue 59), in CanItEdit's normalized
fields for `editspec bench --task apply` (the snippet is made from code_before -> code_after by the bench).

    python3 bench/apply-sizes.py --out sizes.jsonl [--root PYTHON_LIB] [--seed 59] [--functions 4]

Files: modules of the CPython standard library that the shipped models never trained on (the pipeline's
held-out groups), cut at a top-level statement so the file is about the size named (3.1 bytes per token,
DeepSeek-Coder's tokenizer on Python); --functions of their functions, spread over the file, changed by the
training pipeline's synthetic edits (tools/train/edits.py: a docstring, a parameter, a validation, a renamed
variable, ...). The bench reports each item's real prompt tokens.

    editspec bench -m ds13.gguf --dataset sizes.jsonl --task apply --replay --no-ar --methods auto \\
        --apply-view file|windows|none -c 20480 -t 2 --out OUT
"""
from __future__ import annotations

import argparse
import ast
import json
import os
import random
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "tools", "train"))
import applies  # noqa: E402

BYTES_PER_TOKEN = 3.1
# (name, module, tokens): held-out modules (tools/train: whole module groups held out of training)
FILES = [("1k-sitebuiltins", "_sitebuiltins.py", 1000), ("1k-signal", "signal.py", 1000),
         ("3k-base64", "base64.py", 3000), ("3k-ctypes", "ctypes/__init__.py", 3000),
         ("8k-xmlrpc-client", "xmlrpc/client.py", 8000)]


def cut(src: str, n_bytes: int) -> str:
    """the file up to the last top-level statement that ends within n_bytes (all of it when shorter)"""
    if len(src.encode()) <= n_bytes:
        return src
    lines = src.splitlines(keepends=True)
    end = 0
    for node in ast.parse(src).body:
        if len("".join(lines[:node.end_lineno]).encode()) > n_bytes:
            break
        end = node.end_lineno
    return "".join(lines[:end])


def task(name: str, src: str, rng: random.Random, n_fns: int) -> dict | None:
    lines, fns = applies.file_parse(src)
    if len(fns) < n_fns:
        return None
    # functions spread over the file: one from each of n_fns equal parts
    step = len(fns) / n_fns
    picked = [fns[int(k * step + rng.random() * step)] for k in range(n_fns)]
    new, kinds, instr = {}, [], []
    for f in picked:
        ed = applies._edit_of(f, name, rng)
        if ed is None:
            continue
        new[f.start] = (applies._indent(ed.after, f.col), f)
        kinds.append(ed.kind)
        instr.append(ed.instruction)
    if not new:
        return None
    after, i = [], 0
    for start in sorted(new):
        rep, f = new[start]
        after += lines[i:f.start] + rep
        i = f.end
    after += lines[i:]
    return {"id": name, "code_before": src, "code_after": "".join(after), "instruction_descriptive": " ".join(instr),
            "instruction_lazy": "", "tests": "", "change_kind": "+".join(kinds)}


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", required=True)
    ap.add_argument("--root", default="/root/.pyenv/versions/3.11.7/lib/python3.11", help="CPython 3.11's Lib")
    ap.add_argument("--seed", type=int, default=59)
    ap.add_argument("--functions", type=int, default=4, help="functions changed per file")
    a = ap.parse_args()
    rows = []
    for name, module, tokens in FILES:
        path = os.path.join(a.root, module)
        if not os.path.exists(path):
            sys.exit(f"apply-sizes: {path} not found (--root: CPython 3.11's Lib folder)")
        src = cut(open(path, encoding="utf-8").read(), int(tokens * BYTES_PER_TOKEN))
        rng = random.Random(f"{a.seed}-{name}")
        for _ in range(20):
            t = task(name, src, rng, a.functions)
            if t and t["code_after"] != t["code_before"]:
                rows.append(t)
                break
        else:
            sys.exit(f"apply-sizes: no change drawn for {module}")
        print(f"{name}: {len(src.encode())} bytes, {t['change_kind']}", file=sys.stderr)
    with open(a.out, "w") as f:
        for r in rows:
            f.write(json.dumps(r) + "\n")


if __name__ == "__main__":
    main()
