#!/usr/bin/env python3
"""Faults outside HTTP lose nothing: a full disk, a writer killed mid-write, a file changed under a session.

    tests/cli/faults.py --binary build/bin/editspec --model tiny.gguf

- A full disk (a small tmpfs mounted by this script in a mount namespace of its own, `unshare -m`,
  or `unshare -rm` when not root) during `apply --in-place` and `index`: each exits 1 or 2 with an
  error that names the file, the file being edited is intact, nothing partial is left beside it.
  Where no namespace can be made, the same runs under RLIMIT_FSIZE (writes past a size fail), said
  in the output.
- `index` and `make-model` killed (SIGKILL) while their output is being written: the path asked
  for is absent, and the partial file they were writing, loaded, is refused with a message.
- `editspec session` on a file changed on disk after it was opened: said on the operation's line and
  on stderr, not silently wrong.
The prompt store (serve --cache-ram) holds KV states in RAM only: it writes nothing to disk.
"""
import argparse, glob, json, os, resource, signal, shutil, subprocess, sys, tempfile, time

failures = []


def check(cond, what):
    print(("  ok   " if cond else "  FAIL ") + what, flush=True)
    if not cond:
        failures.append(what)


def run(cmd, limit_bytes=None, **kw):
    def cap():
        if limit_bytes is not None:
            signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
            resource.setrlimit(resource.RLIMIT_FSIZE, (limit_bytes, limit_bytes))
    return subprocess.run(cmd, capture_output=True, text=True, preexec_fn=cap, **kw)


def fill(folder):
    """fills the filesystem of folder to the last byte"""
    for name, chunk in (("filler", 4096), ("filler2", 1)):  # then single bytes into a last partial block
        fd = os.open(os.path.join(folder, name), os.O_WRONLY | os.O_CREAT)
        try:
            while True:
                os.write(fd, b"\0" * chunk)
        except OSError:
            pass
        finally:
            os.close(fd)


def disk_full(args, mnt, limited):
    print(f"disk full ({'RLIMIT_FSIZE: writes past 4 KiB fail' if limited else 'a 1 MiB tmpfs, filled'})")
    cap = 4096 if limited else None
    src = os.path.join(mnt, "code.py")
    code = "".join(f"def f{i}(x):\n    return x + {i}\n\n" for i in range(200))  # 6 KiB
    with open(src, "w") as f:
        f.write(code)
    repo = os.path.join(args.tmp, "repo")
    os.makedirs(repo, exist_ok=True)
    for i in range(20):
        with open(os.path.join(repo, f"m{i}.py"), "w") as f:
            f.write(code)
    upd = os.path.join(args.tmp, "update.py")
    with open(upd, "w") as f:  # the first line beside the last return: the rest deleted, a short merge
        f.write("def f0(x):\n    return x + 199\n")
    if not limited:
        fill(mnt)
    before = sorted(os.listdir(mnt))
    # an apply (constrained: it ends, whole, on a random model too; a merge cut short is never written);
    # its backup of the 6 KiB file is the write that fails
    r = run([args.binary, "apply", "-m", args.model, "-t", "1", "-f", src, "-u", upd, "--in-place"], cap)
    check(r.returncode in (1, 2), f"apply --in-place on a full disk exits 1 or 2 (got {r.returncode})")
    check("code.py" in r.stderr and ("No space" in r.stderr or "too large" in r.stderr or "cannot write" in r.stderr),
          "its error names the file and the cause: " + r.stderr.strip().splitlines()[-1:][0] if r.stderr.strip() else "(none)")
    check(open(src).read() == code, "the file being edited is intact")
    check(sorted(os.listdir(mnt)) == before, "no temporary file left beside it")
    out = os.path.join(mnt, "repo.eds")
    r = run([args.binary, "index", "-m", args.model, "--repo", repo, "-o", out, "-q"], cap)
    check(r.returncode in (1, 2), f"index onto a full disk exits 1 or 2 (got {r.returncode})")
    check("repo.eds" in r.stderr, "its error names the file: " + (r.stderr.strip().splitlines() or ["(none)"])[-1])
    check(sorted(os.listdir(mnt)) == before, "no datastore and no partial file left: " + str(sorted(os.listdir(mnt))))


def wait_for(pattern, proc, seconds=60):
    t = time.monotonic()
    while time.monotonic() - t < seconds:
        hits = [p for p in glob.glob(pattern) if os.path.getsize(p) > 0]
        if hits:
            return hits[0]
        if proc.poll() is not None:
            return None
        time.sleep(0.005)
    return None


