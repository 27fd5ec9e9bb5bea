#!/usr/bin/env python3
"""Check the docs' figures against the files that measured them, and the README's defaults against --help.

Figures. In README.md, docs/*.md and models/MODEL_CARD.md a figure cites its source as a markdown
link whose text begins with the figure, to the results file that holds it:

    All three shapes merge [52/56](docs/results/issue40-fim/README.md) CanItEdit apply tasks exactly
    [51.1 %](results/issue40-fim/README.md) next-token accuracy          (in docs/*.md)

(paths relative to the document, as a markdown viewer resolves them). A link's title names what the
figure measured, `[5.83x](docs/results/x/README.md "exact mode")`: the figure must then stand on a
line of the file that holds every word of the title (a figure quoted under another label fails;
`--selftest` plants one). Every figure in such a link's
text (a number with its unit: 51.1 %, 2.78x, 52/56, 1,024) must occur in the linked file, written
with the same unit (51.1% = 51.1 %, 2.78x = 2.78×, 1,024 = 1024); a link to a missing file or a
folder is an error. Links whose text does not begin with a digit are not figures, and links in code
(`spans`, fenced blocks) are not links: both are skipped.

The model card is written by the training pipeline (tools/train/card.py), so it holds no such links;
its shipped target's held-out figures are compared with the evaluation records in its results
folder instead (CARD_CHECKS in this script).

Defaults. With --binary, each default the README states for an option listed in this script's DEFAULTS is
compared with the default `editspec CMD --help` prints for it. Without --binary that part is skipped.

Exit status: 0 when everything matches, 1 on any mismatch (each listed), 2 on a usage error.
"""
import argparse
import json
import os
import re
import subprocess
import sys

DOCS = ["README.md", "docs/*.md", "models/MODEL_CARD.md"]

# a number (1,024 / 51.1 / 52/56) and its unit (% or x / ×); not a part of a word, a version or a path
FIGURE = re.compile(
    r"(?<![\w.,/-])(\d{1,3}(?:,\d{3})+|\d+)(\.\d+)?(/(?:\d{1,3}(?:,\d{3})+|\d+))?"
    r"(?:(\s?%)|([x×])(?![A-Za-z0-9]))?")
# [figure](file "label words"): the title, when there is one, names what the figure measured
LINK = re.compile(r"\[([^\[\]]+)\]\(([^)\s]+)(?:\s+\"([^\"]*)\")?\)")  # its text may run over a line break


def figures(text):
    """The figures of a text as (number, unit) pairs: ('51.1', '%'), ('2.78', 'x'), ('52/56', '')."""
    out = []
    for m in FIGURE.finditer(text):
        num = m.group(1).replace(",", "") + (m.group(2) or "") + (m.group(3) or "").replace(",", "")
        unit = "%" if m.group(4) else ("x" if m.group(5) else "")
        out.append((num, unit))
    return out


def doc_files(root):
    import glob
    out = []
    for pat in DOCS:
        out += sorted(glob.glob(os.path.join(root, pat)))
    return out


def check_links(root, verbose):
    """Every figure link's figures against the file it links to. Returns (checked, problems)."""
    problems, checked, cache = [], 0, {}
    for path in doc_files(root):
        rel = os.path.relpath(path, root)
        with open(path, encoding="utf-8") as f:
            doc = f.read()
        # code (fenced blocks, `spans`) is not prose: blanked, offsets kept for the line numbers
        doc = re.sub(r"```.*?```|`[^`]*`", lambda c: re.sub(r"[^\n]", " ", c.group(0)), doc, flags=re.S)
        for m in LINK.finditer(doc):
            text, target = " ".join(m.group(1).split()), m.group(2)
            lineno = doc.count("\n", 0, m.start()) + 1
            if not re.match(r"[~≈]?\d", text.strip().strip("*`")):
                continue
            if re.match(r"[a-z]+:", target):
                problems.append(f"{rel}:{lineno}: [{text}] cites {target}: not a file in the project")
                continue
            src = os.path.normpath(os.path.join(os.path.dirname(path), target.split("#")[0]))
            where = f"{rel}:{lineno}: [{text}]({target})"
            if not os.path.isfile(src):
                problems.append(f"{where}: {'a folder, not a file' if os.path.isdir(src) else 'no such file'}")
                continue
            if src not in cache:
                with open(src, encoding="utf-8", errors="replace") as f:
                    body = f.read()
                have = set(figures(body))
                lines = [(set(figures(line)), line.lower()) for line in body.split("\n")]
                cache[src] = (have, {n for n, _ in have}, lines)
            have, numbers, lines = cache[src]
            label = [w.lower() for w in re.findall(r"[\w.-]{2,}", m.group(3) or "")]
            for num, unit in figures(text):
                checked += 1
                ok = (num, unit) in have if unit else num in numbers
                if not ok:
                    problems.append(f"{where}: {num}{unit} is not in {os.path.relpath(src, root)}")
                    continue
                # labelled: on a line of the file that also holds every word of the label
                if label and not any((num, unit) in figs if unit else num in {n for n, _ in figs}
                                     for figs, low in lines if all(w in low for w in label)):
                    problems.append(f"{where}: {num}{unit} is in {os.path.relpath(src, root)}, but on no line that says "
                                    f"\"{m.group(3)}\"")
                elif verbose:
                    print(f"ok  {rel}:{lineno}: {num}{unit} in {os.path.relpath(src, root)}")
    return checked, problems


