#!/usr/bin/env python3
"""What tools cost a request: the same chat with no tools, with tools (their lazy call grammar, greedy) and
with tools unconstrained ("constrain": false), alternated rounds, medians. On a model whose passes are
cheap (tiny-qwen2: random weights, Qwen2.5-Coder's 152k vocabulary), the host's work shows: rendering the
template through the Jinja engine, the grammar's state a token, the reply's parse.

  python3 docs/results/tools/ab.py --bin build/bin/editspec --model build/test-models/tiny-qwen2-f32.gguf \
      --template <llama prefix>/share/editspec/templates/Qwen-Qwen2.5-7B-Instruct.jinja --rounds 5
"""
import argparse, json, statistics, subprocess, time, urllib.request

ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
ap.add_argument("--bin", required=True)
ap.add_argument("--model", required=True)
ap.add_argument("--template", required=True)
ap.add_argument("--rounds", type=int, default=5)
ap.add_argument("--tokens", type=int, default=256)
ap.add_argument("--port", type=int, default=18611)
a = ap.parse_args()

srv = subprocess.Popen([a.bin, "serve", "-m", a.model, "--port", str(a.port), "-t", "1", "--chat-template-file", a.template,
                        "--max-tokens", str(a.tokens)], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
url = "http://127.0.0.1:%d" % a.port
for _ in range(600):
    try:
        urllib.request.urlopen(url + "/health", timeout=1)
        break
    except Exception:
        time.sleep(0.1)

tools = [{"type": "function", "function": {"name": "read_file", "description": "Read a file of the repository",
                                           "parameters": {"type": "object", "properties": {"path": {"type": "string"}},
                                                          "required": ["path"]}}},
         {"type": "function", "function": {"name": "run_tests", "description": "Run the tests of a path",
                                           "parameters": {"type": "object", "properties": {"path": {"type": "string"},
                                                                                           "verbose": {"type": "boolean"}}}}}]
msgs = [{"role": "system", "content": "You are a coding agent. Use the tools to read files and run tests."},
        {"role": "user", "content": "The tests in tests/test_area.py fail. Find out why and fix area()."}]
arms = {"no tools": {}, "tools, grammar": {"tools": tools}, "tools, constrain false": {"tools": tools, "constrain": False}}

def one(extra):
    body = dict({"messages": msgs, "max_tokens": a.tokens, "stop": []}, **extra)
    req = urllib.request.Request(url + "/v1/chat/completions", json.dumps(body).encode(), {"Content-Type": "application/json"})
    t0 = time.perf_counter()
    r = json.load(urllib.request.urlopen(req))
    wall = (time.perf_counter() - t0) * 1000
    return wall, r["usage"]["completion_tokens"], r["usage"]["prompt_tokens"], r.get("constrained")

res = {k: [] for k in arms}
try:
    for k in arms:  # warm-up (the cost model, the cache of the system prompt)
        one(arms[k])
    for rnd in range(a.rounds):
        order = list(arms) if rnd % 2 == 0 else list(reversed(arms))
        for k in order:
            res[k].append(one(arms[k]))
finally:
    srv.terminate()
    srv.wait()

print("model %s, %d rounds alternated (order reversed every other round), %d tokens asked" % (a.model, a.rounds, a.tokens))
print("%-24s %12s %12s %14s %8s %s" % ("arm", "wall ms", "tokens", "ms/token", "prompt", "constrained"))
for k, rows in res.items():
    wall = statistics.median(r[0] for r in rows)
    toks = statistics.median(r[1] for r in rows)
    per = statistics.median(r[0] / max(1, r[1]) for r in rows)
    print("%-24s %12.1f %12d %14.3f %8d %s" % (k, wall, toks, per, rows[0][2], rows[0][3]))
