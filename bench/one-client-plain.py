#!/usr/bin/env python3
"""One client, one request at a time, against a freshly started server: time to answer, prompt and
generation times from the server's own `timings`, and what is left (HTTP, queueing).

    bench/one-client-plain.py --model ds13.gguf --server editspec --requests 3
    bench/one-client-plain.py --model ds13.gguf --server llama-server --requests 3

Each request is a greedy POST /completion of --n-predict tokens whose prompt is the first 6 lines of a
CanItEdit file (the smallest first, as bench/concurrency.py's plain mode sends them). Run the two
servers alternately, more than once: this machine's speed drifts by 15-40% within minutes.
"""
import argparse
import json
import os
import subprocess
import sys
import time
import urllib.request

root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--model", required=True)
    ap.add_argument("--server", choices=["editspec", "llama-server"], default="editspec")
    ap.add_argument("--requests", type=int, default=3)
    ap.add_argument("--n-predict", type=int, default=32)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--port", type=int, default=8790)
    ap.add_argument("--peers", default="", help="llama.cpp's bin folder (default: scripts/setup-peers.sh)")
    ap.add_argument("--args", default="", help="more server options")
    a = ap.parse_args()
    items = sorted((json.loads(l) for l in open(os.path.join(root, "datasets/canitedit/normalized.jsonl"))),
                   key=lambda d: len(d["code_before"]))
    if a.server == "llama-server":
        peers = a.peers or subprocess.run([os.path.join(root, "scripts/setup-peers.sh")], check=True,
                                          capture_output=True, text=True).stdout.strip().splitlines()[-1]
        cmd = [os.path.join(peers, "llama-server"), "-m", a.model, "-t", str(a.threads), "-c", "2048", "-np", "1",
               "--host", "127.0.0.1", "--port", str(a.port)]
    else:
        cmd = [os.path.join(root, "build/bin/editspec"), "serve", "-m", a.model, "-t", str(a.threads), "--ctx-size",
               "2048", "--parallel", "1", "--port", str(a.port)]
    log = os.path.join(os.environ.get("TMPDIR", "/tmp"), f"one-client-{a.server}.log")
    proc = subprocess.Popen(cmd + a.args.split(), stdout=open(log, "w"), stderr=subprocess.STDOUT)
    try:
        for _ in range(1200):
            if proc.poll() is not None:
                sys.exit(f"{a.server} exited; see {log}")
            try:
                urllib.request.urlopen(f"http://127.0.0.1:{a.port}/health", timeout=1).read()
                break
            except Exception:  # noqa: BLE001 - loading
                time.sleep(0.25)
        for k in range(a.requests):
            prompt = "".join(items[k]["code_before"].splitlines(True)[:6])
            body = {"prompt": prompt, "n_predict": a.n_predict, "temperature": 0, "top_k": 1, "cache_prompt": False}
            req = urllib.request.Request(f"http://127.0.0.1:{a.port}/completion", data=json.dumps(body).encode(),
                                         headers={"Content-Type": "application/json"})
            t0 = time.time()
            r = json.loads(urllib.request.urlopen(req, timeout=600).read())
            dt = (time.time() - t0) * 1000
            t = r.get("timings", {})
            print(json.dumps({"server": a.server, "request": k, "total_ms": round(dt), "prompt_n": t.get("prompt_n"),
                              "prompt_ms": round(t.get("prompt_ms", 0)), "predicted_n": t.get("predicted_n"),
                              "predicted_ms": round(t.get("predicted_ms", 0)),
                              "ms_per_token": round(t.get("predicted_per_token_ms", 0), 1),
                              "other_ms": round(dt - t.get("prompt_ms", 0) - t.get("predicted_ms", 0))}), flush=True)
    finally:
        proc.terminate()
        proc.wait()


if __name__ == "__main__":
    main()