# The model card's figures for the shipped target, against the evaluation that measured them
# (issue 40's shipped run). Each: (what, a regex over the card with one group per figure, the
# record file, a function of the record giving the same figures as text).
SHIPPED_EVAL = "docs/results/issue40-fim/mixed/edits-eval.json"
SHIPPED_FIM = "docs/results/issue40-fim/mixed/fim.json"


def _shipped(d):
    return d["mixed-fim (shipped)"]["instruction_first"]


def _pct(x):
    return f"{100 * x:.1f}"


CARD_CHECKS = [
    ("target next-token accuracy and cross-entropy", r"\| target \| ([\d.]+)% \| ([\d.]+) \|", SHIPPED_EVAL,
     lambda d: [_pct(_shipped(d)["code_acc"]["accuracy"]), f"{_shipped(d)['code_acc']['nll_nats']:.3f}"]),
    ("held-out edits", r"Held-out synthetic edits \(200\), target, greedy: exact match ([\d.]+)%, "
     r"unchanged lines reproduced ([\d.]+)%", SHIPPED_EVAL,
     lambda d: [_pct(_shipped(d)["edits"]["exact_match"]), _pct(_shipped(d)["edits"]["unchanged_lines_reproduced"])]),
    ("teacher-forced edits", r"right ([\d.]+)% of the time \(the copy instead: ([\d.]+)%\), new-line tokens "
     r"([\d.]+)%, copied tokens ([\d.]+)%", SHIPPED_EVAL,
     lambda d: [_pct(_shipped(d)["edit_tf"][k]) for k in
                ("decision_acc", "decision_predicts_copy", "new_token_acc", "same_token_acc")]),
    ("next line (fill in the middle)", r"`/infill` with the suffix ([\d.]+)%, with an empty suffix ([\d.]+)%, "
     r"`/completion` of the prefix alone ([\d.]+)%", SHIPPED_FIM,
     lambda d: [_pct(d["variants"][k]["exact_rate"]) for k in ("infill_suffix", "infill_no_suffix", "completion_prefix")]),
]


def check_card(root):
    card_path = os.path.join(root, "models/MODEL_CARD.md")
    if not os.path.isfile(card_path):
        return 0, []
    with open(card_path, encoding="utf-8") as f:
        card = " ".join(f.read().split())
    problems, checked = [], 0
    for what, pattern, record, want_of in CARD_CHECKS:
        m = re.search(pattern, card)
        if not m:
            problems.append(f"models/MODEL_CARD.md: {what}: the card has no line matching /{pattern}/")
            continue
        with open(os.path.join(root, record), encoding="utf-8") as f:
            want = want_of(json.load(f))
        for got, exp in zip(m.groups(), want):
            checked += 1
            if got != exp:
                problems.append(f"models/MODEL_CARD.md: {what}: {got}, {record} says {exp}")
    return checked, problems


# The defaults the README states, against `editspec CMD --help`. Each: (commands, option, a regex over
# the README (whitespace collapsed to one space) with one group, the README's word for the value ->
# --help's, a regex over the option's --help line giving its value when it is not OPTION TYPE=VALUE).
WORDS = {"one": "1", "all": "-1"}
DEFAULTS = [
    (["complete", "edit", "apply", "chat", "serve"], "--method",
     r"Every command and the server decode with `(\w+)` unless told otherwise", None),
    (["chat"], "--method", r"`editspec chat`.*? Its default method is `([\w+@-]+)`", None),
    (["serve"], "--host", r"`editspec serve` \(defaults: the shipped models, `([\d.]+):\d+`", None),
    (["serve"], "--port", r"`editspec serve` \(defaults: the shipped models, `[\d.]+:(\d+)`", None),
    (["serve"], "--parallel", r"`editspec serve` \(defaults: the shipped models, `[\d.:]+`, (\w+) slot", None),
    (["serve"], "--step-tokens", r"at most `--step-tokens`, ([\d,]+) by default", r"0 = (\d+)"),
    (["serve"], "--queue", r"`--queue` more \((\d+)\)", None),
    (["serve"], "--request-read-timeout", r"`--request-read-timeout` \((\d+) s,", None),
    (["serve"], "--max-connections", r"`--max-connections` \((\d+)\)", None),
    (["serve"], "--max-connections-per-client", r"`--max-connections-per-client` \((\d+)\)", None),
    (["serve"], "--cache-ram", r"\(`--cache-ram`, (\d+) MiB by default", None),
    (["serve"], "--kv-reuse", r"With `--kv-reuse (\w+)` \(the default\)", None),
    (["serve"], "--reuse-min", r"`--reuse-min` \((\d+)\)", None),
    (["serve"], "--max-sessions", r"at most `--max-sessions` \(default (\d+),", None),
    (["serve", "edit", "apply", "bench"], "--prompt-layout", r"\(`--prompt-layout`, default `([\w-]+)`", None),
    (["complete", "edit", "apply", "chat", "serve", "bench"], "--gpu-layers",
     r"`--gpu-layers` on every command \(default: (\w+) layers\)", None),
    (["bench"], "--tests-timeout", r"`--tests-timeout`, (\d+) s\)", None),
    (["bench"], "--cost-curve", r"\(`--cost-curve (\w+)`, the default\)", None),
]


