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


def pick_window(lines, rng, max_chars):
    """(L, the lines before line L up to max_chars) for a random code line L (the target), or (L, None)"""
    L = rng.randrange(8, len(lines))
    if not code_line(lines[L]):
        return L, None
    s = L
    size = 0
    while s > 0 and size + len(lines[s - 1]) <= max_chars:
        s -= 1
        size += len(lines[s])
    return L, lines[s:L]


def make_task(lines, rng, kind, max_chars):
    """(document before the edits, edits, target line) or None"""
    # the target: a code line with a window of preceding lines up to max_chars
    for _ in range(20):
        L, window = pick_window(lines, rng, max_chars)
        if window is None:
            continue
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
            offset = sum(len(x.encode()) for x in cur[:idx])
            if k == "ins":
                edits.append({"op": "edit", "offset": offset, "delete": 0, "insert": text})
                cur.insert(idx, text)
            else:
                assert cur[idx] == text
                edits.append({"op": "edit", "offset": offset, "delete": len(text.encode()), "insert": ""})
                del cur[idx]
        assert "".join(cur) == "".join(window), "edit script does not rebuild the window"
        return doc, edits, lines[L].strip()
    return None


def make_long_session(lines, rng, n_edits, max_chars):
    """(document, edits, target line, clean) for one long editing session: a window of a file that ends
    before a code line (the target); n_edits line edits at random places above its last 3 lines, each
    either a change (a code line deleted, or another line of the file inserted) or the undo of a random
    earlier pending change (at most 4 pending); clean[k] is True when after edit k the document is the
    true window again (the target is then the true next line). None when the file does not give one."""
    for _ in range(20):
        L, window = pick_window(lines, rng, max_chars)
        if window is None:
            continue
        if sum(code_line(x) for x in window[:-3]) < 6:
            continue
        entries = [("orig", i, window[i]) for i in range(len(window))]
        pending = []
        edits, clean = [], []
        n_extra = 0
        for _k in range(n_edits):
            if pending and (len(pending) >= 4 or rng.random() < 0.5):
                p = pending.pop(rng.randrange(len(pending)))
                if p[0] == "del":   # put the original line back before the next original line
                    i = p[1]
                    at = next((j for j, e in enumerate(entries) if e[0] == "orig" and e[1] > i), len(entries))
                    off = sum(len(e[2].encode()) for e in entries[:at])
                    edits.append({"op": "edit", "offset": off, "delete": 0, "insert": window[i]})
                    entries.insert(at, ("orig", i, window[i]))
                else:               # take the inserted line out
                    at = next(j for j, e in enumerate(entries) if e[0] == "extra" and e[1] == p[1])
                    off = sum(len(e[2].encode()) for e in entries[:at])
                    edits.append({"op": "edit", "offset": off, "delete": len(entries[at][2].encode()), "insert": ""})
                    del entries[at]
            else:
                limit = len(entries) - 3
                if rng.random() < 0.5:
                    cand = [j for j, e in enumerate(entries[:limit]) if e[0] == "orig" and code_line(e[2]) and j > 0]
                    if not cand:
                        continue
                    at = rng.choice(cand)
                    off = sum(len(e[2].encode()) for e in entries[:at])
                    edits.append({"op": "edit", "offset": off, "delete": len(entries[at][2].encode()), "insert": ""})
                    pending.append(("del", entries[at][1]))
                    del entries[at]
                else:
                    at = rng.randrange(1, limit)
                    other = rng.choice(lines).strip()
                    if not other:
                        other = "pass"
                    nxt = entries[at][2]
                    text = " " * (len(nxt) - len(nxt.lstrip(" "))) + other + "\n"
                    off = sum(len(e[2].encode()) for e in entries[:at])
                    edits.append({"op": "edit", "offset": off, "delete": 0, "insert": text})
                    n_extra += 1
                    entries.insert(at, ("extra", n_extra, text))
                    pending.append(("ins", n_extra))
            clean.append(not pending)
        assert not clean[-1] or "".join(e[2] for e in entries) == "".join(window)
        return "".join(window), edits, lines[L].strip(), clean
    return None


def write_script(out_dir, name, docs, every_edit):
    """an `editspec session` script: each doc opened, its edits, a completion after every edit or after
    the last; returns its path"""
    os.makedirs(out_dir, exist_ok=True)
    path = os.path.join(out_dir, name)
    with open(path, "w") as f:
        for t in docs:
            f.write(json.dumps({"op": "open", "text": t["doc"]}) + "\n")
            for e in t["edits"]:
                f.write(json.dumps(e) + "\n")
                if every_edit:
                    f.write(json.dumps({"op": "complete", "n": 64}) + "\n")
            if not every_edit:
                f.write(json.dumps({"op": "complete", "n": 64}) + "\n")
    return path


