#!/usr/bin/env python3
"""Tables of bench/workflow.sh's rows: per configuration and request kind, the prompt tokens encoded,
the prefill (time to the first token but one pass) and the whole request; the ratios the bar asks
for; and, where both ran, which answers of 'pie' differ from 'prefix' (equal answers = no quality cost).

    bench/workflow-report.py rows.jsonl [--skip-first]   # --skip-first: from the second step on
"""
import collections
import json
import statistics
import sys


def main():
    if len(sys.argv) < 2:
        sys.exit(__doc__)
    rows = [json.loads(l) for l in open(sys.argv[1]) if l.strip()]
    skip_first = "--skip-first" in sys.argv
    first_step = min(r["step"] for r in rows)
    if skip_first:
        rows = [r for r in rows if r["step"] > first_step]
    by = collections.defaultdict(list)
    for r in rows:
        by[(r["label"], r["kind"])].append(r)
    labels = list(dict.fromkeys(r["label"] for r in rows))
    kinds = list(dict.fromkeys(r["kind"] for r in rows))
    steps = sorted({r["step"] for r in rows})
    print(f"steps {steps[0]}..{steps[-1]} ({len(steps)}){' (the first step left out)' if skip_first else ''}\n")
    print("| configuration | request | prompt tokens (mean) | encoded (mean) | prefill ms (median) | whole request ms (median) | sum of whole requests, s |")
    print("| --- | --- | ---: | ---: | ---: | ---: | ---: |")
    for lab in labels:
        for k in kinds:
            rs = by.get((lab, k))
            if not rs:
                continue
            print(f"| {lab} | {k} | {statistics.mean(r['prompt_tokens'] for r in rs):.0f} | "
                  f"{statistics.mean(r['encoded'] for r in rs):.0f} | {statistics.median(r['prefill_ms'] for r in rs):.0f} | "
                  f"{statistics.median(r['total_ms'] for r in rs):.0f} | {sum(r['total_ms'] for r in rs) / 1000:.1f} |")
    print()
    # per step: the sum of a step's requests
    # (steps of several histories add up: run the report on one history for per-step figures)
    step_total = collections.defaultdict(float)
    step_prefill = collections.defaultdict(float)
    for r in rows:
        step_total[(r["label"], r["step"])] += r["total_ms"]
        step_prefill[(r["label"], r["step"])] += r["prefill_ms"]
    print("| step | " + " | ".join(f"{lab} total s (prefill s)" for lab in labels) + " |")
    print("| ---: | " + " | ".join("---:" for _ in labels) + " |")
    for s in steps:
        cells = [f"{step_total[(lab, s)] / 1000:.1f} ({step_prefill[(lab, s)] / 1000:.1f})" if (lab, s) in step_total else "-"
                 for lab in labels]
        print(f"| {s} | " + " | ".join(cells) + " |")
    print()

    def per_step(lab, key, kinds):
        out = {}
        for r in rows:
            if r["label"] == lab and r["kind"] in kinds:
                out[r["step"]] = out.get(r["step"], 0.0) + (r["prefill_ms"] if key == "prefill" else r["total_ms"])
        return out

    def ratio(a, b, key, kinds):
        x, y = per_step(a, key, kinds), per_step(b, key, kinds)
        return [x[s] / y[s] for s in steps if s in x and s in y and y[s] > 0]

    every = set(kinds)
    # llama-server's /infill cuts the text around the cursor (another prompt): against it, the
    # requests whose prompts are the same
    same_prompt = {"edit", "apply"}
    for a, b, key, ks in [("pie", "cold", "prefill", every), ("prefix", "cold", "prefill", every),
                          ("pie", "llama-server", "prefill", same_prompt), ("prefix", "llama-server", "prefill", same_prompt),
                          ("prefix", "llama-server-prefix", "prefill", same_prompt),
                          ("old", "pie", "total", every), ("old", "prefix", "total", every)]:
        rs = ratio(a, b, key, ks)
        if rs:
            what = "edit + apply" if ks == same_prompt else "all requests"
            print(f"- {key} per step ({what}), {a} / {b}: median {statistics.median(rs):.3f} (each step: "
                  f"{', '.join(f'{x:.2f}' for x in rs)})")
    # answers: each pie configuration against prefix (lossless), request by request
    key = lambda r: (r.get("history", ""), r["step"], r["kind"])
    exact = {key(r): r["text"] for r in rows if r["label"] == "prefix"}
    for lab in [x for x in labels if x.startswith("pie")] if exact else []:
        print()
        same, total, diffs = collections.Counter(), collections.Counter(), []
        for r in rows:
            if r["label"] != lab or key(r) not in exact:
                continue
            total[r["kind"]] += 1
            if exact[key(r)] == r["text"]:
                same[r["kind"]] += 1
            else:
                diffs.append(f"{r.get('history', '')} step {r['step']} {r['kind']}")
        for k in total:
            print(f"- {lab} answers equal to prefix (exact) answers, {k}: {same[k]}/{total[k]} ({100.0 * same[k] / total[k]:.1f}%)")
        if diffs:
            print("- differing: " + ", ".join(diffs))
    if "cold" in labels and "prefix" in labels:
        cold = {key(r): r["text"] for r in rows if r["label"] == "cold"}
        eq = [r["text"] == cold[key(r)] for r in rows if r["label"] == "prefix" and key(r) in cold]
        print(f"- prefix answers equal to cold answers: {sum(eq)}/{len(eq)}")


if __name__ == "__main__":
    main()
