#!/usr/bin/env python3
"""Refuse an include that runs up (or across) editspec's layers.

The layers, what each may use, and which src/ folders and include/editspec/ headers belong to each
are in src/layers.txt (CMakeLists.txt reads the same table). Every #include "..." in src/ and
include/ that names an editspec file (include/editspec/X.h, or a file of src/ such as
"server-slots.h" or "cli/commands.h") must name one of the including file's own layer or of a layer
it uses, directly or through the layers below. Includes of other projects (llama.h, httplib.h) are
not checked. A header or src/ folder that no row names is an error too, so a new one must be placed.

    scripts/check-layers.py                 check this checkout (exit 1 on a violation)
    scripts/check-layers.py --root DIR      check another tree (a copy with a planted include)
    scripts/check-layers.py --list          print each layer with what it may include
    scripts/check-layers.py --self-test     plant two upward includes in a copy and show they are refused
"""
import argparse
import os
import re
import shutil
import subprocess
import sys
import tempfile

INCLUDE = re.compile(r'^\s*#\s*include\s*"([^"]+)"')


def read_table(path):
    """[(layer, [uses], [folders], [headers])] in file order, bottom to top."""
    rows = []
    with open(path, encoding="utf-8") as f:
        for n, line in enumerate(f, 1):
            line = line.split("#", 1)[0].strip()
            if not line:
                continue
            cells = [c.strip() for c in line.split("|")]
            if len(cells) != 4:
                sys.exit(f"{path}:{n}: want 4 cells 'layer | uses | folders | headers', got {len(cells)}")
            words = [[w for w in c.split() if w != "-"] for c in cells[1:]]
            rows.append((cells[0], *words))
    return rows


