#!/usr/bin/env python3
"""Replay a real editing history against a running server, as an editor sends it, and time each request.

Each step k takes the file from version k-1 to version k of a history in datasets/edit-histories (one
file's successive commits) with three requests, in this order:

  edit      the user asks for the commit's change in chat, the file pasted in a fenced block and sent
            as the prediction (OpenAI Predicted Outputs; Continue, Zed and the OpenAI SDK send this)
  apply     a fast apply of the commit's changed hunks into version k-1 (the snippet elides unchanged
            code with "# ... existing code ...", as a chat model proposes it)
  complete  a fill-in-the-middle completion at the first changed line of version k (llama.vim sends
            /infill with the text around the cursor; on a model without FIM tokens, /completion of the
            text before that line)

editspec gets /v1/chat/completions, /v1/apply and /infill; llama-server, which has no apply endpoint
and ignores `prediction`, gets /completion with the same prompt texts editspec builds for a model
without a chat template (include/editspec/edit.h, apply.h) and /infill. Requests are not streamed:
each row has the server's own prompt time (prefill_ms: the time to the first token but one pass),
its generation time and the client's wall time for the whole request, with the prompt tokens the
server kept (cached), moved (shifted, PIE) and decoded (encoded). --max-tokens limits the edit and the
completion; editspec's apply is the whole merge (since issue 69 an apply whose max_tokens cannot hold
the merged file is refused, not cut), llama-server's apply prompt stops at --max-tokens as before.

    bench/workflow.py --url http://127.0.0.1:8012 --server editspec --label pie \
        --history datasets/edit-histories/signer.jsonl --steps 4 --max-tokens 32 >> rows.jsonl
"""
import argparse
import difflib
import http.client
import json
import sys
import time
import urllib.parse

ELIDE = "# ... existing code ..."


FILE_FIRST = True  # editspec's default prompt layout (include/editspec/edit.h); --instruction-first for the other


def edit_prompt(instruction, code):
    if FILE_FIRST:
        return "### Original code:\n" + code + "\n### Instruction:\n" + instruction + "\n### Edited code:\n"
    return "### Instruction:\n" + instruction + "\n### Original code:\n" + code + "\n### Edited code:\n"


def apply_prompt(update, code):
    return edit_prompt("Apply the update to the code.\n### Update:\n" + update.rstrip("\n"), code)


def update_snippet(old, new, context=2):
    """The changed hunks of new against old, with `context` lines around each, elided code marked."""
    a, b = old.splitlines(keepends=True), new.splitlines(keepends=True)
    out, last = [], 0
    for group in difflib.SequenceMatcher(None, a, b, autojunk=False).get_grouped_opcodes(context):
        j1, j2 = group[0][3], group[-1][4]
        if j1 > last or (j1 == 0 and group[0][1] > 0):
            out.append(ELIDE + "\n")
        out.extend(b[j1:j2])
        last = j2
    if last < len(b):
        out.append(ELIDE + "\n")
    return "".join(out)


def first_changed_line(old, new):
    a, b = old.splitlines(keepends=True), new.splitlines(keepends=True)
    for tag, _, _, j1, j2 in difflib.SequenceMatcher(None, a, b, autojunk=False).get_opcodes():
        if tag != "equal" and j1 < len(b):
            return j1
    return max(0, len(b) - 1)


class HTTPError(Exception):
    pass


def post(url, path, body, timeout):
    u = urllib.parse.urlparse(url)
    c = http.client.HTTPConnection(u.hostname, u.port, timeout=timeout)
    t0 = time.perf_counter()
    c.request("POST", path, json.dumps(body), {"Content-Type": "application/json"})
    r = c.getresponse()
    data = r.read()
    wall = 1000.0 * (time.perf_counter() - t0)
    c.close()
    if r.status != 200:
        raise HTTPError(f"{path}: HTTP {r.status}: {data[:300]!r}")
    return json.loads(data), wall


def requests_for_step(server, subject, old, new, max_tokens, complete_tokens, constrain=False):
    """(kind, path, body) of the three requests that take old to new"""
    instruction = "Make this change: " + subject + "."
    update = update_snippet(old, new)
    lines = new.splitlines(keepends=True)
    i = first_changed_line(old, new)
    prefix, suffix = "".join(lines[:i]), "".join(lines[i + 1:])
    greedy = {"temperature": 0}
    infill = {"input_prefix": prefix, "input_suffix": suffix, "n_predict": complete_tokens, "cache_prompt": True,
              "top_k": 1, **greedy}
    if server == "editspec":
        return [
            ("edit", "/v1/chat/completions",
             {"messages": [{"role": "user", "content": instruction + "\n\n```python\n" + old + "```"}],
              "prediction": {"type": "content", "content": old}, "max_tokens": max_tokens, **greedy}),
            ("apply", "/v1/apply", {"code": old, "update": update, **greedy,
                                    **({"constrain": True} if constrain else {})}),
            ("complete", "/infill", infill),
        ]
    return [
        ("edit", "/completion", {"prompt": edit_prompt(instruction, old), "n_predict": max_tokens, "cache_prompt": True,
                                 "top_k": 1, **greedy}),
        ("apply", "/completion", {"prompt": apply_prompt(update, old), "n_predict": max_tokens, "cache_prompt": True,
                                  "top_k": 1, **greedy}),
        ("complete", "/infill", infill),
    ]


