#!/usr/bin/env python3
"""A client that leaves: how long the next request waits behind its abandoned work, one slot.

    bench/client-leaves.py --model ds13.gguf [--prompt-tokens 1500] [--leave-after 3] [--stream] [--queued]

--queued: client A leaves while its request waits in the queue behind another client's (H: the same
small request with n_predict --hold-tokens, holding the slot), not while it decodes; B is sent after A
left and its delay is counted from H's end (when the slot came free), less B's own time alone.

Client A sends a greedy POST /completion (a ~N-token prompt of real code, n_predict 256, not streamed
unless --stream) and closes its connection after --leave-after seconds; client B then sends a short
request (16 tokens). Printed per server: B's time from its send to its answer, the same request's time
on the idle server (best of two, sent first), and the difference: how long A's abandoned work held B. Both servers on one slot, the same
model and prompts, in one run: `editspec serve --parallel 1` and llama-server -np 1 (default build,
scripts/setup-peers.sh).
"""
import argparse, json, os, socket, subprocess, sys, threading, time, urllib.request

root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from concurrency import stop, wait_up  # noqa: E402 - beside this file


def leave_after(port, body, seconds):
    """sends body and closes the connection after `seconds` without reading the answer"""
    data = json.dumps(body).encode()
    s = socket.create_connection(("127.0.0.1", port))
    s.sendall(b"POST /completion HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
              + f"Content-Length: {len(data)}\r\n\r\n".encode() + data)
    time.sleep(seconds)
    s.close()


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--model", required=True)
    ap.add_argument("--prompt-tokens", type=int, default=1500, help="about this many prompt tokens (4 characters each)")
    ap.add_argument("--leave-after", type=float, default=3.0)
    ap.add_argument("--stream", action="store_true", help="client A streams")
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--port", type=int, default=8741)
    ap.add_argument("--dataset", default=os.path.join(root, "datasets/canitedit/normalized.jsonl"))
    ap.add_argument("--es", default=os.path.join(root, "build/bin/editspec"))
    ap.add_argument("--peers", default="")
    ap.add_argument("--servers", default="editspec,llama-server")
    ap.add_argument("--queued", action="store_true", help="A leaves while queued behind another request")
    ap.add_argument("--hold-tokens", type=int, default=96, help="--queued: the tokens the request ahead of A generates")
    args = ap.parse_args()
    items = [json.loads(l) for l in open(args.dataset)]
    text = ""
    for d in items:
        if len(text) >= 4 * args.prompt_tokens:
            break
        text += d["code_before"]
    text = text[: 4 * args.prompt_tokens]
    peers = None
    for server in args.servers.split(","):
        log = os.path.join(os.environ.get("TMPDIR", "/tmp"), f"client-leaves-{server}.log")
        if server == "llama-server":
            peers = peers or args.peers or subprocess.run([os.path.join(root, "scripts/setup-peers.sh")], check=True,
                                                          capture_output=True, text=True).stdout.strip().splitlines()[-1]
            cmd = [os.path.join(peers, "llama-server"), "-m", args.model, "-t", str(args.threads), "-c", "4096", "-np", "1",
                   "-fa", "off", "--host", "127.0.0.1", "--port", str(args.port)]
        else:
            cmd = [args.es, "serve", "-m", args.model, "-t", str(args.threads), "--ctx-size", "4096", "--parallel", "1",
                   "--port", str(args.port)]
        with open(log, "w") as lf:
            proc = subprocess.Popen(cmd, stdout=lf, stderr=subprocess.STDOUT)
        try:
            wait_up(args.port, proc, log)
            small = json.dumps({"prompt": "def add(a, b):", "n_predict": 16, "temperature": 0, "top_k": 1,
                                "cache_prompt": False}).encode()

            def send_small():
                t0 = time.time()
                req = urllib.request.Request(f"http://127.0.0.1:{args.port}/completion", small,
                                             {"Content-Type": "application/json"})
                json.load(urllib.request.urlopen(req, timeout=3600))
                return time.time() - t0

            alone = min(send_small(), send_small())  # B on an idle server: what it costs itself
            a = {"prompt": text, "n_predict": 256, "temperature": 0, "top_k": 1, "cache_prompt": False, "stream": args.stream}
            if args.queued:
                hold = json.dumps({"prompt": "def add(a, b):", "n_predict": args.hold_tokens, "temperature": 0,
                                   "top_k": 1, "cache_prompt": False, "ignore_eos": True}).encode()
                held = {}

                def send_hold():
                    req = urllib.request.Request(f"http://127.0.0.1:{args.port}/completion", hold,
                                                 {"Content-Type": "application/json"})
                    json.load(urllib.request.urlopen(req, timeout=3600))
                    held["end"] = time.time()

                th = threading.Thread(target=send_hold)
                th.start()
                time.sleep(0.2)  # H holds the slot; A queues behind it and leaves
                leave_after(args.port, a, args.leave_after)
                t_b = time.time()
                wait = send_small()
                th.join()
                wait = t_b + wait - max(held["end"], t_b)  # B's time from the slot coming free
            else:
                leave_after(args.port, a, args.leave_after)
                wait = send_small()
        finally:
            stop(proc)
        print(json.dumps({"server": server, "stream": args.stream, "queued": args.queued, "leave_after_s": args.leave_after,
                          "prompt_chars": len(text), "next_request_s": round(wait, 2), "alone_s": round(alone, 2),
                          "delay_s": round(wait - alone, 2)}), flush=True)


if __name__ == "__main__":
    main()
