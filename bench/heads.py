#!/usr/bin/env python3
"""A model-native head (a model's MTP layers, or an EAGLE-3 / DFlash / DSpark head file) driven by editspec
and by llama.cpp, on the same model in one run.

    bench/heads.py --model tiny-mimo2-q8_0.gguf
    bench/heads.py --model tiny-256-q8_0.gguf --kind eagle3 --head tiny-256-eagle3.gguf
    bench/heads.py --model mimo-7b-q8_0.gguf --es P/es/bin/editspec --peers P/bin --peer-args "-ngl 99"

`editspec serve --method llama-draft-KIND` and `llama-server --spec-type draft-KIND` (one slot each, the head
file as --head-model / -md, the same --head-max / --spec-draft-n-max) get the same greedy POST /completion
requests, alternating one request at a
time (each prompt the first lines of a different CanItEdit file). Prints per server: the head's draft step
(what llama.cpp's common_speculative_print_stats reports as dur(g) over its draft calls; editspec logs the
same calls), editspec's cost of following the target's batches (the head's decode of each, inside
llama.cpp's draft call count for neither), generation tokens/s, and whether both answered the same text.
On random weights the head's drafts are almost never accepted: this measures cost, not acceptance.
"""
import argparse, json, os, re, statistics, subprocess, sys, time, urllib.request