def row_of(server, kind, resp, wall):
    t = resp.get("timings", {})
    prompt_n = t.get("prompt_n", 0)
    if server == "editspec":
        u = resp.get("usage")
        if u:
            d = u.get("prompt_tokens_details", {})
            prompt = u["prompt_tokens"]
            cached, shifted, encoded = d.get("cached_tokens", 0), d.get("shifted_tokens", 0), d.get("encoded_tokens")
            if encoded is None:  # an editspec without shifted/encoded reporting
                encoded = prompt - cached
        else:  # /infill (llama.cpp's schema)
            prompt = resp.get("tokens_evaluated", prompt_n)
            cached, shifted = resp.get("tokens_cached", 0), 0
            encoded = prompt - cached
        text = resp.get("merged_code") if kind == "apply" else (
            resp["choices"][0]["message"]["content"] if "choices" in resp else resp.get("content", ""))
    else:
        # llama-server: timings.prompt_n counts the tokens it decoded, cache_n those it reused
        encoded = prompt_n
        cached = t.get("cache_n", 0)
        shifted = 0
        prompt = encoded + cached
        text = resp.get("content", "")
    return {"kind": kind, "prompt_tokens": prompt, "cached": cached, "shifted": shifted, "encoded": encoded,
            "prefill_ms": round(t.get("prompt_ms", 0.0), 1), "gen_ms": round(t.get("predicted_ms", 0.0), 1),
            "total_ms": round(wall, 1), "tokens": t.get("predicted_n", 0), "text": text}


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--url", required=True, help="the server, e.g. http://127.0.0.1:8012")
    ap.add_argument("--server", choices=["editspec", "llama-server"], required=True)
    ap.add_argument("--label", required=True, help="the configuration's name in the rows")
    ap.add_argument("--history", required=True, help="a datasets/edit-histories/*.jsonl file")
    ap.add_argument("--first", type=int, default=1, help="the first step (version index, 1 = the second version)")
    ap.add_argument("--steps", type=int, default=0, help="steps to replay (0 = to the last version)")
    ap.add_argument("--max-tokens", type=int, default=32, help="most tokens an edit or apply answer may have")
    ap.add_argument("--complete-tokens", type=int, default=16, help="most tokens of a completion")
    ap.add_argument("--instruction-first", action="store_true", help="llama-server: the instruction-first prompt layout (serve --prompt-layout instruction-first)")
    ap.add_argument("--constrain", action="store_true", help="editspec: constrained applies (every merged line from the file or the snippet)")
    ap.add_argument("--cold", action="store_true", help="before each request, one of another text (nothing to reuse)")
    ap.add_argument("--timeout", type=float, default=1800.0)
    a = ap.parse_args()
    global FILE_FIRST
    FILE_FIRST = not a.instruction_first
    versions = [json.loads(l) for l in open(a.history)]
    last = len(versions) if a.steps <= 0 else min(len(versions), a.first + a.steps)
    no_fim = False
    for k in range(a.first, last):
        old, new = versions[k - 1]["text"], versions[k]["text"]
        for kind, path, body in requests_for_step(a.server, versions[k]["subject"], old, new, a.max_tokens,
                                                  a.complete_tokens, a.constrain):
            if a.cold:
                post(a.url, "/completion", {"prompt": "\n\n", "n_predict": 1, "cache_prompt": True}, a.timeout)
            if kind == "complete" and no_fim:
                path, body = "/completion", {"prompt": body["input_prefix"], **{x: body[x] for x in body if x not in ("input_prefix", "input_suffix")}}
            try:
                resp, wall = post(a.url, path, body, a.timeout)
            except HTTPError as e:
                if kind != "complete" or "fill-in-the-middle" not in str(e) and "infill" not in str(e):
                    raise SystemExit(str(e))
                # a model without FIM tokens: the completion of the text before the line instead
                no_fim = True
                path, body = "/completion", {"prompt": body["input_prefix"], **{x: body[x] for x in body if x not in ("input_prefix", "input_suffix")}}
                resp, wall = post(a.url, path, body, a.timeout)
            row = {"label": a.label, "history": a.history.rsplit("/", 1)[-1], "step": k, **row_of(a.server, kind, resp, wall)}
            print(json.dumps(row), flush=True)
            print(f"{a.label} step {k} {kind}: {row['prompt_tokens']} prompt tokens, {row['encoded']} encoded, "
                  f"prefill {row['prefill_ms']:.0f} ms, total {row['total_ms']:.0f} ms", file=sys.stderr, flush=True)


if __name__ == "__main__":
    main()
