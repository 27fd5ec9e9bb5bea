#!/usr/bin/env python3
"""1 client, one request at a time, alternating between editspec and llama-server, both up (equal kernels:
run it with LD_LIBRARY_PATH=<install-bi>/lib): each request's latency against its time inside decode
(editspec: /metrics editspec_step_seconds_total; llama-server: its timings), and the per-pair latency ratio.

    LD_LIBRARY_PATH=<install-bi>/lib python3 docs/results/issue70-steps/one-client-overhead.py MODEL ROUNDS PEERS_BIN
"""
import json, os, subprocess, sys, time, urllib.request
root = os.path.abspath(os.path.join(os.path.dirname(__file__), "../../.."))
sys.path.insert(0, os.path.join(root, "bench"))
import concurrency as C
model = sys.argv[1]; rounds = int(sys.argv[2]) if len(sys.argv) > 2 else 6
peers = sys.argv[3]
log = os.environ.get("TMPDIR", "/tmp")
items = sorted((json.loads(l) for l in open(os.path.join(root, "datasets/canitedit/normalized.jsonl"))), key=lambda d: len(d["code_before"]))
es = subprocess.Popen([os.path.join(root, "build/bin/editspec"), "serve", "-m", model, "-t", "2", "--ctx-size", "2048", "--parallel", "1", "--port", "8801"],
                      stdout=open(os.path.join(log, "ov-es.log"), "w"), stderr=subprocess.STDOUT)
ls = subprocess.Popen([peers + "/llama-server", "-m", model, "-t", "2", "-c", "2048", "-np", "1", "--host", "127.0.0.1", "--port", "8802"],
                      stdout=open(os.path.join(log, "ov-ls.log"), "w"), stderr=subprocess.STDOUT)
try:
    C.wait_up(8801, es, os.path.join(log, "ov-es.log")); C.wait_up(8802, ls, os.path.join(log, "ov-ls.log"))
    def req(port, k):
        d = items[k % len(items)]
        body = {"prompt": "".join(d["code_before"].splitlines(True)[:6]), "n_predict": 32, "temperature": 0, "top_k": 1, "cache_prompt": False}
        t0 = time.time(); r = C.post(port, "/completion", body); return r, time.time() - t0
    req(8801, 100); req(8802, 100)
    res = {"es": [], "ls": []}
    for rnd in range(rounds):
        for k in range(8):
            for name in (["es", "ls"] if (rnd + k) % 2 == 0 else ["ls", "es"]):
                if name == "es":
                    m0 = C.metrics(8801); r, lat = req(8801, rnd * 8 + k); m1 = C.metrics(8801)
                    dec = m1["editspec_step_seconds_total"] - m0["editspec_step_seconds_total"]
                    n = r.get("tokens_predicted", 0)
                else:
                    r, lat = req(8802, rnd * 8 + k)
                    dec = (r["timings"]["prompt_ms"] + r["timings"]["predicted_ms"]) / 1000; n = r["timings"]["predicted_n"]
                res[name].append((lat, dec, n))
    for name, v in res.items():
        lat = sum(x[0] for x in v); dec = sum(x[1] for x in v); n = sum(x[2] for x in v)
        print(f"{name}: {len(v)} requests, {n} tokens, latency {lat*1000/n:.2f} ms/token, decode {dec*1000/n:.2f}, outside {1000*(lat-dec)/len(v):.1f} ms/request")
    rat = sorted(a[0] / b[0] for a, b in zip(res["ls"], res["es"]))
    print("llama-server latency / editspec latency per request pair: median %.3f, quartiles %.3f %.3f" % (rat[len(rat)//2], rat[len(rat)//4], rat[3*len(rat)//4]))
finally:
    C.stop(es); C.stop(ls)
