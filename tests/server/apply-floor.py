#!/usr/bin/env python3
"""The shipped models merge a fixed set of apply tasks right: a floor, not a figure in a results folder.

    tests/server/apply-floor.py --binary build/bin/editspec [--limit 20] [--min-exact 15]

Writes the CanItEdit apply tasks that fit the shipped target's training context (`editspec bench
--task apply --fit-train-ctx --write-tasks`), starts `editspec serve` with its defaults (the shipped
models) on a free loopback port, posts the first --limit of them to /v1/apply with
scripts/apply-check.py and fails when fewer than --min-exact merges are byte-for-byte right. The
floor: 16 of these 20 were exact when the shipped target was chosen
(docs/results/issue40-fim/mixed/apply-apply.txt, 52/56 over all 56); 15 leaves one near-tie of room.
"""
import argparse, os, socket, subprocess, sys, tempfile, time, urllib.request

root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--binary", required=True)
    ap.add_argument("--limit", type=int, default=20)
    ap.add_argument("--min-exact", type=int, default=15)
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        tasks = os.path.join(tmp, "tasks.jsonl")
        subprocess.run([args.binary, "bench", "--task", "apply", "--fit-train-ctx", "-t", "2", "--dataset",
                        os.path.join(root, "datasets/canitedit/normalized.jsonl"), "--write-tasks", tasks], check=True)
        port = free_port()
        log = os.path.join(tmp, "serve.log")
        with open(log, "w") as lf:
            server = subprocess.Popen([args.binary, "serve", "-t", "2", "--port", str(port)], stdout=lf,
                                      stderr=subprocess.STDOUT)
        try:
            for _ in range(600):
                if server.poll() is not None:
                    sys.exit(f"apply-floor: editspec serve exited with {server.returncode}:\n" + open(log).read())
                try:
                    urllib.request.urlopen(f"http://127.0.0.1:{port}/health", timeout=2)
                    break
                except Exception:
                    time.sleep(0.2)
            else:
                sys.exit("apply-floor: editspec serve did not come up:\n" + open(log).read())
            rc = subprocess.run([sys.executable, os.path.join(root, "scripts/apply-check.py"), tasks, "--url",
                                 f"http://127.0.0.1:{port}", "--limit", str(args.limit), "--min-exact",
                                 str(args.min_exact), "--timeout", "120"]).returncode
        finally:
            server.terminate()
            server.wait()
    sys.exit(rc)


if __name__ == "__main__":
    main()
