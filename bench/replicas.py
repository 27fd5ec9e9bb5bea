#!/usr/bin/env python3
"""Replicas behind HAProxy: does each conversation's later turn land where its cache is?

    bench/replicas.py                       the bar's load: 2 replicas, 8 clients x 20 conversations of
                                            3 turns, through one replica (the reference answers), then
                                            routed by cache key and round-robin in turn, then again by
                                            key with one replica killed a third of the way in
    bench/replicas.py --check --clients 2 --conversations 3    the CI test (tests/CMakeLists.txt)

Each conversation opens with its own CanItEdit file (datasets/canitedit) and asks for edits over
three turns through /v1/chat/completions, streamed, with "prompt_cache_key" set to the conversation's
id (what Zed and the OpenAI SDKs send). A later turn counts as a cache hit when the replica had
its conversation's previous prompt cached (cached_tokens >= that prompt's tokens), which a
round-robin balancer gets only by chance; cached_tokens > 0 is reported too (a shared template
prefix makes it loose). Deploy: deploy/replicas.sh and deploy/haproxy.cfg.in; docs/scale-out.md.
With --check it exits 1 when a bar is missed: errors, hits < 95 % by key, conversations not spread
over the replicas, a reference run (one server) with an error, an answer that differs from the one
server's (greedy) or that could not be compared with one, a failed request that had not started
when a replica was killed, or an in-flight one that took over 2 s to fail.
"""
import argparse
import http.client
import json
import os
import random
import signal
import subprocess
import sys
import threading
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
TURNS = ["Add type hints to every function.", "Now add a docstring to each function.",
         "Rename the first function's arguments to clearer names.", "Add input validation."]


def files():
    with open(os.path.join(ROOT, "datasets", "canitedit", "normalized.jsonl")) as f:
        return [json.loads(line)["code_before"] for line in f]


def start_replicas(a, balance, port, d):
    cmd = [os.path.join(ROOT, "deploy", "replicas.sh"), "--replicas", str(a.replicas), "--port", str(port),
           "--balance", balance, "--dir", d, "--", "-t", "1"]
    if a.model:
        cmd += ["-m", a.model]
    p = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, start_new_session=True)
    for line in p.stdout:
        if line.startswith("replicas:") and "behind" in line:
            threading.Thread(target=lambda: [None for _ in p.stdout], daemon=True).start()
            return p
        sys.stderr.write(line)
    raise SystemExit(f"replicas: deploy/replicas.sh ended before serving (logs in {d})")


def stop_replicas(p):
    try:
        os.killpg(p.pid, signal.SIGTERM)
    except ProcessLookupError:
        pass
    p.wait(timeout=60)


def chat(port, messages, key, timeout, max_tokens):
    """one streamed turn: (status, text, usage, replica, ttft_s, total_s, error, started: a replica answered)"""
    body = json.dumps({"model": "editspec", "messages": messages, "stream": True, "temperature": 0, "max_tokens": max_tokens,
                       "stream_options": {"include_usage": True}, "prompt_cache_key": key})
    t0 = time.monotonic()
    ttft, text, usage, started = None, "", None, False
    try:
        c = http.client.HTTPConnection("127.0.0.1", port, timeout=timeout)
        c.request("POST", "/v1/chat/completions", body, {"Content-Type": "application/json"})
        r = c.getresponse()
        replica = r.getheader("X-Editspec-Replica", "?")
        started = True   # a replica answered: it had taken the request
        if r.status != 200:
            return r.status, "", None, replica, None, time.monotonic() - t0, r.read()[:200].decode("utf-8", "replace"), True
        done = False
        for raw in r:
            line = raw.decode("utf-8", "replace").strip()
            if not line.startswith("data:"):
                continue
            data = line[5:].strip()
            if data == "[DONE]":
                done = True
                break
            ev = json.loads(data)
            if ev.get("usage"):
                usage = ev["usage"]
            for ch in ev.get("choices", []):
                piece = (ch.get("delta") or {}).get("content") or ""
                if piece and ttft is None:
                    ttft = time.monotonic() - t0
                text += piece
        c.close()
        if not done:
            return 200, text, usage, replica, ttft, time.monotonic() - t0, "the stream ended without [DONE]", started
        return 200, text, usage, replica, ttft, time.monotonic() - t0, "", True
    except (OSError, http.client.HTTPException, ValueError) as e:
        return 0, text, usage, "?", ttft, time.monotonic() - t0, f"{type(e).__name__}: {e}", started


