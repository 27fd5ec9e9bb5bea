#!/usr/bin/env python3
"""Post apply tasks to a running server's /v1/apply and count the merged files that are exactly right.

  editspec bench --task apply --fit-train-ctx --write-tasks tasks.jsonl      # the tasks (JSONL)
  editspec serve &                                                           # the endpoint
  scripts/apply-check.py tasks.jsonl [--url http://127.0.0.1:8012] [--shape apply|relace|morph] [--field constrain=false]

Each task is sent as a client would, in one of three shapes plus the --field extras: editspec's
/v1/apply {"code", "update"} -> "merged_code"; Relace's /v1/code/apply {"initial_code",
"edit_snippet"} -> "mergedCode"; Morph's chat message <code>...</code><update>...</update> to
/v1/chat/completions -> the message's code. A merge is right when it equals the task's "expected"
byte for byte (as `editspec bench` judges it).
"""
import argparse
import json
import sys
import time
import urllib.error
import urllib.request


def request_of(shape, t):
    if shape == "relace":
        return "/v1/code/apply", {"initial_code": t["code"], "edit_snippet": t["update"]}
    if shape == "morph":
        message = f"<code>{t['code']}</code>\n<update>{t['update']}</update>"
        return "/v1/chat/completions", {"model": "morph-v3-fast", "messages": [{"role": "user", "content": message}]}
    return "/v1/apply", {"code": t["code"], "update": t["update"]}


def merged_of(shape, r):
    if shape == "relace":
        return r.get("mergedCode")
    if shape == "morph":
        # the message's code: the answer, without a fence around the whole of it
        text = r["choices"][0]["message"]["content"]
        lines = text.split("\n")
        if len(lines) >= 2 and lines[0].startswith("```") and lines[-1].strip() == "```":
            text = "\n".join(lines[1:-1])
        return text
    return r.get("merged_code")


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("tasks", help="JSONL of {id, code, update, expected} (editspec bench --write-tasks)")
    ap.add_argument("--url", default="http://127.0.0.1:8012", help="the server (default: %(default)s)")
    ap.add_argument("--field", action="append", default=[], metavar="KEY=JSON",
                    help="an extra request field, e.g. constrain=false (repeatable)")
    ap.add_argument("--shape", choices=["apply", "relace", "morph"], default="apply",
                    help="the request's shape (default: %(default)s)")
    ap.add_argument("--timeout", type=float, default=600.0, help="seconds per request (default: %(default)s)")
    ap.add_argument("--limit", type=int, default=0, help="the first N tasks only (default: all)")
    ap.add_argument("--min-exact", type=int, default=-1,
                    help="exit 1 when fewer merges than this are exact (a floor for tests; default: none)")
    args = ap.parse_args()
    extra = {}
    for f in args.field:
        key, sep, value = f.partition("=")
        if not sep:
            sys.exit(f"apply-check: --field {f!r}: expected KEY=JSON")
        try:
            extra[key] = json.loads(value)
        except json.JSONDecodeError as e:
            sys.exit(f"apply-check: --field {f!r}: {e}")
    try:
        with open(args.tasks) as fh:
            tasks = [json.loads(line) for line in fh if line.strip()]
    except (OSError, json.JSONDecodeError) as e:
        sys.exit(f"apply-check: {args.tasks}: {e}")
    if args.limit > 0:
        tasks = tasks[: args.limit]
    exact = tokens = 0
    seconds = 0.0
    for i, t in enumerate(tasks, 1):
        path, fields = request_of(args.shape, t)
        body = json.dumps({**fields, **extra}).encode()
        req = urllib.request.Request(args.url + path, data=body, headers={"Content-Type": "application/json"})
        t0 = time.monotonic()
        try:
            with urllib.request.urlopen(req, timeout=args.timeout) as res:
                r = json.loads(res.read())
        except urllib.error.HTTPError as e:
            sys.exit(f"apply-check: task {t['id']}: HTTP {e.code}: {e.read().decode(errors='replace')}")
        except (urllib.error.URLError, TimeoutError) as e:
            sys.exit(f"apply-check: {args.url}: {e}")
        seconds += time.monotonic() - t0
        ok = merged_of(args.shape, r) == t["expected"]
        exact += ok
        tokens += r.get("usage", {}).get("completion_tokens", 0)
        print(f"[{i}/{len(tasks)}] {t['id']}: {'exact' if ok else 'differs'} "
              f"(constrained: {r.get('constrained')})", file=sys.stderr)
    n = len(tasks)
    print(f"{exact}/{n} merged files exact ({100.0 * exact / max(n, 1):.1f}%), {tokens} tokens in {seconds:.1f} s "
          f"({tokens / max(seconds, 1e-9):.1f} tokens/s, whole requests)")
    if exact < args.min_exact:
        sys.exit(f"apply-check: {exact}/{n} exact is under the floor of {args.min_exact}")


if __name__ == "__main__":
    main()
