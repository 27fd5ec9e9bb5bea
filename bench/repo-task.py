#!/usr/bin/env python3
"""The repository-level completion task of issue 23 (FastCoder / CodeSwift's RepoEval setting),
built from a real code base on this machine that no one here wrote (a Python library from Debian's
packages, e.g. /usr/lib/python3/dist-packages/click):

  for each chosen function: context = its file up to the function's body (the signature and the
  docstring included; the file's beginning cut to --max-context-chars at a line boundary),
  target = the body; D_r = a datastore of the repository without that file; D_c = a datastore of
  another corpus (default: the Python standard library), shared by every item.

Writes OUT/repo-task.jsonl (HumanEval's fields, plus "repo_datastore": the item's D_r, relative to
the file), OUT/repo-*.eds (one per file the items come from), OUT/common.eds and OUT/manifest.json.
Items are ordered by file and line, so a cache carried from item to item (fastcoder's) holds only
code that is in the item's context or its datastores.

    python3 bench/repo-task.py --package /usr/lib/python3/dist-packages/click \\
        -m /work/models-cache/ds13-q8_0.gguf --out build/repo-task
    editspec bench -m ... --dataset build/repo-task/repo-task.jsonl --replay \\
        --datastore build/repo-task/common.eds --methods ar,rest,fastcoder,...
"""
import argparse
import ast
import json
import os
import random
import subprocess
import sys


def functions(path: str, text: str):
    """(name, body_start_line, end_line) of every function whose body, docstring aside, is a few lines"""
    try:
        tree = ast.parse(text, filename=path)
    except (SyntaxError, ValueError):
        return []
    out = []
    for node in ast.walk(tree):
        if not isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            continue
        body = node.body
        if body and isinstance(body[0], ast.Expr) and isinstance(getattr(body[0], "value", None), ast.Constant) \
                and isinstance(body[0].value.value, str):
            body = body[1:]
        if not body:
            continue
        start, end = body[0].lineno, node.end_lineno
        if body[0].col_offset == 0 or start <= node.lineno:   # a one-line def: no body of its own lines
            continue
        out.append((node.name, start, end))
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--package", required=True, help="the code base: a folder of Python files")
    ap.add_argument("-m", "--model", required=True, help="the model whose tokenizer the datastores use")
    ap.add_argument("--out", required=True, help="output folder")
    ap.add_argument("--common", default="/usr/lib/python3.11",
                    help="D_c's corpus: a folder of Python files (default: the standard library)")
    ap.add_argument("--editspec", default=os.path.join(os.path.dirname(__file__), "..", "build", "bin", "editspec"))
    ap.add_argument("--items", type=int, default=16, help="functions drawn (default 16)")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--min-body-lines", type=int, default=3)
    ap.add_argument("--max-body-lines", type=int, default=25)
    ap.add_argument("--max-body-chars", type=int, default=900)
    ap.add_argument("--max-context-chars", type=int, default=3000)
    a = ap.parse_args()

    root = os.path.abspath(a.package)
    if not os.path.isdir(root):
        sys.exit(f"repo-task: --package {root}: not a folder")
    if not os.path.isfile(a.editspec):
        sys.exit(f"repo-task: {a.editspec}: not built (scripts/build.sh)")
    files = sorted(os.path.join(d, f) for d, ds, fs in os.walk(root) for f in fs if f.endswith(".py")
                   and "/." not in d and "__pycache__" not in d)
    if len(files) < 2:
        sys.exit(f"repo-task: {root}: fewer than 2 Python files")
    cands = []
    for path in files:
        text = open(path, encoding="utf-8", errors="replace").read()
        lines = text.splitlines(keepends=True)
        for name, start, end in functions(path, text):
            body = "".join(lines[start - 1:end])
            n = end - start + 1
            if not (a.min_body_lines <= n <= a.max_body_lines) or len(body) > a.max_body_chars:
                continue
            ctx_lines = lines[:start - 1]
            ctx, k = "", len(ctx_lines)
            while k > 0 and len(ctx) + len(ctx_lines[k - 1]) <= a.max_context_chars:
                k -= 1
                ctx = ctx_lines[k] + ctx
            cands.append({"file": path, "name": name, "line": start, "prompt": ctx, "body": body})
    if not cands:
        sys.exit(f"repo-task: {root}: no function fits the limits")
    rng = random.Random(a.seed)
    items = rng.sample(cands, min(a.items, len(cands)))
    items.sort(key=lambda it: (it["file"], it["line"]))
    os.makedirs(a.out, exist_ok=True)

    def index(args, out):
        print(f"repo-task: indexing {out}", file=sys.stderr, flush=True)
        subprocess.run([a.editspec, "index", "-m", a.model, "-q", "--out", out] + args, check=True)

    repo_of = {}
    for path in sorted({it["file"] for it in items}):
        name = f"repo-{len(repo_of):02d}.eds"
        index(["--files"] + [f for f in files if f != path], os.path.join(a.out, name))
        repo_of[path] = name
    if a.common:
        index(["--repo", a.common], os.path.join(a.out, "common.eds"))
    with open(os.path.join(a.out, "repo-task.jsonl"), "w") as f:
        for it in items:
            rel = os.path.relpath(it["file"], root)
            f.write(json.dumps({"id": f"{rel}:{it['line']}:{it['name']}", "prompt": it["prompt"],
                                "canonical_solution": it["body"], "test": "", "entry_point": "",
                                "repo_datastore": repo_of[it["file"]]}) + "\n")
    manifest = {"package": root, "files": len(files), "candidates": len(cands), "items": len(items), "seed": a.seed,
                "common": a.common, "model": os.path.abspath(a.model),
                "limits": {k: getattr(a, k) for k in ("min_body_lines", "max_body_lines", "max_body_chars", "max_context_chars")}}
    json.dump(manifest, open(os.path.join(a.out, "manifest.json"), "w"), indent=1)
    print(f"repo-task: {len(items)} items from {len(repo_of)} files of {root} ({len(cands)} candidates) -> {a.out}",
          file=sys.stderr)


if __name__ == "__main__":
    main()
