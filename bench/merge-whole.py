#!/usr/bin/env python3
"""Issue 69's two cases, as a new user meets them: a file too large for the context, merged by
`editspec apply --in-place` and posted to the server's three apply shapes.

    bench/merge-whole.py --binary build/bin/editspec [--model models/editspec-target.gguf]

Writes big.py (3,000 short lines, 18,000 characters) and huge.py (about 1 MB), runs
`editspec apply -f big.py -u change.py --in-place` (exit status, whether big.py is byte-identical,
seconds) and, against `editspec serve` with its defaults, POSTs each file to /v1/apply, Relace's
/v1/code/apply and Morph's chat message: the status, the error's code and message, the seconds to the
answer. Prints one line each; exit 1 when any case hands back or writes a partial merge.
"""
import argparse
import hashlib
import json
import os
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from concurrency import free_port, wait_up  # noqa: E402 - beside this file


def post(port, path, body, timeout=600):
    req = urllib.request.Request(f"http://127.0.0.1:{port}{path}", data=json.dumps(body).encode(),
                                 headers={"Content-Type": "application/json"})
    t = time.monotonic()
    try:
        with urllib.request.urlopen(req, timeout=timeout) as r:
            return r.status, json.loads(r.read()), time.monotonic() - t
    except urllib.error.HTTPError as e:
        return e.code, json.loads(e.read() or b"{}"), time.monotonic() - t


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--binary", default="build/bin/editspec")
    ap.add_argument("--model", default="models/editspec-target.gguf")
    ap.add_argument("--threads", default="2")
    args = ap.parse_args()
    bad = 0
    with tempfile.TemporaryDirectory() as d:
        big = "".join(f"a = {i % 10}\n" for i in range(3000))  # 3,000 lines, 18,000 characters
        huge = big * (1048576 // len(big) + 1)
        change = "# ... existing code ...\na = 42\n"
        paths = {name: os.path.join(d, name) for name in ("big.py", "change.py")}
        with open(paths["big.py"], "w") as f:
            f.write(big)
        with open(paths["change.py"], "w") as f:
            f.write(change)
        digest = hashlib.sha256(big.encode()).hexdigest()
        t = time.monotonic()
        r = subprocess.run([args.binary, "apply", "-m", args.model, "-t", args.threads, "-f", paths["big.py"], "-u",
                            paths["change.py"], "--in-place"], capture_output=True, text=True)
        secs = time.monotonic() - t
        with open(paths["big.py"], "rb") as f:
            same = hashlib.sha256(f.read()).hexdigest() == digest
        left = sorted(os.listdir(d))
        print(f"cli: apply --in-place, {len(big)} characters: exit {r.returncode}, big.py byte-identical: {same}, "
              f"files: {left}, {secs:.2f} s; stderr: {r.stderr.strip()}")
        bad += r.returncode == 0 or not same or left != ["big.py", "change.py"]

        port = free_port()
        log = os.path.join(d, "serve.log")
        with open(log, "w") as lf:
            srv = subprocess.Popen([args.binary, "serve", "-m", args.model, "-t", args.threads, "--port", str(port)],
                                   stdout=lf, stderr=subprocess.STDOUT)
        try:
            wait_up(port, srv, log)
            for label, code in (("18 KB", big), ("1 MB", huge)):
                shapes = (("/v1/apply", {"code": code, "update": change}),
                          ("/v1/code/apply", {"initial_code": code, "edit_snippet": change}),
                          ("/v1/chat/completions (Morph)",
                           {"model": "morph-v3-fast",
                            "messages": [{"role": "user", "content": f"<code>{code}</code>\n<update>{change}</update>"}]}))
                for path, body in shapes:
                    status, j, secs = post(port, path.split(" ")[0], body)
                    err = j.get("error", {}) if isinstance(j, dict) else {}
                    print(f"server: {path}, {label} ({len(code)} characters): HTTP {status} {err.get('code')} in "
                          f"{secs:.2f} s: {err.get('message', '')[:240]}")
                    bad += status == 200
        finally:
            srv.terminate()
            srv.wait()
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