def killed_writers(args):
    print("writers killed mid-write")
    d = os.path.join(args.tmp, "killed")
    os.makedirs(d, exist_ok=True)
    repo = os.path.join(args.tmp, "bigrepo")
    os.makedirs(repo, exist_ok=True)
    body = "".join(f"def h{i}(a, b):\n    return a * {i} - b\n\n" for i in range(3000))
    for i in range(8):
        with open(os.path.join(repo, f"big{i}.py"), "w") as f:
            f.write(body)
    out = os.path.join(d, "big.eds")
    p = subprocess.Popen([args.binary, "index", "-m", args.model, "--repo", repo, "-o", out, "-q"],
                         stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    part = wait_for(out + "*", p)
    p.kill()
    p.wait()
    check(part is not None and part != out, f"index was killed while writing {part}")
    check(not os.path.exists(out), "the datastore asked for is absent")
    if part and os.path.exists(part):
        r = run([args.binary, "complete", "-m", args.model, "-t", "1", "--datastore", part, "--method", "rest",
                 "-p", "def f(", "-n", "2"])
        check(r.returncode != 0 and ("truncated" in r.stderr or "corrupt" in r.stderr or "datastore" in r.stderr),
              "the partial datastore, loaded, is refused: " + (r.stderr.strip().splitlines() or ["(none)"])[-1])
    out = os.path.join(d, "m.gguf")
    p = subprocess.Popen([args.binary, "make-model", "--shape", "tiny-256", "--type", "f32", "--out", out],
                         stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    part = wait_for(out + "*", p, 120)
    p.kill()
    p.wait()
    check(part is not None and part != out, f"make-model was killed while writing {part}")
    check(not os.path.exists(out), "the model asked for is absent")
    if part and os.path.exists(part):
        r = run([args.binary, "complete", "-m", part, "-t", "1", "-p", "x", "-n", "1"])
        check(r.returncode != 0 and os.path.basename(part) in r.stderr,
              "the partial model, loaded, is refused naming it: " + (r.stderr.strip().splitlines() or ["(none)"])[-1])
    shutil.rmtree(d)


def changed_under_session(args):
    print("a file changed on disk under a live session")
    f = os.path.join(args.tmp, "doc.py")
    with open(f, "w") as fh:
        fh.write("def area(r):\n    return 3.14 * r * r\n")
    p = subprocess.Popen([args.binary, "session", "-", "-m", args.model, "-t", "1"], stdin=subprocess.PIPE,
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    p.stdin.write(json.dumps({"op": "open", "file": f}) + "\n")
    p.stdin.flush()
    first = p.stdout.readline()
    with open(f, "w") as fh:  # another editor saves the file
        fh.write("import math\n\ndef area(r):\n    return math.pi * r * r\n")
    p.stdin.write(json.dumps({"op": "edit", "offset": 0, "delete": 0, "insert": "# c\n"}) + "\n")
    p.stdin.close()
    rest = p.stdout.read()
    err = p.stderr.read()
    p.wait()
    line = json.loads(rest.splitlines()[0]) if rest.strip() else {}
    check(p.returncode == 0 and bool(first), f"the session ran (exit {p.returncode})")
    check("changed on disk" in str(line.get("warning", "")), "the edit's line says the file changed: " + str(line.get("warning")))
    check("changed on disk" in err, "and stderr says it")


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--binary", required=True)
    ap.add_argument("--model", required=True, help="a small model (the tests' tiny one)")
    ap.add_argument("--no-namespace", action="store_true", help="RLIMIT_FSIZE in place of a full tmpfs")
    ap.add_argument("--in-namespace", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.in_namespace:  # inside `unshare -m`: mount the tmpfs, fill it, run the disk-full checks
        args.tmp = args.in_namespace
        mnt = os.path.join(args.tmp, "full")
        os.makedirs(mnt, exist_ok=True)
        if subprocess.run(["mount", "-t", "tmpfs", "-o", "size=1m", "editspec-full", mnt]).returncode != 0:
            sys.exit(3)
        disk_full(args, mnt, False)
        sys.exit(1 if failures else 0)
    with tempfile.TemporaryDirectory() as tmp:
        args.tmp = tmp
        ns = None
        if shutil.which("unshare") and not args.no_namespace:
            for flags in (["-m"], ["-rm"]):
                probe = subprocess.run(["unshare"] + flags + ["true"], capture_output=True)
                if probe.returncode == 0:
                    ns = flags
                    break
        rc = 3
        if ns:
            rc = subprocess.run(["unshare"] + ns + [sys.executable, os.path.abspath(__file__), "--binary", args.binary,
                                                     "--model", args.model, "--in-namespace", tmp]).returncode
        if rc == 3:  # no namespace, or no tmpfs in it
            mnt = os.path.join(tmp, "capped")
            os.makedirs(mnt)
            disk_full(args, mnt, True)
        elif rc != 0:
            failures.append("disk full")
        killed_writers(args)
        changed_under_session(args)
    if failures:
        print(f"faults: {len(failures)} failed")
        sys.exit(1)
    print("faults: all passed")


if __name__ == "__main__":
    main()
