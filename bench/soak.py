#!/usr/bin/env python3
"""Soak `editspec serve`: a mixed client population for a set time, its memory, descriptors and answers watched.

    python3 bench/soak.py --binary build/bin/editspec --minutes 60 [--slots 2] [--clients 8] [--out DIR]
    python3 bench/soak.py --binary build/bin/editspec --minutes 1 --check        (CI's one-minute version)

Starts `editspec serve --parallel SLOTS` with its defaults (the shipped models) and runs --clients
clients (default twice the slots) for --minutes. Each client loops over request kinds drawn at random
from CanItEdit's items: whole and streamed chat edits with and without `prediction`, /v1/apply, /infill,
a document session (open, two edits, a completion, close), a client that leaves mid-stream, a malformed
body (400 expected), an oversized body (413) and a slow client (its head trickled over 2 s, then sent
whole: 200 expected). Every 10 s it samples the server's RSS and open descriptors (/proc) and what its
prompt store holds (/metrics: a cache that fills to --cache-ram by design); every minute it re-asks
three fixed greedy requests and compares their answers with the first ones.

Prints and writes (--out: soak.json, soak.txt) per kind: requests, failures, p50 / p99 latency; the RSS
and descriptor series. --check: exit 1 on a failed valid request, a crash, a changed answer, or an RSS
less the prompt store's bytes after the first 5 minutes more than 10% over its level then (runs under
10 minutes compare the last sample with the one at a third of the run).
"""
import argparse, json, os, random, socket, sys, tempfile, threading, time, urllib.error, urllib.request

root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from concurrency import start_serve  # noqa: E402 - beside this file