def help_default(helptext, option, value_re):
    """The default --help prints for an option: CLI11's 'OPTION TYPE=VALUE', or value_re on its line."""
    for line in helptext.split("\n"):
        m = re.match(r"\s+(?:-\w,)?(--[\w-]+)(?:,--[\w-]+)?(?:\s+[A-Z]+(?:=(\S+))?)?", line)
        if not m or m.group(1) != option:
            continue
        if value_re:
            v = re.search(value_re, line)
            return v.group(1) if v else None
        return m.group(2)
    return None


def check_defaults(root, binary):
    with open(os.path.join(root, "README.md"), encoding="utf-8") as f:
        readme = " ".join(f.read().split())
    problems, checked, helps = [], 0, {}
    for cmds, option, pattern, value_re in DEFAULTS:
        m = re.search(pattern, readme)
        if not m:
            problems.append(f"README.md: no statement of {option}'s default matching /{pattern}/ "
                            "(reworded? update DEFAULTS in scripts/check-figures.py)")
            continue
        said = m.group(1).replace(",", "")
        said = WORDS.get(said, said)
        for cmd in cmds:
            if cmd not in helps:
                r = subprocess.run([binary, cmd, "--help"], capture_output=True, text=True, timeout=60)
                if r.returncode != 0:
                    problems.append(f"{binary} {cmd} --help: exit status {r.returncode}")
                helps[cmd] = r.stdout + r.stderr
            got = help_default(helps[cmd], option, value_re)
            checked += 1
            if got is None:
                problems.append(f"editspec {cmd} --help: no default for {option} (README.md says {said})")
            elif got != said:
                problems.append(f"README.md says {option} defaults to {said}; editspec {cmd} --help says {got}")
    return checked, problems


def selftest():
    """Planted documents: a figure quoted under its own label passes, under another label fails, a
    missing one fails. Returns an exit status."""
    import tempfile
    with tempfile.TemporaryDirectory() as root:
        os.makedirs(os.path.join(root, "docs/results/x"))
        with open(os.path.join(root, "docs/results/x/README.md"), "w") as f:
            f.write("| exact mode, real-shape replay, H200 | 5.83x |\n| stock kernels, real-shape replay | 4.27x |\n")
        cases = [('[5.83x](docs/results/x/README.md "exact mode")', 0),
                 ('[4.27x](docs/results/x/README.md "exact mode")', 1),   # the stock figure under the exact label
                 ('[4.27x](docs/results/x/README.md)', 0),
                 ('[9.99x](docs/results/x/README.md)', 1)]
        for text, want in cases:
            with open(os.path.join(root, "README.md"), "w") as f:
                f.write("Measured: " + text + ".\n")
            _, problems = check_links(root, False)
            if (1 if problems else 0) != want:
                print(f"check-figures --selftest: {text}: {'a mismatch' if problems else 'no mismatch'}, expected "
                      f"{'one' if want else 'none'} {problems}", file=sys.stderr)
                return 1
    print("check-figures --selftest: a labelled figure under another label fails; the rest as expected", file=sys.stderr)
    return 0


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0], epilog=__doc__.split("\n", 2)[2],
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--root", default=os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."),
                    help="the repository (default: this script's)")
    ap.add_argument("--binary", help="an editspec binary: also check the README's defaults against its --help")
    ap.add_argument("-v", "--verbose", action="store_true", help="list every figure checked")
    ap.add_argument("--selftest", action="store_true", help="check the checker on planted documents, then exit")
    a = ap.parse_args()
    if a.selftest:
        return selftest()
    root = os.path.abspath(a.root)

    n_links, problems = check_links(root, a.verbose)
    n_card, p = check_card(root)
    problems += p
    n_defaults = 0
    if a.binary:
        if not os.access(a.binary, os.X_OK):
            print(f"check-figures: {a.binary}: not an executable", file=sys.stderr)
            return 2
        n_defaults, p = check_defaults(root, a.binary)
        problems += p
    for line in problems:
        print("MISMATCH " + line)
    print(f"check-figures: {n_links} cited figures, {n_card} model-card figures, "
          f"{n_defaults} --help defaults{'' if a.binary else ' (no --binary)'} checked; {len(problems)} mismatches",
          file=sys.stderr)
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
