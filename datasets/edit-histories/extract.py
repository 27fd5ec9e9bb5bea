#!/usr/bin/env python3
"""Extract the editing histories in this folder from a clone of pallets/itsdangerous.

Each history is one file's successive versions, oldest first, as its commits left it; one JSON line
per version: repo, path, commit, date, subject, text. Versions whose text did not change are skipped.

    git clone https://github.com/pallets/itsdangerous /tmp/itsdangerous
    datasets/edit-histories/extract.py /tmp/itsdangerous datasets/edit-histories

The histories used (docs/results/issue37-workflow): signer.py was the one looked at while building
the prompt cache, timed.py is held out for the figures; the four small modules fit the shipped
models' 1,024-token context (prompt and answer together).
"""
import json
import subprocess
import sys

UPSTREAM = "pallets/itsdangerous"
HEAD = "672971d66a2ef9f85151e53283113f33d642dabd"
FILES = {
    "timed": "src/itsdangerous/timed.py",
    "signer": "src/itsdangerous/signer.py",
    "encoding": "src/itsdangerous/encoding.py",
    "exc": "src/itsdangerous/exc.py",
    "json": "src/itsdangerous/_json.py",
    "url_safe": "src/itsdangerous/url_safe.py",
}


def git(repo, *args):
    return subprocess.run(["git", "-C", repo, *args], check=True, capture_output=True, text=True).stdout


def main():
    if len(sys.argv) != 3:
        sys.exit(__doc__)
    repo, out = sys.argv[1], sys.argv[2]
    for name, path in FILES.items():
        log = git(repo, "log", "--reverse", "--format=%H%x09%ad%x09%s", "--date=short", HEAD, "--", path)
        rows, last = [], None
        for line in log.splitlines():
            commit, date, subject = line.split("\t", 2)
            text = git(repo, "show", f"{commit}:{path}")
            if text == last:
                continue
            rows.append({"repo": UPSTREAM, "path": path, "commit": commit, "date": date, "subject": subject, "text": text})
            last = text
        with open(f"{out}/{name}.jsonl", "w") as f:
            for r in rows:
                f.write(json.dumps(r) + "\n")
        print(f"{name}: {len(rows)} versions of {path}, {len(rows[-1]['text'])} bytes at the last", file=sys.stderr)


if __name__ == "__main__":
    main()