def run_load(a, port, convs, kill=None):
    """every client's conversations in turn; kill = (pid, after_n_requests) kills that replica then"""
    rows, lock, n_done = [], threading.Lock(), [0]
    killed_at = [None]

    def client(ci):
        for k in range(a.conversations):
            conv = convs[ci * a.conversations + k]
            messages = [{"role": "system", "content": "You edit code. Answer with the whole file."},
                        {"role": "user", "content": "```python\n" + conv["file"] + "```\n" + TURNS[0]}]
            for t in range(a.turns):
                status, text, usage, replica, ttft, total, err, started = chat(port, messages, conv["id"], a.timeout, a.max_tokens)
                t_end = time.monotonic()
                u = usage or {}
                row = {"conv": conv["id"], "turn": t, "status": status, "replica": replica, "ttft_s": ttft, "text": text,
                       "total_s": total, "error": err, "started": started, "t_end": t_end,
                       "prompt_tokens": u.get("prompt_tokens"),
                       "cached_tokens": (u.get("prompt_tokens_details") or {}).get("cached_tokens")}
                with lock:
                    rows.append(row)
                    n_done[0] += 1
                    if kill and killed_at[0] is None and n_done[0] >= kill[1]:
                        os.kill(kill[0], signal.SIGKILL)
                        killed_at[0] = time.monotonic()
                if status != 200 or err:
                    break
                messages = messages + [{"role": "assistant", "content": text},
                                       {"role": "user", "content": TURNS[(t + 1) % len(TURNS)]}]

    threads = [threading.Thread(target=client, args=(ci,)) for ci in range(a.clients)]
    t0 = time.monotonic()
    for th in threads:
        th.start()
    for th in threads:
        th.join()
    return rows, time.monotonic() - t0, killed_at[0]