def closure(rows, table_path):
    """layer -> the set of layers its files may include (itself and everything below it)."""
    order = {name: i for i, (name, *_rest) in enumerate(rows)}
    allowed = {}
    for name, uses, _folders, _headers in rows:
        s = {name}
        for u in uses:
            if u not in order:
                sys.exit(f"{table_path}: layer '{name}' uses '{u}', which has no row")
            if order[u] >= order[name]:
                sys.exit(f"{table_path}: layer '{name}' uses '{u}', which is not below it")
            s |= allowed[u]
        allowed[name] = s
    return allowed


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--root", default=os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."),
                    help="the checkout to check (default: this script's)")
    ap.add_argument("--list", action="store_true", help="print the layers and what each may include")
    ap.add_argument("--self-test", action="store_true",
                    help="copy src/ and include/ to a temporary folder, plant an upward include in a header "
                         "(datastore.h -> server.h) and in a source (draft/lookup.cpp -> verify.h), and "
                         "pass only when the check refuses exactly those two")
    a = ap.parse_args()
    root = os.path.abspath(a.root)
    if a.self_test:
        return self_test(root)
    table_path = os.path.join(root, "src", "layers.txt")
    rows = read_table(table_path)
    allowed = closure(rows, table_path)
    order = {name: i for i, (name, *_rest) in enumerate(rows)}
    if a.list:
        for name, *_rest in rows:
            below = sorted(allowed[name] - {name}, key=order.get)
            print(f"{name:11} may include: {' '.join(below) or '(nothing but itself)'}")
        return 0

    errors = []
    header_layer, folder_layer = {}, {}
    for name, _uses, folders, headers in rows:
        for h in headers:
            if h in header_layer:
                errors.append(f"src/layers.txt: header {h} in two layers ({header_layer[h]}, {name})")
            header_layer[h] = name
        for d in folders:
            folder_layer[d] = name

    inc_dir = os.path.join(root, "include", "editspec")
    src_dir = os.path.join(root, "src")
    files = []  # (path relative to root, layer)
    for h in sorted(os.listdir(inc_dir)):
        if not h.endswith((".h", ".hpp")):
            continue
        if h not in header_layer:
            errors.append(f"include/editspec/{h}: in no layer (give it a row's headers cell in src/layers.txt)")
            continue
        files.append((f"include/editspec/{h}", header_layer[h]))
    for h in header_layer:
        if not os.path.exists(os.path.join(inc_dir, h)):
            errors.append(f"src/layers.txt: header {h} (layer {header_layer[h]}) does not exist")
    for d in sorted(os.listdir(src_dir)):
        if not os.path.isdir(os.path.join(src_dir, d)):
            continue
        if d not in folder_layer:
            errors.append(f"src/{d}/: in no layer (give it a row's folders cell in src/layers.txt)")
            continue
        for dirpath, _dirs, names in os.walk(os.path.join(src_dir, d)):
            for n in sorted(names):
                if n.endswith((".h", ".hpp", ".cpp", ".c", ".cc")):
                    files.append((os.path.relpath(os.path.join(dirpath, n), root), folder_layer[d]))

    def layer_of_include(including, inc):
        """(layer, what it names) of an include, or None for another project's header."""
        if inc.startswith("editspec/"):
            h = inc[len("editspec/"):]
            return (header_layer.get(h, "?"), f"include/editspec/{h}")
        for base in (os.path.dirname(os.path.join(root, including)), src_dir):
            p = os.path.normpath(os.path.join(base, inc))
            if os.path.isfile(p) and p.startswith(src_dir + os.sep):
                folder = os.path.relpath(p, src_dir).split(os.sep)[0]
                return (folder_layer.get(folder, "?"), os.path.relpath(p, root))
        return None

    checked = 0
    for rel, layer in files:
        with open(os.path.join(root, rel), encoding="utf-8", errors="replace") as f:
            for n, line in enumerate(f, 1):
                m = INCLUDE.match(line)
                if not m:
                    continue
                got = layer_of_include(rel, m.group(1))
                if got is None:
                    continue
                checked += 1
                inc_layer, target = got
                if inc_layer == "?":
                    errors.append(f'{rel}:{n}: #include "{m.group(1)}": {target} is in no layer of src/layers.txt')
                elif inc_layer not in allowed[layer]:
                    way = "upward" if order[inc_layer] > order[layer] else "sideways"
                    errors.append(f'{rel}:{n}: #include "{m.group(1)}" runs {way}: {rel} is in layer {layer}, '
                                  f'{target} in layer {inc_layer} ({layer} may include: '
                                  f'{" ".join(sorted(allowed[layer], key=order.get))})')
    for e in errors:
        print(f"check-layers: {e}", file=sys.stderr)
    if errors:
        print(f"check-layers: {len(errors)} violation(s) of src/layers.txt", file=sys.stderr)
        return 1
    print(f"check-layers: {len(files)} files, {checked} editspec includes, {len(rows)} layers: none runs upward")
    return 0


PLANTS = [("include/editspec/datastore.h", '#include "editspec/server.h"', "upward"),
          ("src/draft/lookup.cpp", '#include "editspec/verify.h"', "upward")]


def self_test(root):
    with tempfile.TemporaryDirectory(prefix="check-layers-") as tmp:
        for d in ("src", "include"):
            shutil.copytree(os.path.join(root, d), os.path.join(tmp, d))
        for rel, line, _way in PLANTS:
            with open(os.path.join(tmp, rel), "a", encoding="utf-8") as f:
                f.write(line + "  // planted by check-layers.py --self-test\n")
        r = subprocess.run([sys.executable, os.path.abspath(__file__), "--root", tmp],
                           capture_output=True, text=True)
    print(f"self-test: planted {len(PLANTS)} upward includes; the check said (exit {r.returncode}):")
    print(r.stdout + r.stderr, end="")
    lines = [l for l in r.stderr.splitlines() if l.startswith("check-layers: ") and ": #include " in l]
    ok = r.returncode == 1 and len(lines) == len(PLANTS)
    for rel, line, way in PLANTS:
        inc = line.split('"')[1]
        ok = ok and any(l.startswith(f"check-layers: {rel}:") and f'"{inc}" runs {way}' in l for l in lines)
    print("self-test: " + ("passed: both refused, nothing else" if ok else "FAILED: the planted includes were not refused as expected"))
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
