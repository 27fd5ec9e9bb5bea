#!/usr/bin/env python3
"""N clients at once against `editspec serve --parallel N` and `llama-server -np N`, one run.

    bench/concurrency.py --model ds13.gguf --clients 1,2,4,8 --mode plain
    bench/concurrency.py --model models/editspec-target.gguf --clients 4 --mode edit --spec-type ngram-simple
    bench/concurrency.py --model ds13.gguf --clients 1,8,32 --es build-cuda/bin/editspec --peers P/bin --peer-args "-ngl 99"
    bench/concurrency.py --model ds13.gguf --clients 16 --rounds 3 --base-es /tmp/editspec-before --base-es-args "--method ar"

With --base-es the peer is another editspec binary (an A/B of two builds or two settings: the same
requests, editspec's kind, both servers' /metrics), in the table's first column.

Modes (both servers get the same prompts, greedy, in the same run, alternating per client count):
  plain  each client sends --requests greedy POST /completion requests of --n-predict tokens, every
         prompt distinct (the first lines of CanItEdit files, a different file each; past the last file, each
         file's next lines)
  edit   each client sends CanItEdit edits (smallest first, a different item each): editspec gets
         OpenAI chat requests with the code as `prediction` (Predicted Outputs, as Continue and the
         OpenAI SDK send them); llama-server gets POST /completion with the same edit prompt text and
         drafts with --spec-type (its chat endpoint ignores `prediction`)

Each server answers --warm-up untimed requests first (the bar's "a warm-up request per server").
Prints, per server and client count: aggregate tokens/s (generated tokens / wall time from the first
request sent to the last answered), mean and max request latency, and editspec's ratio. The
editspec binary is build/bin/editspec; llama-server is llama.cpp's default build at the pinned commit
(scripts/setup-peers.sh). Each server gets --ctx-size per request (llama-server: -c N * ctx).
"""
import argparse, json, os, subprocess, sys, threading, time, urllib.error, urllib.request

root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def post(port, path, body, timeout=3600):
    req = urllib.request.Request(f"http://127.0.0.1:{port}{path}", json.dumps(body).encode(),
                                 {"Content-Type": "application/json"})
    return json.load(urllib.request.urlopen(req, timeout=timeout))


def wait_up(port, proc, log, seconds=300):
    """/health answers within `seconds` (a first `editspec serve` of a model measures its cost model
    before it listens: minutes for a 1.3B model on 2 cores)"""
    deadline = time.time() + seconds
    while time.time() < deadline:
        if proc.poll() is not None:
            sys.exit(f"server exited with {proc.returncode}; see {log}")
        try:
            urllib.request.urlopen(f"http://127.0.0.1:{port}/health", timeout=2)
            return
        except Exception:
            time.sleep(0.2)
    sys.exit(f"server did not come up in {seconds} s; see {log}")


def free_port():
    """a free loopback port"""
    import socket
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def start_serve(binary, serve_args, log_dir):
    """starts `binary serve --port P serve_args` on a free loopback port, its output in log_dir/serve.log,
    and waits for /health; returns (process, port, log path)"""
    port = free_port()
    log = os.path.join(log_dir, "serve.log")
    with open(log, "w") as lf:
        proc = subprocess.Popen([binary, "serve", "--port", str(port)] + serve_args, stdout=lf, stderr=subprocess.STDOUT)
    wait_up(port, proc, log)
    return proc, port, log


def stop(proc, seconds=30):
    """ends a server: SIGTERM, then SIGKILL after `seconds` (a llama-server once sat 18 minutes after its
    SIGTERM, and the run with it: on a lent GPU machine that is the whole call)"""
    proc.terminate()
    try:
        proc.wait(timeout=seconds)
    except subprocess.TimeoutExpired:
        print(f"server {proc.pid} still up {seconds} s after SIGTERM: killed", file=sys.stderr, flush=True)
        proc.kill()
        proc.wait()