def post(url, body, timeout=300, raw=None):
    data = raw if raw is not None else json.dumps(body).encode()
    req = urllib.request.Request(url, data=data, headers={"Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(req, timeout=timeout) as r:
            return r.status, r.read()
    except urllib.error.HTTPError as e:
        return e.code, e.read()


class soak:
    def __init__(self, args, url, pid, items):
        self.args, self.url, self.pid, self.items = args, url, pid, items
        self.lock = threading.Lock()
        self.stats = {}  # kind -> {"n", "failed", "lat": [], "errors": {}}
        self.samples = []  # (seconds, rss_mib, fds)
        self.answers_checked = 0
        self.answers_changed = []
        self.stop = threading.Event()
        self.t0 = time.monotonic()

    def record(self, kind, ok, seconds, error=""):
        with self.lock:
            st = self.stats.setdefault(kind, {"n": 0, "failed": 0, "lat": [], "errors": {}})
            st["n"] += 1
            st["lat"].append(seconds)
            if not ok:
                st["failed"] += 1
                st["errors"][error] = st["errors"].get(error, 0) + 1

    # --- request kinds: each returns (ok, error)
    def item(self, rng):
        return rng.choice(self.items)

    def chat_body(self, it, stream, prediction):
        body = {"model": "editspec", "temperature": 0, "max_tokens": 48, "stream": stream,
                "messages": [{"role": "user", "content": it["instruction_lazy"] + "\n\n```python\n" + it["code_before"] + "```"}]}
        if prediction:
            body["prediction"] = {"type": "content", "content": it["code_before"]}
        return body

    def chat(self, rng, stream, prediction):
        body = self.chat_body(self.item(rng), stream, prediction)
        if not stream:
            status, data = post(self.url + "/v1/chat/completions", body)
            return status == 200 and "choices" in json.loads(data), f"HTTP {status}"
        req = urllib.request.Request(self.url + "/v1/chat/completions", data=json.dumps(body).encode(),
                                     headers={"Content-Type": "application/json"})
        with urllib.request.urlopen(req, timeout=300) as r:
            text = r.read().decode()
        return "data: [DONE]" in text, "no [DONE]"

    def apply(self, rng):
        it = self.item(rng)
        status, data = post(self.url + "/v1/apply", {"code": it["code_before"], "update": it["code_after"][:2000]})
        if status == 400:  # a merge that cannot fit the context is refused whole, never cut short (issue 69)
            code = json.loads(data).get("error", {}).get("code")
            return code == "context_length_exceeded", f"HTTP 400 {code}"
        return status == 200 and "merged_code" in json.loads(data), f"HTTP {status}"

    def infill(self, rng):
        code = self.item(rng)["code_before"]
        cut = rng.randrange(1, max(2, len(code)))
        status, _ = post(self.url + "/infill", {"input_prefix": code[:cut], "input_suffix": code[cut:], "n_predict": 24})
        return status == 200, f"HTTP {status}"

    def session(self, rng):
        code = rng.choice([it for it in self.items if it["code_before"].isascii()])["code_before"]
        lines = [0] + [i + 1 for i, c in enumerate(code) if c == "\n"][:-1]
        status, data = post(self.url + "/v1/sessions", {"text": code})
        if status == 503:  # every session slot taken by other clients: a valid answer (Retry-After)
            return True, ""
        if status != 200:
            return False, f"open: HTTP {status}"
        sid = json.loads(data)["id"]
        try:
            for _ in range(2):
                # at the start of one of the original's lines: inside the text, which only grows
                status, _ = post(f"{self.url}/v1/sessions/{sid}/edits",
                                 {"offset": rng.choice(lines), "delete": 0, "insert": "# edited\n"})
                if status != 200:
                    return False, f"edit: HTTP {status}"
            status, _ = post(f"{self.url}/v1/sessions/{sid}/complete", {"max_tokens": 16})
            if status != 200:
                return False, f"complete: HTTP {status}"
        finally:
            req = urllib.request.Request(f"{self.url}/v1/sessions/{sid}", method="DELETE")
            try:
                urllib.request.urlopen(req, timeout=60).read()
            except urllib.error.HTTPError:
                pass
        return True, ""

    def leaver(self, rng):
        body = json.dumps(self.chat_body(self.item(rng), True, False)).encode()
        host, port = self.url.split("//")[1].split(":")
        s = socket.create_connection((host, int(port)), timeout=60)
        s.sendall(b"POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
                  + f"Content-Length: {len(body)}\r\n\r\n".encode() + body)
        s.settimeout(3)
        try:
            s.recv(256)  # the first bytes of the answer (or 3 s in the queue), then gone
        except socket.timeout:
            pass
        s.close()
        return True, ""

    def malformed(self, rng):
        status, _ = post(self.url + "/v1/chat/completions", None, raw=b'{"messages": [ {"role": "user", "content": ')
        return status == 400, f"HTTP {status} (400 expected)"

    def oversized(self, rng):
        status, _ = post(self.url + "/v1/chat/completions", None, raw=b"x" * ((self.args.max_body_mb << 20) + 1))
        return status == 413, f"HTTP {status} (413 expected)"

    def slow(self, rng):
        body = json.dumps({"prompt": "def f(x):\n", "n_predict": 8, "temperature": 0}).encode()
        head = (b"POST /completion HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nConnection: close\r\n"
                + f"Content-Length: {len(body)}\r\n\r\n".encode())
        host, port = self.url.split("//")[1].split(":")
        s = socket.create_connection((host, int(port)), timeout=120)
        for i in range(0, len(head), max(1, len(head) // 8)):  # the head in 8 pieces over 2 s
            s.sendall(head[i:i + max(1, len(head) // 8)])
            time.sleep(0.25)
        s.sendall(body)
        data = b""
        while True:
            chunk = s.recv(65536)
            if not chunk:
                break
            data += chunk
        s.close()
        return data.startswith(b"HTTP/1.1 200"), data[:40].decode(errors="replace")

    KINDS = [("chat", 3), ("chat_stream", 3), ("chat_prediction", 3), ("apply", 2), ("infill", 3), ("session", 1),
             ("leaver", 1), ("malformed", 1), ("oversized", 1), ("slow", 1)]

    def run_kind(self, kind, rng):
        if kind == "chat": return self.chat(rng, False, False)
        if kind == "chat_stream": return self.chat(rng, True, False)
        if kind == "chat_prediction": return self.chat(rng, rng.random() < 0.5, True)
        return getattr(self, kind)(rng)

    def client(self, i):
        rng = random.Random(1000 + i)
        kinds = [k for k, w in self.KINDS for _ in range(w)]
        while not self.stop.is_set():
            kind = rng.choice(kinds)
            t = time.monotonic()
            try:
                ok, err = self.run_kind(kind, rng)
            except Exception as e:
                ok, err = False, type(e).__name__ + ": " + str(e)[:80]
            self.record(kind, ok, time.monotonic() - t, err)

    # --- watchers
    def sample(self):
        """RSS, the prompt store's bytes (/metrics: a cache that fills to --cache-ram by design), descriptors"""
        try:
            with open(f"/proc/{self.pid}/status") as f:
                rss = next(int(l.split()[1]) for l in f if l.startswith("VmRSS:")) / 1024
            fds = len(os.listdir(f"/proc/{self.pid}/fd"))
            with urllib.request.urlopen(self.url + "/metrics", timeout=30) as r:
                store = next(float(l.split()[1]) for l in r.read().decode().splitlines()
                             if l.startswith("editspec_prompt_store_bytes ")) / (1 << 20)
        except (OSError, StopIteration, ValueError):
            return
        self.samples.append((round(time.monotonic() - self.t0, 1), round(rss, 1), fds, round(store, 1)))

    def fixed_answers(self):
        out = []
        for it in self.items[:3]:
            status, data = post(self.url + "/v1/chat/completions", self.chat_body(it, False, False))
            out.append(json.loads(data)["choices"][0]["message"]["content"] if status == 200 else f"HTTP {status}")
        return out

    def watch(self, reference):
        next_sample, next_check = 0.0, 60.0
        while not self.stop.wait(1.0):
            now = time.monotonic() - self.t0
            if now >= next_sample:
                self.sample()
                next_sample += 10
            if now >= next_check:
                got = self.fixed_answers()
                self.answers_checked += 1
                for k, (a, b) in enumerate(zip(reference, got)):
                    if a != b:
                        self.answers_changed.append({"minute": round(now / 60, 1), "request": k, "first": a, "now": b})
                next_check += 60


def percentile(xs, p):
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(p / 100 * len(xs)))] if xs else 0.0


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--binary", required=True)
    ap.add_argument("--minutes", type=float, default=60)
    ap.add_argument("--slots", type=int, default=2)
    ap.add_argument("--clients", type=int, default=0, help="default: twice the slots")
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--max-body-mb", type=int, default=1, help="the server's --max-body-mb (the oversized body is past it)")
    ap.add_argument("--cache-ram", type=int, default=512,
                    help="the server's --cache-ram, MiB: the prompt store fills to it within minutes (the RSS check "
                         "subtracts what it holds)")
    ap.add_argument("--es-args", default="", help="more `editspec serve` options")
    ap.add_argument("--dataset", default=os.path.join(root, "datasets/canitedit/normalized.jsonl"))
    ap.add_argument("--out", help="folder for soak.json and soak.txt")
    ap.add_argument("--check", action="store_true")
    args = ap.parse_args()
    n_clients = args.clients or 2 * args.slots
    items = [json.loads(l) for l in open(args.dataset)]
    items = [it for it in items if len(it["code_before"]) < 3000]
    tmp = tempfile.TemporaryDirectory()
    serve_args = ["-t", str(args.threads), "--parallel", str(args.slots), "--max-body-mb", str(args.max_body_mb),
                  "--cache-ram", str(args.cache_ram)] + args.es_args.split()
    server, port, log = start_serve(args.binary, serve_args, tmp.name)
    url = f"http://127.0.0.1:{port}"
    cmd = [args.binary, "serve"] + serve_args
    s = soak(args, url, server.pid, items)
    reference = s.fixed_answers()
    print(f"soak: {' '.join(cmd[1:])}\nsoak: {n_clients} clients for {args.minutes:g} min", flush=True)
    threads = [threading.Thread(target=s.client, args=(i,), daemon=True) for i in range(n_clients)]
    watcher = threading.Thread(target=s.watch, args=(reference,), daemon=True)
    for t in threads + [watcher]:
        t.start()
    end = s.t0 + args.minutes * 60
    crashed = None
    while time.monotonic() < end:
        time.sleep(1)
        if server.poll() is not None:
            crashed = server.returncode
            break
        if int(time.monotonic() - s.t0) % 300 == 0:
            with s.lock:
                done = sum(st["n"] for st in s.stats.values())
                bad = sum(st["failed"] for st in s.stats.values())
            print(f"soak: {(time.monotonic() - s.t0) / 60:.0f} min, {done} requests, {bad} failed, "
                  f"RSS {s.samples[-1][1] if s.samples else '?'} MiB", flush=True)
    s.stop.set()
    for t in threads:
        t.join(timeout=310)
    s.sample()
    final_answers = s.fixed_answers() if crashed is None else []
    if final_answers and final_answers != reference:
        s.answers_changed.append({"minute": round((time.monotonic() - s.t0) / 60, 1), "request": "end", "first": reference,
                                  "now": final_answers})
    if crashed is None:
        server.terminate()
        server.wait()
    # RSS less the prompt store's bytes: after the first 5 minutes (a third of a shorter run) against
    # the last sample
    settle = 300 if args.minutes >= 10 else args.minutes * 20
    base_sample = next((x for x in s.samples if x[0] >= settle), None)
    base = round(base_sample[1] - base_sample[3], 1) if base_sample else None
    last = round(s.samples[-1][1] - s.samples[-1][3], 1) if s.samples else None
    growth = (last / base - 1) if base and last else 0.0
    lines = [f"soak: `editspec {' '.join(cmd[1:])}`, {n_clients} clients, {args.minutes:g} min",
             f"{'kind':16} {'requests':>8} {'failed':>6} {'p50 s':>7} {'p99 s':>7}  errors"]
    failed_valid = 0
    for kind, _ in s.KINDS:
        st = s.stats.get(kind, {"n": 0, "failed": 0, "lat": [], "errors": {}})
        failed_valid += st["failed"]
        lines.append(f"{kind:16} {st['n']:8} {st['failed']:6} {percentile(st['lat'], 50):7.2f} {percentile(st['lat'], 99):7.2f}  "
                     + ", ".join(f"{e} x{n}" for e, n in st["errors"].items()))
    lines.append(f"RSS less the prompt store, MiB, at {settle:g} s: {base}, at the end: {last} ({growth * 100:+.1f}%); "
                 f"RSS {s.samples[0][1] if s.samples else '?'} -> {s.samples[-1][1] if s.samples else '?'} MiB, the store "
                 f"{s.samples[-1][3] if s.samples else '?'} MiB at the end; descriptors "
                 f"{min((x[2] for x in s.samples), default=0)}-{max((x[2] for x in s.samples), default=0)}")
    lines.append(f"fixed greedy answers re-asked {s.answers_checked} times (and at the end): "
                 f"{len(s.answers_changed)} changed")
    lines.append(f"server: {'exited with ' + str(crashed) if crashed is not None else 'up to the end'}")
    text = "\n".join(lines)
    print(text)
    if args.out:
        os.makedirs(args.out, exist_ok=True)
        with open(os.path.join(args.out, "soak.txt"), "w") as f:
            f.write(text + "\n")
        with open(os.path.join(args.out, "soak.json"), "w") as f:
            json.dump({"command": cmd[1:], "clients": n_clients, "minutes": args.minutes,
                       "kinds": {k: {kk: vv for kk, vv in v.items() if kk != "lat"} | {
                           "p50_s": percentile(v["lat"], 50), "p99_s": percentile(v["lat"], 99)} for k, v in s.stats.items()},
                       "samples": s.samples, "rss_growth": growth, "answers_changed": s.answers_changed,
                       "crashed": crashed}, f, indent=1)
    if args.check:
        problems = []
        if failed_valid: problems.append(f"{failed_valid} failed requests")
        if crashed is not None: problems.append(f"the server exited ({crashed})")
        if s.answers_changed: problems.append("answers changed")
        if growth > 0.10: problems.append(f"RSS grew {growth * 100:.1f}%")
        if problems:
            print("soak: FAILED: " + "; ".join(problems))
            if crashed is not None:
                print(open(log).read()[-4000:])
            sys.exit(1)
        print("soak: passed")


if __name__ == "__main__":
    main()
