#!/usr/bin/env python3
"""Slow clients against `editspec serve`: N connections trickle header bytes, others ask at the same time.

    python3 bench/slow-clients.py --binary build/bin/editspec [--connections 1000] [--tries 8] [--check]
    python3 bench/slow-clients.py --url http://127.0.0.1:8012 ...        a server already running

N connections (one machine, loopback) each send a request line and then one header byte every
--interval seconds, never finishing their head (slowloris); one the server closes comes back at its
next byte. Once they are open, each of --tries rounds asks GET /health on a new connection and a small
/completion (4 tokens), one after the other, and times them. With --check the exit status is 1 unless
every /health answered 200 within --health-max seconds and every completion answered 200 (issue 58's
bar: 1,000 connections, 8 tries, /health <= 1 s). With --binary the server is started with its
defaults (the shipped models) and `--es-args`; its /metrics connection counters are printed at the end.
"""
import argparse, json, os, socket, sys, tempfile, threading, time, urllib.request

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from concurrency import start_serve  # noqa: E402 - beside this file


class trickle:
    """N slow connections on one thread: each sends a byte every interval; closed ones reconnect."""

    def __init__(self, host, port, n, interval):
        self.addr, self.n, self.interval = (host, port), n, interval
        self.socks = [None] * n
        self.next_at = [0.0] * n
        self.connects = 0
        self.closed_by_server = 0
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self.run, daemon=True)

    def open(self, i):
        s = socket.socket()
        s.setblocking(False)
        try:
            s.connect(self.addr)
        except BlockingIOError:
            pass
        except OSError:
            s.close()
            return
        self.socks[i] = [s, False]  # socket, request line sent
        self.connects += 1

    def reopen(self, i):
        self.socks[i][0].close()
        self.socks[i] = None
        self.open(i)

    def tick(self, i, now):
        ent = self.socks[i]
        if ent is None:
            self.open(i)
            return
        s, started = ent
        try:
            # the server closed it (evicted, timed out, refused): read what it sent, then reconnect
            s.recv(4096)
            self.closed_by_server += 1
            self.reopen(i)
            return
        except BlockingIOError:
            pass
        except OSError:
            self.reopen(i)
            return
        try:
            s.send(b"X-Slow: a" if started else b"GET /health HTTP/1.1\r\nHost: x\r\n")
            ent[1] = True
        except BlockingIOError:
            pass
        except OSError:
            self.reopen(i)

    def run(self):
        t0 = time.monotonic()
        for i in range(self.n):  # spread over one interval
            self.next_at[i] = t0 + self.interval * i / self.n
        while not self.stop.is_set():
            now = time.monotonic()
            for i in range(self.n):
                if self.next_at[i] <= now:
                    self.tick(i, now)
                    self.next_at[i] = now + self.interval
            time.sleep(0.02)
        for ent in self.socks:
            if ent:
                ent[0].close()

    def held(self):
        return sum(1 for e in self.socks if e is not None)


def timed(req, timeout):
    t = time.monotonic()
    try:
        with urllib.request.urlopen(req, timeout=timeout) as r:
            r.read()
            return r.status, time.monotonic() - t
    except urllib.error.HTTPError as e:
        return e.code, time.monotonic() - t
    except Exception as e:
        return type(e).__name__, time.monotonic() - t


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--binary", help="editspec to start (else --url)")
    ap.add_argument("--url", help="a server already running")
    ap.add_argument("--es-args", default="", help="more `editspec serve` options")
    ap.add_argument("--connections", type=int, default=1000)
    ap.add_argument("--interval", type=float, default=2.0, help="seconds between a slow connection's bytes")
    ap.add_argument("--tries", type=int, default=8)
    ap.add_argument("--health-max", type=float, default=1.0, help="seconds /health may take (--check)")
    ap.add_argument("--deadline", type=float, default=0,
                    help="first, one connection trickling a byte every 0.5 s must be closed within this many seconds "
                         "(+2; the server's --request-read-timeout, passed in --es-args)")
    ap.add_argument("--check", action="store_true", help="exit 1 unless every try passed")
    args = ap.parse_args()
    if bool(args.binary) == bool(args.url):
        sys.exit("slow-clients: give --binary or --url")
    server, log = None, None
    tmp = tempfile.TemporaryDirectory()
    if args.binary:
        server, port, log = start_serve(args.binary, ["-t", "2"] + args.es_args.split(), tmp.name)
        url = f"http://127.0.0.1:{port}"
    else:
        url = args.url.rstrip("/")
    host, port = url.split("//")[1].split(":")
    failed = 0
    if args.deadline > 0:
        s = socket.create_connection((host, int(port)))
        s.settimeout(0.5)
        s.sendall(b"GET /health HTTP/1.1\r\nHost: x\r\n")
        t0 = time.monotonic()
        closed_after = None
        while time.monotonic() - t0 < args.deadline + 10:
            try:
                if s.recv(4096) == b"":
                    closed_after = time.monotonic() - t0
                    break
            except socket.timeout:
                pass
            except OSError:
                closed_after = time.monotonic() - t0
                break
            try:
                s.sendall(b"a")
            except OSError:
                closed_after = time.monotonic() - t0
                break
        s.close()
        ok = closed_after is not None and closed_after <= args.deadline + 2
        failed += not ok
        print(f"slow-clients: one connection trickling a byte every 0.5 s: closed after "
              f"{'never' if closed_after is None else f'{closed_after:.1f} s'} (deadline {args.deadline:g} s) "
              f"{'ok' if ok else 'FAILED'}")
    flood = trickle(host, int(port), args.connections, args.interval)
    flood.thread.start()
    time.sleep(args.interval * 2)  # every slow connection open and trickling
    body = json.dumps({"prompt": "def add(a, b):\n", "n_predict": 4, "temperature": 0}).encode()
    print(f"slow-clients: {args.connections} connections trickling a header byte every {args.interval:g} s; "
          f"{flood.held()} open, {flood.connects} connects so far")
    for t in range(args.tries):
        hs, ht = timed(url + "/health", 10)
        req = urllib.request.Request(url + "/completion", data=body, headers={"Content-Type": "application/json"})
        cs, ct = timed(req, 60)
        ok = hs == 200 and ht <= args.health_max and cs == 200
        failed += not ok
        print(f"  try {t + 1}: /health {hs} in {ht:.3f} s, /completion {cs} in {ct:.3f} s {'ok' if ok else 'FAILED'}"
              f" ({flood.connects} connects, {flood.closed_by_server} closed by the server)", flush=True)
        time.sleep(args.interval)
    flood.stop.set()
    flood.thread.join()
    status, _ = timed(url + "/health", 10)
    if server:
        try:
            with urllib.request.urlopen(url + "/metrics", timeout=10) as r:
                for line in r.read().decode().splitlines():
                    if line.startswith(("editspec_connections", "editspec_requests_read_timeout")):
                        print("  " + line)
        except Exception as e:
            print(f"  /metrics: {e}")
        server.terminate()
        server.wait()
    print(f"slow-clients: {args.tries - failed} of {args.tries} tries passed; /health after: {status}")
    if args.check and (failed or status != 200):
        sys.exit(1)


if __name__ == "__main__":
    main()
