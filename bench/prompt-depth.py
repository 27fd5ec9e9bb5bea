#!/usr/bin/env python3
"""Prompt encoding deep in a file: a cold prompt of thousands of tokens, then a change at its end.

    bench/prompt-depth.py --model ds13.gguf [--base-tokens 5000] [--change-tokens 500] [--rounds 2]

Per server and round (each server started afresh, one slot, a warm-up request first):
  cold    POST /completion of the base prompt (about --base-tokens tokens of real code), n_predict 1:
          the time to encode a cold prompt of that size (what the first request on a file pays)
  change  the same prompt with about --change-tokens tokens of other code after it, n_predict 1, the
          prompt cache on: both servers keep the base's KV and encode only the change, at a depth of
          --base-tokens (what an edit deep in a file, or the next turn of a chat about it, pays)
Printed: one JSON line per server and round (seconds, wall time of the request), and the medians.
The servers: `editspec serve --parallel 1` and llama-server -np 1 from llama.cpp's default build
(scripts/setup-peers.sh: stock kernels, its defaults otherwise), the same model, threads and context,
alternated (which goes first swaps each round). The code: CanItEdit's files (datasets/), one after
another, or --file.
"""
import argparse, json, os, statistics, subprocess, sys, time, urllib.request

root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from concurrency import free_port, stop, wait_up  # noqa: E402 - beside this file


def post(port, path, body):
    req = urllib.request.Request(f"http://127.0.0.1:{port}{path}", json.dumps(body).encode(),
                                 {"Content-Type": "application/json"})
    with urllib.request.urlopen(req, timeout=7200) as r:
        return json.load(r)


def timed_completion(port, prompt):
    t0 = time.time()
    post(port, "/completion", {"prompt": prompt, "n_predict": 1, "temperature": 0, "top_k": 1, "cache_prompt": True})
    return time.time() - t0


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--model", required=True)
    ap.add_argument("--base-tokens", type=int, default=5000, help="about this many tokens of code before the change")
    ap.add_argument("--change-tokens", type=int, default=500, help="about this many tokens of changed code after it")
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--ctx-size", type=int, default=8192)
    ap.add_argument("--file", help="code to take the prompts from (default: CanItEdit's files)")
    ap.add_argument("--dataset", default=os.path.join(root, "datasets/canitedit/normalized.jsonl"))
    ap.add_argument("--es", default=os.path.join(root, "build/bin/editspec"))
    ap.add_argument("--peers", default="", help="llama.cpp's default build's bin/ (default: scripts/setup-peers.sh)")
    ap.add_argument("--servers", default="editspec,llama-server")
    ap.add_argument("--es-args", default="", help="more `editspec serve` arguments")
    args = ap.parse_args()
    if args.file:
        text = open(args.file, encoding="utf-8", errors="replace").read()
    else:
        text = "".join(json.loads(l)["code_before"] for l in open(args.dataset))
    # characters per token measured on the first server's tokenizer below; 3.2 to start
    servers = args.servers.split(",")
    peers = None
    results = []
    for r in range(args.rounds):
        order = servers if r % 2 == 0 else list(reversed(servers))
        for server in order:
            port = free_port()
            log = os.path.join(os.environ.get("TMPDIR", "/tmp"), f"prompt-depth-{server}.log")
            if server == "llama-server":
                peers = peers or args.peers or subprocess.run([os.path.join(root, "scripts/setup-peers.sh")], check=True,
                                                              capture_output=True, text=True).stdout.strip().splitlines()[-1]
                cmd = [os.path.join(peers, "llama-server"), "-m", args.model, "-t", str(args.threads), "-c",
                       str(args.ctx_size), "-np", "1", "--host", "127.0.0.1", "--port", str(port)]
            else:
                cmd = [args.es, "serve", "-m", args.model, "-t", str(args.threads), "--ctx-size", str(args.ctx_size),
                       "--parallel", "1", "--port", str(port)] + args.es_args.split()
            with open(log, "w") as lf:
                proc = subprocess.Popen(cmd, stdout=lf, stderr=subprocess.STDOUT)
            try:
                wait_up(port, proc, log, seconds=3600)  # a first run measures the cost model first
                # the prompts in tokens of this model: /tokenize of the code's first 40,000 characters
                sample = text[:40000]
                n = len(post(port, "/tokenize", {"content": sample})["tokens"])
                cpt = len(sample) / max(1, n)
                base = text[: int(cpt * args.base_tokens)]
                change = text[len(base): len(base) + int(cpt * args.change_tokens)]
                n_base = len(post(port, "/tokenize", {"content": base})["tokens"])
                n_change = len(post(port, "/tokenize", {"content": base + change})["tokens"]) - n_base
                timed_completion(port, "def add(a, b):")  # warm-up
                cold = timed_completion(port, base)
                changed = timed_completion(port, base + change)
            finally:
                stop(proc)
            row = {"round": r + 1, "server": server, "base_tokens": n_base, "change_tokens": n_change,
                   "cold_s": round(cold, 2), "change_s": round(changed, 2)}
            results.append(row)
            print(json.dumps(row), flush=True)
    for server in servers:
        rows = [x for x in results if x["server"] == server]
        print(json.dumps({"server": server, "median_cold_s": statistics.median(x["cold_s"] for x in rows),
                          "median_change_s": statistics.median(x["change_s"] for x in rows)}), flush=True)
    if set(servers) == {"editspec", "llama-server"}:
        ratio = lambda key: [round(b[key] / a[key], 2) for a, b in zip(
            [x for x in results if x["server"] == "editspec"], [x for x in results if x["server"] == "llama-server"])]
        print(json.dumps({"llama_server_over_editspec": {"cold": ratio("cold_s"), "change": ratio("change_s")}}), flush=True)


if __name__ == "__main__":
    main()
