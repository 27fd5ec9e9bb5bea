"""Training corpus: the Python standard library sources on this machine, split by whole files.

    files = corpus_collect(root)                 # [corpus_file], sorted by path, filtered
    split = corpus_split(files, seed, frac)      # {"train": [...], "heldout": [...]}: whole groups held out

Source: one CPython standard library tree (default: pyenv's 3.11.7, which also ships Lib/test; Debian's
/usr/lib/python3.11 is the same library at 3.11.2, so it is NOT added: near-duplicate files would leak
across the split). Licence: the Python Software Foundation License Version 2 (the tree's LICENSE.txt;
it also lists the permissive licences of incorporated components), recorded in the manifest and the
model card.

Evaluation data is never training data: the project's datasets/ (CanItEdit's licence forbids training on
it; HumanEval, EditEval and MT-Redundant are test sets) is refused as a corpus root (corpus_collect).

Filters: UTF-8, parses with ast, 200 B .. 256 KB, not a data table (encodings/ codec tables, the
pydoc topics dump, generated _sysconfigdata), no site-packages.

Split: files are grouped by module (json/decoder.py and test/test_json/* are both group "json") and whole
groups are held out, chosen by a seeded hash until `frac` of the bytes are held out (groups larger than
2 % of the corpus are never held out, so one package cannot eat the held-out budget). Deterministic for
a seed and a file list.
"""
from __future__ import annotations

import ast
import hashlib
import os
from dataclasses import dataclass

DEFAULT_ROOTS = ["/root/.pyenv/versions/3.11.7/lib/python3.11", "/usr/lib/python3.11"]

EXCLUDE_PREFIXES = ("site-packages/", "dist-packages/", "encodings/", "pydoc_data/", "lib2to3/tests/data/",
                    "test/tokenizedata/", "test/decimaltestdata/", "config-3.11", "lib-dynload/")
EXCLUDE_NAMES = ("_sysconfigdata",)


@dataclass
class corpus_file:
    path: str        # path relative to the root, '/'-separated
    group: str       # split unit
    n_bytes: int
    sha256: str


def corpus_root_default() -> str:
    for r in DEFAULT_ROOTS:
        if os.path.isfile(os.path.join(r, "os.py")):
            return r
    raise FileNotFoundError("no Python standard library found in " + ", ".join(DEFAULT_ROOTS))


def corpus_group(rel: str) -> str:
    """module group of a file: first path component; under test/, the tested module"""
    parts = rel.split("/")
    if parts[0] == "test" and len(parts) > 1:
        name = parts[1]
        if name.endswith(".py"):
            name = name[:-3]
        if name.startswith("test_"):
            name = name[5:]
        return name.split(".")[0] or "test"
    name = parts[0]
    return name[:-3] if name.endswith(".py") else name


DATASETS_DIR = os.path.realpath(os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "datasets"))


def corpus_collect(root: str) -> list[corpus_file]:
    real = os.path.realpath(root)
    if real == DATASETS_DIR or real.startswith(DATASETS_DIR + os.sep) or DATASETS_DIR.startswith(real + os.sep):
        raise ValueError(f"{root}: holds the evaluation datasets (datasets/); they are never trained on")
    out = []
    for dirpath, dirnames, filenames in os.walk(root):
        dirnames.sort()
        for fn in sorted(filenames):
            if not fn.endswith(".py"):
                continue
            full = os.path.join(dirpath, fn)
            rel = os.path.relpath(full, root).replace(os.sep, "/")
            if rel.startswith(EXCLUDE_PREFIXES) or any(x in fn for x in EXCLUDE_NAMES):
                continue
            try:
                raw = open(full, "rb").read()
                if not (200 <= len(raw) <= 256 * 1024):
                    continue
                text = raw.decode("utf-8")
                ast.parse(text)
            except (UnicodeDecodeError, SyntaxError, ValueError, OSError):
                continue
            if "\r" in text or "\t" in text[:4096] and text.count("\n\t") > 10:
                continue  # CRLF files and tab-indented files: rare here, and they would teach odd layouts
            out.append(corpus_file(rel, corpus_group(rel), len(raw), hashlib.sha256(raw).hexdigest()))
    out.sort(key=lambda f: f.path)
    return out


def corpus_split(files: list[corpus_file], seed: int, frac: float = 0.05) -> dict[str, list[corpus_file]]:
    total = sum(f.n_bytes for f in files)
    groups: dict[str, int] = {}
    for f in files:
        groups[f.group] = groups.get(f.group, 0) + f.n_bytes
    order = sorted(groups, key=lambda g: hashlib.sha256(f"{seed}:{g}".encode()).hexdigest())
    held, held_bytes = set(), 0
    for g in order:
        if held_bytes >= frac * total:
            break
        if groups[g] > 0.02 * total:
            continue
        held.add(g)
        held_bytes += groups[g]
    return {"train": [f for f in files if f.group not in held], "heldout": [f for f in files if f.group in held]}


def corpus_read(root: str, f: corpus_file) -> str:
    return open(os.path.join(root, f.path), encoding="utf-8").read()


def corpus_licence(root: str) -> dict:
    lic = os.path.join(root, "LICENSE.txt")
    first = ""
    if os.path.isfile(lic):
        first = open(lic, encoding="utf-8", errors="replace").read()
    version = os.path.basename(os.path.dirname(os.path.dirname(root))) if "pyenv" in root else "debian python3.11"
    return {
        "source": root,
        "version": version,
        "licence": "Python Software Foundation License Version 2 (PSF-2.0); see LICENSE.txt of the tree, which also "
                   "lists the permissive licences of components incorporated in CPython",
        "licence_file_sha256": hashlib.sha256(first.encode()).hexdigest() if first else None,
    }