def metrics(port):
    """editspec's /metrics counters, by name"""
    out = {}
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=30) as r:
        for line in r.read().decode().splitlines():
            if line and not line.startswith("#"):
                name, _, value = line.partition(" ")
                try:
                    out[name] = float(value)
                except ValueError:
                    pass
    return out


def fenced(code):
    # a fenced block closes on a line of its own: the code as editspec reads it from the message
    return code if code.endswith("\n") else code + "\n"


def edit_prompt(instr, code):
    # editspec's plain edit prompt, instruction first (include/editspec/edit.h), byte for byte as it
    # renders a chat message holding fenced code (src/server/api.cpp: the instruction stripped)
    return "### Instruction:\n" + instr.strip() + "\n### Original code:\n" + fenced(code) + "\n### Edited code:\n"


def run_clients(port, server, jobs_per_client, args):
    """jobs_per_client[c] = list of request bodies; returns (tokens, wall_s, latencies)"""
    lat, toks, errors = [], [0], []
    lock = threading.Lock()

    def client(jobs):
        for kind, body in jobs:
            t0 = time.time()
            try:
                if kind == "completion":
                    r = post(port, "/completion", body)
                    n = r["timings"]["predicted_n"] if "timings" in r else r.get("tokens_predicted", 0)
                else:
                    r = post(port, "/v1/chat/completions", body)
                    n = r["usage"]["completion_tokens"]
            except Exception as e:  # noqa: BLE001 - reported, and the run fails below
                msg = str(e)
                if isinstance(e, urllib.error.HTTPError):
                    msg += ": " + e.read().decode("utf-8", "replace")[:400]  # the server's own words
                with lock:
                    errors.append(msg)
                continue
            with lock:
                lat.append(time.time() - t0)
                toks[0] += n

    threads = [threading.Thread(target=client, args=(j,)) for j in jobs_per_client]
    t0 = time.time()
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    wall = time.time() - t0
    if errors:
        sys.exit(f"{server}: {len(errors)} requests failed, first: {errors[0]}")
    return toks[0], wall, lat


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--model", required=True)
    ap.add_argument("--clients", default="1,2,4,8", help="client counts, comma-separated")
    ap.add_argument("--mode", choices=["plain", "edit"], default="plain")
    ap.add_argument("--requests", type=int, default=2, help="requests per client")
    ap.add_argument("--n-predict", type=int, default=32, help="plain mode: tokens per request")
    ap.add_argument("--prompt-lines", type=int, default=6, help="plain mode: lines of a file per prompt")
    ap.add_argument("--max-tokens", type=int, default=400, help="edit mode: most tokens per answer")
    ap.add_argument("--ctx", type=int, default=None,
                    help="context per request (default 2048 plain; 4096 edit: CanItEdit's largest file, ~2,200 tokens, "
                         "and its answer fit, as they must once many clients' rounds reach the largest items)")
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--spec-type", default="", help="llama-server's --spec-type (edit mode: ngram-simple)")
    ap.add_argument("--port", type=int, default=8731)
    ap.add_argument("--dataset", default=os.path.join(root, "datasets/canitedit/normalized.jsonl"))
    ap.add_argument("--es", default=os.path.join(root, "build/bin/editspec"))
    ap.add_argument("--peers", default="", help="llama.cpp's bin folder (default: scripts/setup-peers.sh)")
    ap.add_argument("--es-args", default="", help="more editspec serve options")
    ap.add_argument("--peer-args", default="", help="more llama-server options (on a GPU: -ngl 99)")
    ap.add_argument("--base-es", default="", help="the peer is this editspec binary instead of llama-server")
    ap.add_argument("--base-es-args", default="", help="more serve options for --base-es (default: --es-args)")
    ap.add_argument("--base-es-env", default="", help="KEY=VALUE,... in --base-es's environment only")
    ap.add_argument("--es-env", default="", help="KEY=VALUE,... in the editspec server's environment only")
    ap.add_argument("--rounds", type=int, default=1,
                    help="repeat the whole run, the servers' order swapped each round; the table gives medians (this "
                         "machine's speed drifts by 15-40%% within minutes: use 3 or more for a ratio you quote)")
    ap.add_argument("--warm-up", type=int, default=1,
                    help="untimed requests each server answers first (a prompt none of the clients sends; 0: none)")
    ap.add_argument("--interleave", action="store_true",
                    help="both servers up at once (ports --port and --port+1), the rounds of a client count back to "
                         "back: on a machine whose speed swings between rounds, a pair of rounds sees one speed (the memory of "
                         "both: ds13 at 16 clients ~9.4 GB each)")
    ap.add_argument("--json", default="", help="write the rows here too")
    args = ap.parse_args()
    if args.ctx is None:
        args.ctx = 4096 if args.mode == "edit" else 2048
    peer = "editspec-base" if args.base_es else "llama-server"
    peers = args.peers or args.base_es or subprocess.run([os.path.join(root, "scripts/setup-peers.sh")], check=True,
                                         capture_output=True, text=True).stdout.strip().splitlines()[-1]
    items = sorted((json.loads(l) for l in open(args.dataset)), key=lambda d: len(d["code_before"]))
    spec = args.spec_type or ("ngram-simple" if args.mode == "edit" else "")
    rows = []
    log_dir = os.environ.get("TMPDIR", "/tmp")
    prompts, warned = [], []

    def plain_prompt(k):
        """the k-th plain prompt: --prompt-lines lines of a file, the first lines of every file, then the
        next lines of those long enough, and so on (distinct prompts while the files last; past every file's
        last lines, the same prompts again, said once)"""
        if not prompts:
            longest = max(len(d["code_before"].splitlines(True)) for d in items)
            for w in range((longest + args.prompt_lines - 1) // args.prompt_lines):
                for d in items:
                    lines = d["code_before"].splitlines(True)
                    if len(lines) > w * args.prompt_lines:
                        prompts.append("".join(lines[w * args.prompt_lines:(w + 1) * args.prompt_lines]))
        if k >= len(prompts) and not warned:
            warned.append(k)
            print(f"warning: plain prompt {k + 1} asked, the files make {len(prompts)} distinct ones: the rest repeat them",
                  file=sys.stderr, flush=True)
        return prompts[k % len(prompts)]

    def jobs_for(server, clients, requests, first=0):
        """the request bodies of `clients` clients, `requests` each, from item `first` on"""
        out, k = [], first
        for c in range(clients):
            js = []
            for _ in range(requests):
                d = items[k % len(items)]
                k += 1
                if args.mode == "plain":
                    prompt = plain_prompt(k - 1)
                    js.append(("completion", {"prompt": prompt, "n_predict": args.n_predict, "temperature": 0,
                                              "top_k": 1, "cache_prompt": False}))
                elif server != "llama-server":
                    code = d["code_before"]
                    js.append(("chat", {"messages": [{"role": "user", "content": d["instruction_descriptive"] + "\n\n```\n" + fenced(code) + "```"}],
                                        "prediction": {"type": "content", "content": code},
                                        "max_tokens": args.max_tokens, "temperature": 0}))
                else:
                    js.append(("completion", {"prompt": edit_prompt(d["instruction_descriptive"], d["code_before"]),
                                              "n_predict": args.max_tokens, "temperature": 0, "top_k": 1,
                                              "cache_prompt": False}))
            out.append(js)
        return out

    def start(server, n, port, warm_first):
        """`server` up on `port` for n clients, its warm-up requests answered; returns the process"""
        log = os.path.join(log_dir, f"concurrency-{server}-{n}.log")
        env = dict(os.environ)
        if server == "llama-server":
            cmd = [os.path.join(peers, "llama-server"), "-m", args.model, "-t", str(args.threads), "-c", str(n * args.ctx),
                   "-np", str(n), "--host", "127.0.0.1", "--port", str(port)]  # its defaults: flash attention auto (on)
            if spec:
                cmd += ["--spec-type", spec]
            cmd += args.peer_args.split()
        else:
            base = server == "editspec-base"
            cmd = [args.base_es if base else args.es, "serve", "-m", args.model, "-t", str(args.threads), "--ctx-size",
                   str(args.ctx), "--parallel", str(n), "--port", str(port)]
            cmd += ((args.base_es_args or args.es_args) if base else args.es_args).split()
            for kv in filter(None, (args.base_es_env if base else args.es_env).split(",")):
                k, _, v = kv.partition("=")
                env[k] = v
        with open(log, "w") as lf:
            proc = subprocess.Popen(cmd, stdout=lf, stderr=subprocess.STDOUT, env=env)
        try:
            wait_up(port, proc, log)
            if args.warm_up > 0:
                # untimed, as a long-running server's first requests are: items after every client's
                run_clients(port, server, jobs_for(server, 1, args.warm_up, first=warm_first), args)
        except BaseException:
            stop(proc)
            raise
        return proc

    def measure(server, n, port, rnd, first):
        """one timed round of n clients against the server on `port`; appends and prints its row"""
        before = metrics(port) if server != "llama-server" else {}
        toks, wall, lat = run_clients(port, server, jobs_for(server, n, args.requests, first), args)
        steps = {}
        if server != "llama-server":
            # what the steps carried over the round (the warm-up requests and earlier rounds left out)
            after = metrics(port)
            d = {k: after.get(k, 0.0) - before.get(k, 0.0) for k in after}
            steps = {"requests_per_step": round(d.get("editspec_step_requests_total", 0) / max(1, d.get("editspec_steps_total", 0)), 2),
                     "ubatches_per_step": round(d.get("editspec_step_ubatches_total", 0) / max(1, d.get("editspec_steps_total", 0)), 2),
                     "tokens_per_step": round(d.get("editspec_step_tokens_total", 0) / max(1, d.get("editspec_steps_total", 0)), 2)}
            if d.get("editspec_step_modelled_seconds_total", 0) > 0:
                # the cost model's time for the steps against their measured time (each request at its depth)
                steps["step_model_over_measured"] = round(d.get("editspec_step_model_seconds_total", 0) /
                                                          d["editspec_step_modelled_seconds_total"], 2)
            busy = d.get("editspec_step_seconds_total", 0) + d.get("editspec_step_jobs_seconds_total", 0)
            if busy > 0:
                # the requests' host work on the engine's thread, as a share of its busy time
                steps["host_share"] = round(d.get("editspec_step_jobs_seconds_total", 0) / busy, 3)
                if "editspec_step_copy_seconds_total" in after:
                    # output rows copied out for the requests (inside the steps' time), and the rows read in place
                    steps["copy_share"] = round(d.get("editspec_step_copy_seconds_total", 0) / busy, 3)
                    steps["rows_lent"] = int(d.get("editspec_step_rows_lent_total", 0))
                    steps["rows_copied"] = int(d.get("editspec_step_rows_copied_total", 0))
                if "editspec_step_layout_seconds_total" in after:
                    # the requests' batches laid into the step's one (inside the steps' time)
                    steps["layout_share"] = round(d.get("editspec_step_layout_seconds_total", 0) / busy, 4)
                if d.get("editspec_steps_argmax_total", 0) > 0:
                    # steps that handed back each row's argmax, not its logits (EDITSPEC_DEVICE_ARGMAX=1)
                    steps["argmax_steps_share"] = round(d["editspec_steps_argmax_total"] /
                                                        max(1, d.get("editspec_steps_total", 0)), 3)
            if d.get("editspec_prompt_store_saved_total", 0) > 0:
                # states the prompt store kept this round, and of those the ones in an evicted state's buffer
                # (a fresh buffer's pages cost a fault each: a fresh server's rounds carry them)
                steps["store_saved"] = int(d["editspec_prompt_store_saved_total"])
                steps["store_recycled"] = int(d.get("editspec_prompt_store_recycled_total", 0))
            if "editspec_head_draft_calls_total" in after:
                steps["head_drafts_per_call"] = round(d.get("editspec_head_drafts_total", 0) /
                                                      max(1, d.get("editspec_head_draft_calls_total", 0)), 2)
        row = {"round": rnd, "server": server, "clients": n, "tokens": toks, "wall_s": round(wall, 2),
               "tok_s": round(toks / wall, 2), "lat_mean_s": round(sum(lat) / len(lat), 2), "lat_max_s": round(max(lat), 2)}
        row.update(steps)
        rows.append(row)
        print(json.dumps(row), flush=True)

    def order(rnd):
        return [peer, "editspec"] if rnd % 2 == 0 else ["editspec", peer]

    counts = [int(x) for x in args.clients.split(",")]
    if args.interleave:
        # both servers up at once, rounds back to back: a pair of rounds sees the machine in the same state.
        # Each round sends requests of its own (a server that kept an earlier round's prompts or outputs
        # would answer a repeated one from them), the warm-up ones after every round's
        for n in counts:
            per = n * args.requests
            if args.mode == "edit" and (args.rounds * per + args.warm_up) > len(items):
                print(f"warning: {n} clients x {args.rounds} rounds send {args.rounds * per} edits of {len(items)} items: "
                      "later rounds repeat earlier rounds' prompts, which editspec's prompt store may answer",
                      file=sys.stderr, flush=True)
            procs = {}
            try:
                for i, server in enumerate(order(0)):
                    procs[server] = (start(server, n, args.port + i, args.rounds * per), args.port + i)
                for rnd in range(args.rounds):
                    for server in order(rnd):
                        measure(server, n, procs[server][1], rnd, rnd * per)
            finally:
                for proc, _ in procs.values():
                    stop(proc)
    else:
        for rnd, n in [(r, n) for r in range(args.rounds) for n in counts]:
            for server in order(rnd):
                proc = start(server, n, args.port, n * args.requests)
                try:
                    measure(server, n, args.port, rnd, 0)
                finally:
                    stop(proc)
    print(f"\n{args.mode}: {os.path.basename(args.model)}, {args.threads} threads, greedy, "
          f"{args.requests} requests per client, {args.rounds} round(s), medians"
          + (f", llama-server --spec-type {spec}" if spec else ""))
    print(f"| clients | {peer} tok/s | editspec tok/s | ratio (median of rounds; each round's) | latency mean {peer} | editspec |")
    print("| ---: | ---: | ---: | --- | --- | --- |")

    def med(v):
        v = sorted(v)
        return v[len(v) // 2] if len(v) % 2 else (v[len(v) // 2 - 1] + v[len(v) // 2]) / 2

    for n in sorted({r["clients"] for r in rows}):
        a = [r for r in rows if r["clients"] == n and r["server"] == peer]
        b = [r for r in rows if r["clients"] == n and r["server"] == "editspec"]
        ratios = [y["tok_s"] / x["tok_s"] for x, y in zip(a, b)]
        print(f"| {n} | {med([r['tok_s'] for r in a]):.2f} | {med([r['tok_s'] for r in b]):.2f} | "
              f"{med(ratios):.2f}x ({', '.join(f'{x:.2f}' for x in ratios)}) | "
              f"{med([r['lat_mean_s'] for r in a]):.2f} s | {med([r['lat_mean_s'] for r in b]):.2f} s |")
    if args.json:
        json.dump(rows, open(args.json, "w"), indent=1)


if __name__ == "__main__":
    main()
