#!/usr/bin/env python3
"""Markdown table of rows "LABEL TOKENS_PER_S TOKENS" (one per round), medians per label.

    bench/median-table.py ROWS_FILE TITLE [BASE_LABEL]

With BASE_LABEL, a column of each median over that label's median."""
import statistics
import sys

rows, toks = {}, {}
for line in open(sys.argv[1]):
    label, tps, n = line.split()
    rows.setdefault(label, []).append(float(tps))
    toks[label] = int(n)
base = statistics.median(rows[sys.argv[3]]) if len(sys.argv) > 3 else None
print(f"# {sys.argv[2]}; tokens/s, median of rounds (each round)")
print("| decoder | tokens generated | tok/s |" + (f" vs {sys.argv[3]} |" if base else ""))
print("| --- | ---: | --- |" + (" ---: |" if base else ""))
for label, v in rows.items():
    m = statistics.median(v)
    print(f"| {label} | {toks[label]} | {m:.1f} ({', '.join(f'{x:.1f}' for x in v)}) |" + (f" {m / base:.3f} |" if base else ""))