def long_sessions(a, texts, rng):
    """--session-edits: a few long sessions, a completion after every edit; each strategy (and PIE with
    each drift threshold) against recompute's prediction at the same step"""
    sessions = []
    while len(sessions) < a.sessions:
        t = make_long_session(rng.choice(texts), rng, a.session_edits, a.max_chars)
        if t is not None:
            sessions.append({"doc": t[0], "edits": t[1], "target": t[2], "clean": t[3]})
    script = write_script(a.out, "session-script.jsonl", sessions, every_edit=True)
    runs = [("recompute", -1), ("conflict", -1), ("pie", -1)] + [("pie", int(d)) for d in a.drift_list.split(",") if d]
    res = {}
    for strategy, dmax in runs:
        name = strategy if dmax < 0 else f"pie drift>{dmax}"
        print(f"pie-bench: {name}: {len(sessions)} sessions of {a.session_edits} edits", file=sys.stderr, flush=True)
        t0 = time.time()
        out = subprocess.run([a.editspec, "session", script, "-m", a.model, "--strategy", strategy, "-t", str(a.threads),
                              "--drift-max", str(dmax)], check=True, capture_output=True, text=True).stdout
        ops = [json.loads(x) for x in out.splitlines() if x.strip()]
        ed = [o for o in ops if o["op"] == "edit"]
        res[name] = {"preds": [o["line"] for o in ops if o["op"] == "complete"],
                     "stale": [o["stale"] for o in ed], "refreshed": sum(o["refreshed"] for o in ed),
                     "encoded": sum(o["encoded"] for o in ed), "kv_ms": sum(o["kv_ms"] for o in ed),
                     "fallbacks": sum(1 for o in ed if o.get("fallback")), "seconds": time.time() - t0}
    ref = res["recompute"]["preds"]
    targets = [t["target"] for t in sessions for _ in t["edits"]]
    clean = [c for t in sessions for c in t["clean"]]
    rows = []
    for name, r in res.items():
        p = r["preds"]
        n_clean = sum(clean)
        rows.append({"strategy": name, "completions": len(p),
                     "same_as_recompute": 100.0 * sum(x == y for x, y in zip(p, ref)) / len(p),
                     "em_clean": 100.0 * sum(p[i] == targets[i] for i in range(len(p)) if clean[i]) / max(1, n_clean),
                     "clean_points": n_clean, "stale_mean": sum(r["stale"]) / len(r["stale"]), "stale_max": max(r["stale"]),
                     "tokens_encoded": r["encoded"], "tokens_refreshed": r["refreshed"], "kv_ms": r["kv_ms"],
                     "fallbacks": r["fallbacks"]})
    json.dump({"model": os.path.abspath(a.model), "seed": a.seed, "max_chars": a.max_chars, "sessions": sessions,
               "rows": rows, "preds": {k: v["preds"] for k, v in res.items()}},
              open(os.path.join(a.out, "session-results.json"), "w"), indent=1)
    print(f"| strategy | completions | same line as recompute | EM at clean points ({rows[0]['clean_points']}) "
          "| stale tokens mean / max | tokens encoded + refreshed | KV ms (edits) |")
    print("| --- | ---: | ---: | ---: | ---: | ---: | ---: |")
    for r in rows:
        print(f"| {r['strategy']} | {r['completions']} | {r['same_as_recompute']:.1f} % | {r['em_clean']:.1f} % "
              f"| {r['stale_mean']:.0f} / {r['stale_max']} | {r['tokens_encoded']} + {r['tokens_refreshed']} | {r['kv_ms']:.0f} |")


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("-m", "--model", required=True)
    ap.add_argument("--files", nargs="+", required=True, help="Python files to draw tasks from")
    ap.add_argument("--tasks", type=int, default=60, help="tasks per kind")
    ap.add_argument("--max-chars", type=int, default=1200, help="window size (the shipped models: 512 tokens)")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("-t", "--threads", type=int, default=2)
    ap.add_argument("--drift-max", type=int, default=-1, help="PIE and conflict: re-encode stale tokens past this many (-1: never)")
    ap.add_argument("--session-edits", type=int, default=0,
                    help="instead of the tasks: --sessions long sessions of this many edits, a completion after each")
    ap.add_argument("--sessions", type=int, default=4)
    ap.add_argument("--drift-list", default="32,128", help="with --session-edits: PIE's drift thresholds to compare")
    ap.add_argument("--editspec", default=os.path.join(os.path.dirname(__file__), "..", "build", "bin", "editspec"))
    ap.add_argument("--out", required=True)
    a = ap.parse_args()
    rng = random.Random(a.seed)
    files = sorted(f for f in a.files if f.endswith(".py"))
    texts = [open(f, encoding="utf-8", errors="replace").read().splitlines(keepends=True) for f in files]
    texts = [t for t in texts if len(t) > 30]
    if not texts:
        sys.exit("pie-bench: no file of 30 lines or more")
    if a.session_edits > 0:
        long_sessions(a, texts, rng)
        return
    tasks = []
    for kind in ("insertion", "deletion", "multi"):
        n = 0
        while n < a.tasks:
            t = make_task(rng.choice(texts), rng, kind, a.max_chars)
            if t is None:
                continue
            tasks.append({"kind": kind, "doc": t[0], "edits": t[1], "target": t[2]})
            n += 1
    script = write_script(a.out, "script.jsonl", tasks, every_edit=False)
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