root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(root, "bench"))
from concurrency import free_port, post, stop, wait_up  # noqa: E402


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--model", required=True, help="the target GGUF (with MTP layers for --kind mtp: make-model "
                                                   "--shape tiny-mimo2 / mimo-7b)")
    ap.add_argument("--kind", default="mtp", choices=["mtp", "eagle3", "dflash", "dspark"])
    ap.add_argument("--head", default="", help="the head file (eagle3, dflash, dspark: make-model --shape tiny-256-KIND)")
    ap.add_argument("--es", default=os.path.join(root, "build/bin/editspec"))
    ap.add_argument("--peers", default="", help="llama.cpp's bin folder (default: scripts/setup-peers.sh)")
    ap.add_argument("--es-args", default="", help="more `editspec serve` arguments")
    ap.add_argument("--peer-args", default="", help="more llama-server arguments (-ngl 99 on a GPU)")
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--ctx", type=int, default=2048)
    ap.add_argument("--head-max", type=int, default=3, help="tokens the head drafts a pass (both servers)")
    ap.add_argument("--n-predict", type=int, default=128)
    ap.add_argument("--requests", type=int, default=4, help="requests per round (distinct prompts)")
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--prompt-lines", type=int, default=12)
    ap.add_argument("--dataset", default=os.path.join(root, "datasets/canitedit/normalized.jsonl"))
    ap.add_argument("--log-dir", default="/tmp")
    ap.add_argument("--json", default="")
    args = ap.parse_args()
    if args.kind != "mtp" and not args.head:
        sys.exit(f"--kind {args.kind} needs --head FILE")
    head_args = (["-md", args.head], ["--head-model", args.head]) if args.kind != "mtp" else ([], [])
    peers = args.peers or subprocess.run([os.path.join(root, "scripts/setup-peers.sh")], check=True,
                                         capture_output=True, text=True).stdout.strip().splitlines()[-1]
    items = [json.loads(l) for l in open(args.dataset)]
    prompts = ["".join(d["code_before"].splitlines(True)[: args.prompt_lines]) for d in items[: args.requests]]

    servers = {}
    try:
        port = free_port()
        log = os.path.join(args.log_dir, "heads-llama-server.log")
        cmd = [os.path.join(peers, "llama-server"), "-m", args.model, "-t", str(args.threads), "-c", str(args.ctx),
               "-np", "1", "--host", "127.0.0.1", "--port", str(port), "--spec-type", "draft-" + args.kind,
               "--spec-draft-n-max", str(args.head_max), "-lv", "5"] + head_args[0] + args.peer_args.split()
        servers["llama-server"] = (subprocess.Popen(cmd, stdout=open(log, "w"), stderr=subprocess.STDOUT), port, log)
        wait_up(port, servers["llama-server"][0], log)
        port = free_port()
        log = os.path.join(args.log_dir, "heads-editspec.log")
        cmd = [args.es, "serve", "-m", args.model, "-t", str(args.threads), "--ctx-size", str(args.ctx), "--parallel", "1",
               "--port", str(port), "--method", "llama-draft-" + args.kind, "--head-max", str(args.head_max)] + head_args[1] + \
            args.es_args.split()
        env = dict(os.environ, EDITSPEC_LOG="info")
        servers["editspec"] = (subprocess.Popen(cmd, stdout=open(log, "w"), stderr=subprocess.STDOUT, env=env), port, log)
        wait_up(port, servers["editspec"][0], log)

        rows = []
        for rnd in range(args.rounds):
            for i, prompt in enumerate(prompts):
                order = ["llama-server", "editspec"] if (rnd + i) % 2 == 0 else ["editspec", "llama-server"]
                texts = {}
                for name in order:
                    _, port, _ = servers[name]
                    t0 = time.time()
                    r = post(port, "/completion", {"prompt": prompt, "n_predict": args.n_predict, "temperature": 0,
                                                   "top_k": 1, "cache_prompt": False})
                    wall = time.time() - t0
                    texts[name] = r.get("content", "")
                    t = r.get("timings", {})
                    rows.append({"round": rnd, "prompt": i, "server": name, "wall_s": round(wall, 3),
                                 "tokens": t.get("predicted_n"), "gen_tok_s": t.get("predicted_per_second")})
                rows[-1]["same_text"] = rows[-2]["same_text"] = texts["llama-server"] == texts["editspec"]
    finally:
        for proc, _, _ in servers.values():
            stop(proc)

    # the head's draft step from each server's own log, one line per request in order
    ls = [(float(g), int(c)) for c, g in re.findall(r"draft-" + args.kind + r": #calls\(b,g,a\) =\s+\d+\s+(\d+).*?dur\(b,g,a\) = [\d.]+, ([\d.]+),",
                                                     open(servers["llama-server"][2], errors="replace").read())]
    es = [(float(t), int(n), float(f), int(m)) for n, t, m, f in
          re.findall(r"llama-draft-" + args.kind + r": (\d+) drafts in ([\d.]+) ms \([\d.]+ ms a draft\), (\d+) target batches followed in ([\d.]+) ms",
                     open(servers["editspec"][2], errors="replace").read())]
    lr = [r for r in rows if r["server"] == "llama-server"]
    er = [r for r in rows if r["server"] == "editspec"]
    # llama-server's statistics are the slot's totals so far: a request's are the difference
    prev = (0.0, 0)
    for r, (g, c) in zip(lr, ls):
        r["draft_ms"] = round((g - prev[0]) / max(c - prev[1], 1), 4)
        prev = (g, c)
    for r, (t, n, f, m) in zip(er, es):
        r["draft_ms"] = round(t / max(n, 1), 4)
        r["follow_ms"] = round(f / max(m, 1), 4)
    for r in rows:
        print(json.dumps(r))
    med = statistics.median
    ok_l = [r["draft_ms"] for r in lr if "draft_ms" in r]
    ok_e = [r["draft_ms"] for r in er if "draft_ms" in r]
    print(f"\n{os.path.basename(args.model)}" + (f" + {os.path.basename(args.head)}" if args.head else "") +
          f", {args.kind}, {args.threads} threads, --head-max {args.head_max}, {args.n_predict} tokens, "
          f"{len(prompts)} prompts x {args.rounds} rounds, alternating")
    print("| server | head's draft step, ms (median) | following a target batch, ms | generation tok/s | same text |")
    print("| --- | ---: | ---: | ---: | --- |")
    if not ok_l or not ok_e:
        sys.exit(f"no head statistics in the logs ({len(ok_l)} llama-server, {len(ok_e)} editspec): see {args.log_dir}/heads-*.log")
    same = all(r.get("same_text") for r in rows)
    print(f"| llama-server --spec-type draft-{args.kind} | {med(ok_l):.3f} | (not reported) | {med([r['gen_tok_s'] for r in lr]):.1f} | {same} |")
    print(f"| editspec --method llama-draft-{args.kind} | {med(ok_e):.3f} | {med([r['follow_ms'] for r in er if 'follow_ms' in r]):.3f} | "
          f"{med([r['gen_tok_s'] for r in er if r['gen_tok_s']]):.1f} | {same} |")
    print(f"editspec's draft step over llama.cpp's: {med(ok_e) / med(ok_l):.3f}x")
    if args.json:
        json.dump(rows, open(args.json, "w"), indent=1)


if __name__ == "__main__":
    main()
