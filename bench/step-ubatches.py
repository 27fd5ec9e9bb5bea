#!/usr/bin/env python3
"""4 clients, prompts and outputs of different lengths, on `editspec serve --parallel 4`: steps, ubatches
and requests per step from /metrics. usage: bench/step-ubatches.py BINARY MODEL [ENV=VALUE ...]  (e.g. EDITSPEC_STEP_PAD=0)"""
import json, os, re, socket, subprocess, sys, threading, time, urllib.request
binary, model = sys.argv[1], sys.argv[2]
env = dict(os.environ, **dict(a.split("=", 1) for a in sys.argv[3:]))
with socket.socket() as s:
    s.bind(("127.0.0.1", 0)); port = s.getsockname()[1]
p = subprocess.Popen([binary, "serve", "-m", model, "-t", "2", "--parallel", "4", "--port", str(port)],
                     stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=env)
url = f"http://127.0.0.1:{port}"
for _ in range(600):
    try:
        urllib.request.urlopen(url + "/health", timeout=1); break
    except Exception:
        time.sleep(0.1)
items = [json.loads(l) for l in open(os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "datasets/canitedit/normalized.jsonl"))]
def metrics():
    m = urllib.request.urlopen(url + "/metrics").read().decode()
    return {k: float(v) for k, v in re.findall(r"^(editspec_step\w*_total) ([0-9.e+]+)$", m, re.M)}
def client(c):
    for r in range(3):
        it = items[(7 * c + 3 * r) % len(items)]
        prompt = it["code_before"][: 200 + 700 * ((c + r) % 4)]
        body = {"prompt": prompt, "n_predict": 16 + 16 * ((c * 3 + r) % 4), "temperature": 0, "cache_prompt": False}
        req = urllib.request.Request(url + "/completion", json.dumps(body).encode(), {"Content-Type": "application/json"})
        json.load(urllib.request.urlopen(req, timeout=600))
m0 = metrics()
t0 = time.time()
th = [threading.Thread(target=client, args=(c,)) for c in range(4)]
[t.start() for t in th]; [t.join() for t in th]
secs = time.time() - t0
m1 = metrics()
p.terminate(); p.wait()
d = {k: m1[k] - m0.get(k, 0) for k in m1}
steps = d["editspec_steps_total"]
print(json.dumps({"env": sys.argv[3:], "seconds": round(secs, 2), "steps": steps,
                  "ubatches_per_step": round(d["editspec_step_ubatches_total"] / steps, 3),
                  "requests_per_step": round(d["editspec_step_requests_total"] / steps, 3),
                  "tokens_per_step": round(d["editspec_step_tokens_total"] / steps, 2)}))
