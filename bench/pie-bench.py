#!/usr/bin/env python3
"""PIE's Tables 2-4 on real code (issue 24): after an edit, predict the next line with each KV
strategy (recompute, conflict fast encoding, PIE) and compare with the file's true next line.

Tasks, from Python files no one here wrote (a Debian-packaged library, held-out standard-library
modules): a window of a file that ends just before a code line (the target), at most --max-chars;
  insertion  the window lacks one of its code lines; the edit inserts it back
  deletion   the window holds one extra line (another line of the file, at the same indentation);
             the edit deletes it
  multi      three such edits (two insertions, one deletion) at different places
After the edits every strategy's document is the true window; recompute's KV is exact, conflict's
and PIE's keep the later tokens' old KV. Reports exact match and edit similarity of the predicted
line per task and strategy, and the KV-update time per edit.

    python3 bench/pie-bench.py -m models/editspec-target.gguf --files /usr/lib/python3/dist-packages/click/*.py \\
        --tasks 60 --out build/pie-bench
"""
import argparse
import difflib
import json
import os
import random
import subprocess
import sys
import time

STRATEGIES = ["recompute", "conflict", "pie"]


def code_line(s: str) -> bool:
    t = s.strip()
    return bool(t) and not t.startswith("#")


def make_task(lines, rng, kind, max_chars):
    """(document before the edits, edits, target line) or None"""
    # the target: a code line with a window of preceding lines up to max_chars
    for _ in range(20):
        L = rng.randrange(8, len(lines))
        if not code_line(lines[L]):
            continue
        s = L
        size = 0
        while s > 0 and size + len(lines[s - 1]) <= max_chars:
            s -= 1
            size += len(lines[s])
        window = lines[s:L]
        cand = [i for i in range(1, len(window) - 1) if code_line(window[i])]
        if len(cand) < 4:
            continue
        n_ins, n_del = {"insertion": (1, 0), "deletion": (0, 1), "multi": (2, 1)}[kind]
        picks = sorted(rng.sample(cand, n_ins + n_del))
        # edits planned on the true window, top to bottom; the document before them is built by
        # undoing each (an insertion: the line is missing; a deletion: an extra line is there)
        ops = []
        kinds = ["ins"] * n_ins + ["del"] * n_del
        rng.shuffle(kinds)
        for i, k in zip(picks, kinds):
            if k == "ins":
                ops.append(("ins", i, window[i]))
            else:
                other = lines[rng.randrange(len(lines))]
                ind = len(window[i]) - len(window[i].lstrip(" "))
                extra = " " * ind + other.strip() + "\n"
                if not other.strip() or extra == window[i]:
                    return None
                ops.append(("del", i, extra))
        before = []
        for i, ln in enumerate(window):
            for k, j, text in ops:
                if j == i and k == "del":
                    before.append(text)
            if not any(j == i and k == "ins" for k, j, _ in ops):
                before.append(ln)
        # the edits in document order, on the evolving document: offsets in bytes
        doc = "".join(before)
        edits = []
        cur = list(before)
        for k, j, text in ops:
            # the earlier ops ran, so cur[:j] is window[:j]: line j's place is index j
            idx = j
            offset = sum(len(x) for x in cur[:idx])
            if k == "ins":
                edits.append({"op": "edit", "offset": offset, "delete": 0, "insert": text})
                cur.insert(idx, text)
            else:
                assert cur[idx] == text
                edits.append({"op": "edit", "offset": offset, "delete": len(text), "insert": ""})
                del cur[idx]
        assert "".join(cur) == "".join(window), "edit script does not rebuild the window"
        return doc, edits, lines[L].strip()
    return None


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("-m", "--model", required=True)
    ap.add_argument("--files", nargs="+", required=True, help="Python files to draw tasks from")
    ap.add_argument("--tasks", type=int, default=60, help="tasks per kind")
    ap.add_argument("--max-chars", type=int, default=1200, help="window size (the shipped models: 512 tokens)")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("-t", "--threads", type=int, default=2)
    ap.add_argument("--drift-max", type=int, default=-1)
    ap.add_argument("--editspec", default=os.path.join(os.path.dirname(__file__), "..", "build", "bin", "editspec"))
    ap.add_argument("--out", required=True)
    a = ap.parse_args()
    rng = random.Random(a.seed)
    files = sorted(f for f in a.files if f.endswith(".py"))
    texts = [open(f, encoding="utf-8", errors="replace").read().splitlines(keepends=True) for f in files]
    texts = [t for t in texts if len(t) > 30]
    if not texts:
        sys.exit("pie-bench: no file of 30 lines or more")
    tasks = []
    for kind in ("insertion", "deletion", "multi"):
        n = 0
        while n < a.tasks:
            t = make_task(rng.choice(texts), rng, kind, a.max_chars)
            if t is None:
                continue
            tasks.append({"kind": kind, "doc": t[0], "edits": t[1], "target": t[2]})
            n += 1
    os.makedirs(a.out, exist_ok=True)
    script = os.path.join(a.out, "script.jsonl")
    with open(script, "w") as f:
        for t in tasks:
            f.write(json.dumps({"op": "open", "text": t["doc"]}) + "\n")
            for e in t["edits"]:
                f.write(json.dumps(e) + "\n")
            f.write(json.dumps({"op": "complete", "n": 64}) + "\n")
    results = {}
    for s in STRATEGIES:
        t0 = time.time()
        print(f"pie-bench: {s} on {len(tasks)} tasks", file=sys.stderr, flush=True)
        out = subprocess.run([a.editspec, "session", script, "-m", a.model, "--strategy", s, "-t", str(a.threads),
                              "--drift-max", str(a.drift_max)], check=True, capture_output=True, text=True).stdout
        ops = [json.loads(x) for x in out.splitlines() if x.strip()]
        preds = [o["line"] for o in ops if o["op"] == "complete"]
        kv = [o["kv_ms"] for o in ops if o["op"] == "edit"]
        fallbacks = sum(1 for o in ops if o["op"] == "edit" and o.get("fallback"))
        assert len(preds) == len(tasks)
        results[s] = {"preds": preds, "kv_ms": kv, "fallbacks": fallbacks, "seconds": time.time() - t0}
    rows = []
    for kind in ("insertion", "deletion", "multi"):
        idx = [i for i, t in enumerate(tasks) if t["kind"] == kind]
        row = {"kind": kind, "tasks": len(idx)}
        for s in STRATEGIES:
            p = results[s]["preds"]
            row[s + "_em"] = 100.0 * sum(p[i] == tasks[i]["target"] for i in idx) / len(idx)
            row[s + "_es"] = 100.0 * sum(difflib.SequenceMatcher(a=p[i], b=tasks[i]["target"]).ratio() for i in idx) / len(idx)
            row[s + "_same_as_recompute"] = 100.0 * sum(p[i] == results["recompute"]["preds"][i] for i in idx) / len(idx)
        rows.append(row)
    kv = {s: sum(results[s]["kv_ms"]) / max(1, len(results[s]["kv_ms"])) for s in STRATEGIES}
    json.dump({"model": os.path.abspath(a.model), "files": len(files), "seed": a.seed, "max_chars": a.max_chars,
               "drift_max": a.drift_max, "rows": rows, "kv_ms_mean": kv, "tasks": tasks,
               "preds": {s: results[s]["preds"] for s in STRATEGIES}}, open(os.path.join(a.out, "results.json"), "w"), indent=1)
    print("| task | n | " + " | ".join(f"{s} EM / ES" for s in STRATEGIES) + " | conflict, PIE = recompute |")
    print("| --- | ---: | " + " | ".join("---:" for _ in STRATEGIES) + " | ---: |")
    for r in rows:
        print(f"| {r['kind']} | {r['tasks']} | " + " | ".join(f"{r[s + '_em']:.1f} / {r[s + '_es']:.1f}" for s in STRATEGIES) +
              f" | {r['conflict_same_as_recompute']:.0f} % , {r['pie_same_as_recompute']:.0f} % |")
    print("mean KV update per edit (ms): " + ", ".join(f"{s} {kv[s]:.1f}" for s in STRATEGIES))
    print("edits recomputed instead (fallback): " + ", ".join(f"{s} {results[s]['fallbacks']}" for s in STRATEGIES))


if __name__ == "__main__":
    main()