def summarize(rows, killed_at=None):
    by_conv = {}
    for r in sorted(rows, key=lambda r: (r["conv"], r["turn"])):
        by_conv.setdefault(r["conv"], []).append(r)
    later, hits, any_cached, same = 0, 0, 0, 0
    for turns in by_conv.values():
        for prev, cur in zip(turns, turns[1:]):
            if cur["status"] != 200 or cur["error"]:
                continue
            later += 1
            c = cur["cached_tokens"] or 0
            hits += c >= (prev["prompt_tokens"] or 1)
            any_cached += c > 0
            same += cur["replica"] == turns[0]["replica"]
    ok = [r for r in rows if r["status"] == 200 and not r["error"]]
    ttft_later = [r["ttft_s"] for r in ok if r["turn"] > 0 and r["ttft_s"] is not None]
    failed = [r for r in rows if r["status"] != 200 or r["error"]]
    s = {"requests": len(rows), "errors": len(failed), "later_turns": later,
         "hit_rate": hits / later if later else 0.0, "cached_gt0_rate": any_cached / later if later else 0.0,
         "same_replica_rate": same / later if later else 0.0,
         "mean_ttft_later_s": sum(ttft_later) / len(ttft_later) if ttft_later else None,
         "replicas": sorted({r["replica"] for r in ok})}
    if killed_at is not None:
        # a request that failed before any replica answered had not started (the balancer should have
        # retried it); one whose replica had answered (a stream begun) had, and must fail fast
        s["failed_not_started"] = sum(1 for r in failed if not r["started"])
        s["failed_in_flight"] = sum(1 for r in failed if r["started"])
        s["in_flight_fail_after_kill_s"] = max([r["t_end"] - killed_at for r in failed if r["started"]], default=0.0)
        s["errors_detail"] = sorted({r["error"] or str(r["status"]) for r in failed})[:5]
    return s


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--replicas", type=int, default=2)
    ap.add_argument("--clients", type=int, default=8)
    ap.add_argument("--conversations", type=int, default=20, help="per client")
    ap.add_argument("--turns", type=int, default=3)
    ap.add_argument("--max-tokens", type=int, default=24, help="each answer's limit")
    ap.add_argument("--model", default="", help="GGUF (default: the shipped target)")
    ap.add_argument("--port", type=int, default=0, help="the balancer's port (default: a free one from 21000)")
    ap.add_argument("--timeout", type=float, default=300)
    ap.add_argument("--no-kill", action="store_true", help="skip the run that kills a replica")
    ap.add_argument("--no-roundrobin", action="store_true", help="skip the round-robin run")
    ap.add_argument("--check", action="store_true", help="exit 1 when a bar is missed (the CI test)")
    ap.add_argument("--out", default="", help="write the figures and every request's row here (JSON)")
    a = ap.parse_args()
    if a.clients * a.conversations > 10000 or a.turns < 2:
        raise SystemExit("replicas: at most 10000 conversations, at least 2 turns")
    src = files()
    rng = random.Random(1)
    convs = [{"id": f"conv-{i:04d}-{rng.getrandbits(32):08x}", "file": src[i % len(src)]}
             for i in range(a.clients * a.conversations)]
    port = a.port or 21000 + random.Random().randrange(3000) * 10
    import tempfile
    result = {"setup": dict(vars(a)), "runs": {}}
    n_replicas_asked = a.replicas
    modes = [("single", False), ("key", False)] + ([] if a.no_roundrobin else [("roundrobin", False)]) + \
            ([] if a.no_kill else [("key-kill", True)])
    for name, kill in modes:
        with tempfile.TemporaryDirectory(prefix=f"editspec-replicas-{name}-") as d:
            a.replicas = 1 if name == "single" else n_replicas_asked   # "single": one server behind the balancer
            p = start_replicas(a, "roundrobin" if name == "roundrobin" else "key", port, d)
            a.replicas = n_replicas_asked
            try:
                k = None
                if kill:
                    k = (int(open(os.path.join(d, "replica-1.pid")).read()), max(1, len(convs) * a.turns // 3))
                rows, secs, killed_at = run_load(a, port, convs, k)
            finally:
                stop_replicas(p)
        s = summarize(rows, killed_at if kill else None)
        s["seconds"] = round(secs, 1)
        if name != "single":   # greedy: every answer a replica gave is the one server's answer
            ok = lambda r: r["status"] == 200 and not r["error"]
            ref = {(r["conv"], r["turn"]): r for r in result["runs"]["single"]["rows"] if ok(r)}
            both = [(r, ref[(r["conv"], r["turn"])]) for r in rows if ok(r) and (r["conv"], r["turn"]) in ref]
            s["answers_equal_single"] = sum(r["text"] == q["text"] for r, q in both)
            s["answers_compared"] = len(both)
        result["runs"][name] = {"summary": s, "rows": rows}
        print(f"replicas: {name:10s} " + json.dumps(s), flush=True)
    if a.out:
        with open(a.out, "w") as f:
            json.dump(result, f, indent=1)
    if a.check:
        bad = []
        # the reference: every answer of the other runs is compared with one server's, so it must
        # have answered every request (a reference run that failed would compare nothing)
        single = result["runs"]["single"]["summary"]
        if single["errors"] or single["requests"] != len(convs) * a.turns:
            bad.append(f"single: {single['errors']} errors in {single['requests']} of {len(convs) * a.turns} requests "
                       "(the reference answers)")
        key = result["runs"]["key"]["summary"]
        if key["errors"]:
            bad.append(f"key: {key['errors']} errors")
        if key["hit_rate"] < 0.95:
            bad.append(f"key: hit rate {key['hit_rate']:.2f} < 0.95")
        if len(key["replicas"]) < min(2, a.replicas):
            bad.append(f"key: every conversation went to {key['replicas']}")
        for name in result["runs"]:
            r = result["runs"][name]["summary"]
            if name != "single" and r["answers_equal_single"] != r["answers_compared"]:
                bad.append(f"{name}: {r['answers_compared'] - r['answers_equal_single']} answers differ from one server's")
            if name != "single" and r["answers_compared"] != r["requests"] - r["errors"]:
                bad.append(f"{name}: {r['answers_compared']} of {r['requests'] - r['errors']} answers compared with one server's")
        if "key-kill" in result["runs"]:
            kk = result["runs"]["key-kill"]["summary"]
            if kk["failed_not_started"]:
                bad.append(f"kill: {kk['failed_not_started']} requests failed that had not started ({kk['errors_detail']})")
            if kk["in_flight_fail_after_kill_s"] > 2.0:
                bad.append(f"kill: an in-flight request took {kk['in_flight_fail_after_kill_s']:.1f} s to fail")
        print("replicas: " + ("; ".join(bad) if bad else "every bar met"))
        sys.exit(1 if bad else 0)


if __name__ == "__main__":
    main()
