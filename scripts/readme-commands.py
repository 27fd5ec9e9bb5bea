#!/usr/bin/env python3
"""Run the README's "Quick start" and "Serve your own model" commands against a real `editspec serve`.

Every fenced block of those sections is taken from README.md and checked; a block this script does
not know how to check is an error, so nothing in the section goes unchecked:

  sh, a build by hand   the apt-get packages are the ones scripts/build.sh installs, the llama.cpp
                        prefix is found as build.sh finds it, the cmake configure line runs as
                        written (into a scratch folder instead of build/, with the prefix the
                        binary's own build was configured with) and the targets it builds exist
  sh, scripts/build.sh  the quick start's set-up: the script is there and parses (not rerun: the
                        binary under test is what it builds)
  sh, editspec apply    run as written in the scratch folder, on app.py and change.py (docs/examples/
                        apply's inventory file and snippet) with model.gguf: exit 0, a diff with --diff
  sh, editspec serve    started as written in a scratch folder where build/bin/editspec is the binary
                        under test and model.gguf the shipped target; its flags must be in
                        `editspec serve --help`; it must answer /health, and exit 0 on SIGTERM when
                        the next server replaces it
  sh, curl              run as written against the server started last; exit status 0, a JSON answer
                        without "error", and the fields the route promises (a chat with `prediction`:
                        usage.completion_tokens_details' prediction counts, some drafted on the shipped
                        model; /v1/models: every --alias)
  yaml (Continue), json (Zed), vim (llama.vim)
                        each URL is sent the request that client's own code sends (the bodies recorded
                        in tests/server/client-requests.json), and must answer the fields it reads;
                        a model name the configuration uses must be listed by /v1/models
  sh, GPU commands      (no GPU here) each variable is one scripts/build.sh or setup-llama.sh reads,
                        the binary is where BUILD_DIR puts it, every flag is in `editspec CMD --help`
  sh, deploy/replicas.sh
                        its options are in its --help and the serve options in `editspec serve
                        --help`; where haproxy is installed it is also run as written, and the curl
                        after it goes through the balancer

The commands run as written, ports included, in a network namespace of their own (`unshare -rn`),
so they cannot collide with anything else on the machine; where user namespaces are not allowed,
ports 8012 and 8080 are replaced by free ones (and said so).

  scripts/readme-commands.py [--binary build/bin/editspec] [--readme README.md] [--model-shape SHAPE:TYPE] [-v]

--model-shape makes model.gguf a generated real-shape model instead of the shipped target (`editspec
make-model`, random weights: e.g. tiny-qwen2:q4_k_m, Qwen2.5-Coder's architecture, tokenizer and chat
template at toy size, in the type people download), as a user's own GGUF file would stand there.

Exit status: 0 when every block passed, 1 when any failed (each listed), 2 on a usage error.
"""
import argparse
import ctypes
import json
import os
import re
import shlex
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request

ROOT = os.path.abspath(os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
SECTION = "## Serve your own model"
QUICK = "## Quick start: your own model"  # the README's first steps, checked the same way, before SECTION
DEFAULT_PORTS = (8012, 8080)  # editspec serve's and deploy/replicas.sh's, remapped only without a netns


class Failed(Exception):
    pass


def say(msg):
    print(f"readme-commands: {msg}", flush=True)


def section_blocks(readme_path, section=SECTION):
    """The fenced blocks of the section: (language, text, line number)."""
    with open(readme_path, encoding="utf-8") as f:
        lines = f.read().split("\n")
    try:
        start = lines.index(section)
    except ValueError:
        raise Failed(f"{readme_path} has no '{section}' section")
    blocks, i = [], start + 1
    while i < len(lines) and not lines[i].startswith("## "):
        m = re.match(r"^```(\w*)\s*$", lines[i])
        if m:
            j = i + 1
            while j < len(lines) and lines[j] != "```":
                j += 1
            blocks.append((m.group(1), "\n".join(lines[i + 1:j]), i + 1))
            i = j
        i += 1
    return "\n".join(lines[start:i]), blocks


def logical_lines(text):
    """Shell lines with backslash continuations joined, comments and blank lines dropped."""
    out, cur = [], ""
    for line in text.split("\n"):
        if line.endswith("\\"):
            cur += line[:-1] + " "
            continue
        cur += line
        if cur.strip() and not cur.strip().startswith("#"):
            out.append(cur.strip())
        cur = ""
    return out


def words(cmd):
    return shlex.split(cmd, comments=True)


# --- the binary's --help

_helps = {}


def help_text(binary, sub):
    if sub not in _helps:
        r = subprocess.run([binary, sub, "--help"], capture_output=True, text=True, timeout=60)
        if r.returncode != 0:
            raise Failed(f"editspec {sub} --help: exit status {r.returncode}")
        _helps[sub] = r.stdout + r.stderr
    return _helps[sub]


def help_options(text):
    """Every option name a --help lists (CLI11's '  -m,--model TEXT', or a script's '  --port P')."""
    names = set()
    for line in text.split("\n"):
        m = re.match(r"\s+((?:--?[\w-]+,)*--?[\w-]+)", line)
        if m:
            names.update(m.group(1).split(","))
    return names


def help_default(text, option):
    for line in text.split("\n"):
        m = re.match(r"\s+((?:--?[\w-]+,)*--?[\w-]+)(?:\s+[A-Z]+(?:=(\S+))?)?", line)
        if m and option in m.group(1).split(","):
            return m.group(2)
    return None


def check_flags(args, known, what):
    for a in args:
        if a.startswith("-") and not re.match(r"^-\d", a):  # -1 is a value
            flag = a.split("=", 1)[0]
            if flag not in known:
                raise Failed(f"{what}: {flag} is not an option of its --help")


def editspec_words(cmd):
    """(leading VAR=value words, the binary's path, subcommand, the rest) of an editspec command line."""
    w = words(cmd)
    env = []
    while w and re.match(r"^[A-Z_][A-Z0-9_]*=", w[0]):
        env.append(w.pop(0))
    if not w or not w[0].endswith("/bin/editspec") or len(w) < 2:
        raise Failed(f"not an editspec command: {cmd}")
    return env, w[0], w[1], w[2:]


# --- HTTP

def http(method, url, body=None, timeout=120):
    data = None if body is None else (body if isinstance(body, bytes) else json.dumps(body).encode())
    req = urllib.request.Request(url, data=data, method=method,
                                 headers={"Content-Type": "application/json"} if data is not None else {})
    try:
        with urllib.request.urlopen(req, timeout=timeout) as r:
            return r.status, r.read().decode("utf-8", "replace")
    except urllib.error.HTTPError as e:
        return e.code, e.read().decode("utf-8", "replace")


def sse_events(text):
    return [json.loads(line[5:]) for line in text.split("\n")
            if line.startswith("data:") and line[5:].strip() not in ("", "[DONE]")]


def path_get(obj, path):
    """a/b/0 into nested objects and arrays, or a flat key of that name (llama.cpp's response_fields)."""
    if isinstance(obj, dict) and path in obj:
        return True, obj[path]
    for part in path.split("/"):
        if isinstance(obj, list) and part.isdigit() and int(part) < len(obj):
            obj = obj[int(part)]
        elif isinstance(obj, dict) and part in obj:
            obj = obj[part]
        else:
            return False, None
    return True, obj


# a first `editspec serve` of a model file measures its cost model before it listens: seconds on an
# idle machine, minutes beside the other tests of a CI run (its passes wait on busy cores)
def wait_health(url, proc, log, seconds=300):
    deadline = time.time() + seconds
    while time.time() < deadline:
        try:
            if http("GET", url, timeout=2)[0] == 200:
                return
        except (OSError, urllib.error.URLError):
            pass
        if proc.poll() is not None:
            raise Failed(f"exited with status {proc.returncode} before answering {url}: {tail(log)}")
        time.sleep(0.2)
    raise Failed(f"no answer from {url} in {seconds} s: {tail(log)}")


def tail(path, n=6):
    try:
        with open(path, encoding="utf-8", errors="replace") as f:
            return " | ".join(f.read().strip().split("\n")[-n:])
    except OSError:
        return ""


def die_with_parent():
    # a server outlives neither this script nor a ctest timeout that kills it
    try:
        ctypes.CDLL("libc.so.6", use_errno=True).prctl(1, signal.SIGTERM)  # PR_SET_PDEATHSIG
    except OSError:
        pass


class Runner:
    def __init__(self, binary, work, ports, verbose, random_weights=False):
        self.binary, self.work, self.ports, self.verbose = binary, work, ports, verbose
        self.random_weights = random_weights  # model.gguf from make-model (--model-shape)
        self.proc = None      # the server (or replicas.sh) started last
        self.what = ""
        self.base = None      # http://host:port of it
        self.aliases = []
        self.model_ids = []
        self.serve_help = help_text(binary, "serve")
        self.n_logs = 0
        with open(os.path.join(ROOT, "tests/server/client-requests.json"), encoding="utf-8") as f:
            self.recorded = json.load(f)["requests"]

    def env(self):
        e = dict(os.environ)
        for k in ("EDITSPEC_BIN", "EDITSPEC_MODEL", "EDITSPEC_DRAFT_MODEL", "EDITSPEC_API_KEY"):
            e.pop(k, None)
        return e

    def remap(self, text):
        """Without a network namespace: the README's ports to free ones."""
        for old, new in self.ports.items():
            text = re.sub(rf"(?<=[:\s]){old}\b", str(new), text)
        return text

    # --- servers

    def stop(self):
        if not self.proc:
            return
        p, what = self.proc, self.what
        self.proc = None
        if p.poll() is not None:
            raise Failed(f"{what} had exited (status {p.returncode}) before it was stopped")
        p.send_signal(signal.SIGTERM)
        try:
            rc = p.wait(timeout=20)
        except subprocess.TimeoutExpired:
            os.killpg(p.pid, signal.SIGKILL)
            p.wait()
            raise Failed(f"{what} still running 20 s after SIGTERM")
        if rc != 0:
            raise Failed(f"{what} exited with status {rc} on SIGTERM")

    def start(self, cmd, health_url, what):
        self.stop()
        self.n_logs += 1
        log = os.path.join(self.work, f"process-{self.n_logs}.log")
        with open(log, "w") as out:
            self.proc = subprocess.Popen(["bash", "-c", "exec " + cmd], cwd=self.work, env=self.env(), stdout=out,
                                         stderr=subprocess.STDOUT, start_new_session=True, preexec_fn=die_with_parent)
        self.what = what
        wait_health(health_url, self.proc, log)

    def serve_block(self, text):
        self.stop()
        self.base = None  # the requests after a server that did not start have none
        lines = logical_lines(text)
        if len(lines) != 1:
            raise Failed("a serve block holds one command")
        cmd = self.remap(lines[0])
        _, path, sub, args = editspec_words(cmd)
        if path != "build/bin/editspec" or sub != "serve":
            raise Failed(f"expected build/bin/editspec serve: {cmd}")
        check_flags(args, help_options(self.serve_help), "editspec serve")
        opt = lambda names, default: next((args[i + 1] for i, a in enumerate(args[:-1]) if a in names), default)
        host = opt(("--host",), help_default(self.serve_help, "--host"))
        port = opt(("--port",), help_default(self.serve_help, "--port"))
        if self.ports and "--port" not in args:
            port = str(self.ports[DEFAULT_PORTS[0]])
            cmd += f" --port {port}"
        host = "127.0.0.1" if host in ("0.0.0.0", "::") else host
        self.base = f"http://{host}:{port}"
        self.aliases = [args[i + 1] for i, a in enumerate(args[:-1]) if a == "--alias"]
        model = opt(("-m", "--model"), None)
        self.model_ids = [os.path.basename(model)] if model else []
        self.start(cmd, self.base + "/health", "editspec serve")
        return f"serving at {self.base}"

    # --- the quick start's set-up and first command

    def setup_block(self, text):
        lines = logical_lines(text)
        if lines != ["scripts/build.sh"]:
            raise Failed(f"expected the one set-up command scripts/build.sh: {lines}")
        script = os.path.join(ROOT, "scripts/build.sh")
        if not os.access(script, os.X_OK) or subprocess.run(["bash", "-n", script]).returncode != 0:
            raise Failed("scripts/build.sh is not an executable bash script")
        return "scripts/build.sh: the set-up (not rerun: the binary under test is what it builds)"

    def apply_block(self, text):
        """`editspec apply` (or edit) as written, on app.py and change.py: docs/examples/apply's inventory
        file and its snippet, with the shipped target as model.gguf"""
        lines = logical_lines(text)
        if len(lines) != 1:
            raise Failed("an apply block holds one command")
        _, path, sub, args = editspec_words(lines[0])
        if path != "build/bin/editspec" or sub not in ("apply", "edit"):
            raise Failed(f"expected build/bin/editspec apply or edit: {lines[0]}")
        check_flags(args, help_options(help_text(self.binary, sub)), "editspec " + sub)
        ex = os.path.join(ROOT, "docs/examples/apply")
        shutil.copy(os.path.join(ex, "inventory.py"), os.path.join(self.work, "app.py"))
        shutil.copy(os.path.join(ex, "inventory.update.py"), os.path.join(self.work, "change.py"))
        r = subprocess.run(["bash", "-c", lines[0]], cwd=self.work, env=self.env(), capture_output=True, text=True,
                           timeout=600)
        if r.returncode != 0:
            raise Failed(f"exit status {r.returncode}: {r.stderr.strip()[-300:]}")
        if "--diff" in args and not r.stdout.startswith("--- a/"):
            raise Failed(f"--diff printed no diff: {r.stdout[:200]!r}")
        return f"{sub}: exit 0, {len(r.stdout.splitlines())} lines printed"

    def replicas_block(self, text):
        self.stop()
        self.base = None
        lines = logical_lines(text)
        if len(lines) != 1 or not lines[0].startswith("deploy/replicas.sh"):
            raise Failed("a replicas block holds one deploy/replicas.sh command")
        cmd = self.remap(lines[0])
        w = words(cmd)
        sep = w.index("--") if "--" in w else len(w)
        r = subprocess.run([os.path.join(ROOT, "deploy/replicas.sh"), "--help"], capture_output=True, text=True)
        check_flags(w[1:sep], help_options(r.stdout), "deploy/replicas.sh")
        serve_args = w[sep + 1:]
        check_flags(serve_args, help_options(self.serve_help), "deploy/replicas.sh's SERVE-ARGS (editspec serve)")
        port = next((w[i + 1] for i, a in enumerate(w[1:sep - 1], 1) if a == "--port"), None)
        if port is None:
            m = re.search(r"--port P\s+the balancer's port \(default (\d+)\)", r.stdout)
            port = m.group(1) if m else None
        if port is None:
            raise Failed("no balancer port in the command or in deploy/replicas.sh --help")
        if not shutil.which("haproxy"):
            return "flags checked; not run: haproxy is not installed"
        self.aliases = [serve_args[i + 1] for i, a in enumerate(serve_args[:-1]) if a == "--alias"]
        model = next((serve_args[i + 1] for i, a in enumerate(serve_args[:-1]) if a in ("-m", "--model")), None)
        self.model_ids = [os.path.basename(model)] if model else []
        self.base = f"http://127.0.0.1:{port}"
        self.start(cmd, self.base + "/health", "deploy/replicas.sh")
        return f"balancer at {self.base}"

    # --- requests

    def need_server(self):
        if not self.base:
            raise Failed("no server is running for it (a serve or replicas block must come first)")

    def request_block(self, text):
        self.need_server()
        if not text.startswith("curl ") or text.count("curl ") != 1:
            raise Failed("a request block holds one curl command")
        cmd = self.remap(text)
        m = re.search(r"https?://[^\s'\"]+", cmd)
        if not m:
            raise Failed("no URL in the curl command")
        url = m.group(0)
        if not url.startswith(self.base + "/"):
            raise Failed(f"{url} is not the running server's {self.base}")
        route = url[len(self.base):]
        r = subprocess.run(["bash", "-c", cmd], cwd=self.work, env=self.env(), capture_output=True, text=True,
                           timeout=120)
        if r.returncode != 0:
            raise Failed(f"exit status {r.returncode}: {r.stderr.strip()[:300]}")
        try:
            body = json.loads(r.stdout)
        except ValueError:
            raise Failed(f"not a JSON answer: {r.stdout[:300]!r}")
        if isinstance(body, dict) and "error" in body:
            raise Failed(f"error answer: {json.dumps(body['error'])[:300]}")
        w = words(cmd)
        sent = json.loads(w[w.index("-d") + 1]) if "-d" in w else None
        self.check_answer(route, body, sent)
        return f"{route}: {json.dumps(body)[:160]}"

    def check_answer(self, route, body, sent):
        def need(path, kind):
            ok, v = path_get(body, path)
            if not ok or not isinstance(v, kind) or isinstance(v, bool):
                raise Failed(f"{route}: the answer has no {path} ({kind.__name__}): {json.dumps(body)[:300]}")
            return v
        if route == "/health":
            return
        if route == "/v1/models":
            ids = [m.get("id") for m in need("data", list)]
            for name in self.aliases + self.model_ids:
                if name not in ids:
                    raise Failed(f"/v1/models lists {ids}, not {name}")
        elif route == "/v1/chat/completions":
            need("choices/0/message/content", str)
            # the section's chat request is there to show Predicted Outputs: it sends a prediction, and
            # the prediction drafted tokens (accepted or rejected)
            if not isinstance(path_get(sent, "prediction/content")[1], str):
                raise Failed(f"{route}: the request sends no prediction.content")
            used = need("usage/completion_tokens_details/accepted_prediction_tokens", int) + \
                need("usage/completion_tokens_details/rejected_prediction_tokens", int)
            # a random-weight model's answers never follow the prediction: after the earlier requests' rejections
            # the sizing may rightly draft none of it (2026-11-30: one token of 128 on one run, none on another);
            # the counts must still be there
            if used == 0 and not self.random_weights:
                raise Failed(f"{route}: no prediction token was drafted: {json.dumps(body['usage'])}")
        elif route == "/v1/completions":
            need("choices/0/text", str)
        elif route == "/infill":
            need("content", str)
        else:
            raise Failed(f"{route}: this script does not know what that route answers (add it to check_answer)")

    # --- client configurations: the requests each client's own code sends, to the URLs configured

    def recorded_body(self, client, path):
        for r in self.recorded:
            if r["client"] == client and r["path"] == path and r.get("reads", r.get("some_event")):
                return r
        raise Failed(f"tests/server/client-requests.json has no {client} request to {path}")

    def replay(self, url, rec, model=None):
        body = json.loads(rec["body"])
        if model is not None:
            body["model"] = model
        status, text = http("POST", url, body)
        if status != 200:
            raise Failed(f"{rec['client']}'s {rec['path']} request to {url}: status {status}: {text[:300]}")
        if rec.get("stream"):
            events = sse_events(text)
            for f in rec.get("some_event", []):
                if not any(path_get(e, f)[0] for e in events):
                    raise Failed(f"{url}: no event of {rec['client']}'s stream has {f}")
        else:
            answer = json.loads(text)
            for f in rec.get("reads", []):
                if not path_get(answer, f)[0]:
                    raise Failed(f"{url}: {rec['client']} reads {f}, not in {text[:300]}")

    def listed(self, api_base, name, client):
        url = api_base.rstrip("/") + "/models"
        status, text = http("GET", url)
        if status != 200:
            raise Failed(f"{client}: GET {url}: status {status}")
        ids = [m["id"] for m in json.loads(text)["data"]]
        if name not in ids:
            raise Failed(f"{client} asks for the model {name!r}; /v1/models lists {ids} (serve it with --alias {name}?)")

    def on_server(self, url, client):
        if not url.startswith(self.base + "/") and url != self.base:
            raise Failed(f"{client}: {url} is not the running server's {self.base}")

    def continue_config(self, text):
        import yaml
        self.need_server()
        cfg = yaml.safe_load(self.remap(text))
        done = []
        for m in cfg["models"]:
            base = m["apiBase"]
            self.on_server(base, "Continue")
            if m["provider"] == "openai":
                self.listed(base, m["model"], "Continue")
                chat = {"model": m["model"], "max_tokens": 16, "temperature": 0, "stream": False,
                        "messages": [{"role": "user", "content": "Rename x to count.\n\ndef f(x):\n    return x\n"}],
                        "prediction": {"type": "content", "content": "def f(x):\n    return x\n"}}
                status, answer = http("POST", base.rstrip("/") + "/chat/completions", chat)
                if status != 200 or "accepted_prediction_tokens" not in answer:
                    raise Failed(f"Continue's edit to {base}chat/completions: status {status}: {answer[:300]}")
            elif m["provider"] == "llama.cpp":
                self.replay(base.rstrip("/") + "/completion", self.recorded_body("Continue", "/completion"))
            else:
                raise Failed(f"Continue provider {m['provider']}: not checked by this script")
            done.append(m["provider"])
        return "Continue: " + ", ".join(done)

    def zed_config(self, text):
        self.need_server()
        cfg = json.loads("{" + self.remap(text) + "}")
        for name, p in cfg["language_models"]["openai_compatible"].items():
            self.on_server(p["api_url"], "Zed")
            for m in p["available_models"]:
                self.listed(p["api_url"], m["name"], "Zed")
            self.replay(p["api_url"].rstrip("/") + "/completions", self.recorded_body("Zed", "/v1/completions"),
                        p["available_models"][0]["name"])
        return "Zed: models listed, its edit prediction request answered"

    def vim_config(self, text):
        self.need_server()
        m = re.search(r"'endpoint_fim'\s*:\s*'([^']+)'", self.remap(text))
        if not m:
            raise Failed("no endpoint_fim in the llama.vim configuration")
        self.on_server(m.group(1), "llama.vim")
        self.replay(m.group(1), self.recorded_body("llama.vim", "/infill"))
        return "llama.vim: its /infill request answered with the fields it reads"

    # --- what cannot run here

    def build_block(self, text):
        with open(os.path.join(ROOT, "scripts/build.sh"), encoding="utf-8") as f:
            build_sh = f.read()
        m = re.search(r'deb-install\.sh"((?:[^\n]*\\\n)*[^\n]*)', build_sh)
        want = set(m.group(1).replace("\\\n", " ").split())
        prefix_line = re.search(r'prefix=\$\("\$root/(scripts/setup-llama\.sh)" \| (tail -n 1)\)', build_sh)
        prefix = cfg_dir = None
        notes = []
        for line in logical_lines(text):
            w = words(line)
            if "apt-get" in w and "install" in w:
                got = {x for x in w[w.index("install") + 1:] if not x.startswith("-")}
                if got != want:
                    raise Failed(f"apt-get installs {sorted(got ^ want)} unlike scripts/build.sh")
                notes.append("packages as build.sh")
            elif line.startswith("prefix=$("):
                if not prefix_line or line.split("#")[0].strip() != \
                        f"prefix=$({prefix_line.group(1)} | {prefix_line.group(2)})":
                    raise Failed(f"'{line}' is not how scripts/build.sh finds the prefix")
                prefix = self.built_prefix()
            elif w[:2] == ["cmake", "-S"]:
                if prefix is None:
                    raise Failed("cmake configures before the prefix is set")
                bdir = w[w.index("-B") + 1]
                cfg_dir = os.path.join(self.work, "configure-check")
                cmd = line.replace(f"-B {bdir}", f"-B {shlex.quote(cfg_dir)}", 1)
                r = subprocess.run(["bash", "-c", f"prefix={shlex.quote(prefix)}; {cmd}"], cwd=ROOT, text=True,
                                   capture_output=True, timeout=300)
                if r.returncode != 0:
                    raise Failed(f"{line}: exit status {r.returncode}: {r.stderr.strip()[-400:]}")
                notes.append("configured")
            elif w[:2] == ["cmake", "--build"]:
                if cfg_dir is None:
                    raise Failed("cmake --build before a configure")
                targets = [w[i + 1] for i, a in enumerate(w[:-1]) if a == "--target"]
                r = subprocess.run(["cmake", "--build", cfg_dir, "--target", "help"], capture_output=True, text=True)
                have = set(re.findall(r"^\.\.\. (\S+)", r.stdout, re.M))
                for t in targets:
                    if t not in have:
                        raise Failed(f"{line}: no target {t}")
                notes.append(f"targets {targets} exist")
            else:
                raise Failed(f"'{line}': this script does not know how to check it")
        return ", ".join(notes)

    def built_prefix(self):
        """The llama.cpp prefix the binary's own build was configured with (what setup-llama.sh printed)."""
        cache = os.path.join(os.path.dirname(os.path.dirname(os.path.realpath(self.binary))), "CMakeCache.txt")
        with open(cache, encoding="utf-8") as f:
            m = re.search(r"^EDITSPEC_LLAMA_PREFIX:PATH=(.*)$", f.read(), re.M)
        if not m or not os.path.isfile(os.path.join(m.group(1), ".editspec-complete")):
            raise Failed(f"{cache}: no complete llama.cpp prefix")
        return m.group(1)

    def gpu_block(self, text):
        scripts = ""
        for s in ("scripts/build.sh", "scripts/setup-llama.sh"):
            with open(os.path.join(ROOT, s), encoding="utf-8") as f:
                scripts += f.read()
        build_dir = "build"
        notes = []
        for line in logical_lines(text):
            w = words(line)
            env = []
            while w and re.match(r"^[A-Z_][A-Z0-9_]*=", w[0]):
                env.append(w.pop(0))
            if w == ["scripts/build.sh"]:
                for e in env:
                    name, value = e.split("=", 1)
                    if not re.search(rf"\$\{{?{name}\b", scripts):
                        raise Failed(f"{name}: neither scripts/build.sh nor scripts/setup-llama.sh reads it")
                    if name == "BUILD_DIR":
                        build_dir = value
                if not re.search(r"build_dir=\$\{BUILD_DIR:-", scripts):
                    raise Failed("scripts/build.sh no longer builds into $BUILD_DIR")
                notes.append(f"build into {build_dir}/")
            elif w and w[0].endswith("/bin/editspec"):
                if w[0] != f"{build_dir}/bin/editspec":
                    raise Failed(f"{w[0]}: the build above puts the binary in {build_dir}/bin/editspec")
                for e in env:
                    name = e.split("=", 1)[0]
                    if subprocess.run(["grep", "-rqF", f'"{name}"', os.path.join(ROOT, "src")]).returncode != 0:
                        raise Failed(f"{name}: editspec never reads it (src/)")
                check_flags(w[2:], help_options(help_text(self.binary, w[1])), f"editspec {w[1]}")
                notes.append(f"{w[1]}'s flags")
            else:
                raise Failed(f"'{line}': this script does not know how to check it")
        return "not run (no GPU): " + ", ".join(notes)

    def prose_defaults(self, prose):
        """The defaults the section states, against `editspec serve --help`."""
        checks = [(r"It listens on `([\d.]+)` port", "--host"), (r"port `(\d+)` \(`--host`, `--port`", "--port"),
                  (r"\(`--parallel N` for more\)", None), (r"a ([\d,]+)-token context\s+\(`-c`\)", "--ctx-size")]
        flat = " ".join(prose.split())
        for pattern, option in checks:
            m = re.search(pattern, flat)
            if not m:
                raise Failed(f"the section no longer says /{pattern}/ (update prose_defaults)")
            if option and help_default(self.serve_help, option) != m.group(1).replace(",", ""):
                raise Failed(f"README says {option} defaults to {m.group(1)}; editspec serve --help says "
                             f"{help_default(self.serve_help, option)}")
        if "one request at a time" in flat and help_default(self.serve_help, "--parallel") != "1":
            raise Failed("README says one request at a time; --parallel's default is not 1")
        m = re.search(r"balancer\s+listens on `127\.0\.0\.1:(\d+)` \(`--port`\)", flat)
        r = subprocess.run([os.path.join(ROOT, "deploy/replicas.sh"), "--help"], capture_output=True, text=True)
        d = re.search(r"the balancer's port \(default (\d+)\)", r.stdout)
        if not m or not d or m.group(1) != d.group(1):
            raise Failed("the balancer's port in the section differs from deploy/replicas.sh --help's default")


def classify(lang, text):
    if lang == "yaml":
        return "continue"
    if lang == "json":
        return "zed"
    if lang == "vim":
        return "vim"
    if lang != "sh":
        return None
    if re.search(r"apt-get install|^cmake ", text, re.M) and "haproxy" not in text:
        return "build"
    if "EDITSPEC_BACKEND=cuda" in text or re.search(r"^build-\w+/bin/editspec", text, re.M):
        return "gpu"
    if text.startswith("deploy/replicas.sh"):
        return "replicas"
    if text.startswith("build/bin/editspec serve"):
        return "serve"
    if text.strip() == "scripts/build.sh":
        return "setup"
    if re.match(r"build/bin/editspec (apply|edit) ", text):
        return "apply"
    if text.startswith("curl "):
        return "request"
    return None


def free_port(span=1):
    for _ in range(100):
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            p = s.getsockname()[1]
        if p + span < 65535 and all(_port_free(p + i) for i in range(span + 1)):
            return p
    raise Failed("no free port")


def _port_free(p):
    with socket.socket() as s:
        try:
            s.bind(("127.0.0.1", p))
            return True
        except OSError:
            return False


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0], epilog=__doc__.split("\n", 2)[2],
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--binary", default=os.path.join(ROOT, "build/bin/editspec"))
    ap.add_argument("--readme", default=os.path.join(ROOT, "README.md"))
    ap.add_argument("--model-shape", default="",
                    help="SHAPE[:TYPE]: model.gguf is `editspec make-model --shape SHAPE --type TYPE` (default: the shipped target)")
    ap.add_argument("-v", "--verbose", action="store_true")
    ap.add_argument("--in-netns", action="store_true", help=argparse.SUPPRESS)
    a = ap.parse_args()
    binary = os.path.abspath(a.binary)
    if not os.access(binary, os.X_OK):
        print(f"readme-commands: {binary}: not an executable", file=sys.stderr)
        return 2

    ports = {}
    if not a.in_netns:
        if shutil.which("unshare") and subprocess.run(["unshare", "-rn", "true"], capture_output=True).returncode == 0:
            os.execvp("unshare", ["unshare", "-rn", sys.executable, os.path.abspath(__file__), *sys.argv[1:], "--in-netns"])
        ports = {DEFAULT_PORTS[0]: free_port(), DEFAULT_PORTS[1]: free_port(span=9)}
        say(f"no network namespace (unshare -rn): ports {ports} stand in for the README's")
    else:
        subprocess.run(["ip", "link", "set", "lo", "up"], check=True)

    started = time.time()
    work = tempfile.mkdtemp(prefix="readme-commands.")
    os.makedirs(os.path.join(work, "build/bin"))
    os.symlink(binary, os.path.join(work, "build/bin/editspec"))
    if a.model_shape:
        shape, _, mtype = a.model_shape.partition(":")
        r = subprocess.run([binary, "make-model", "--shape", shape, "--type", mtype or "q4_k_m", "--out",
                            os.path.join(work, "model.gguf")], capture_output=True, text=True, timeout=600)
        if r.returncode != 0:
            print(f"readme-commands: make-model --shape {shape}: {r.stderr.strip()}", file=sys.stderr)
            return 2
        say(f"model.gguf: {shape}, {mtype or 'q4_k_m'}, random weights (editspec make-model)")
    else:
        os.symlink(os.path.join(ROOT, "models/editspec-target.gguf"), os.path.join(work, "model.gguf"))
    os.symlink(os.path.join(ROOT, "deploy"), os.path.join(work, "deploy"))
    os.symlink(os.path.join(ROOT, "scripts"), os.path.join(work, "scripts"))

    problems, n = [], 0
    runner = None
    try:
        _, quick = section_blocks(a.readme, QUICK)
        prose, blocks = section_blocks(a.readme)
        blocks = quick + blocks
        runner = Runner(binary, work, ports, a.verbose, random_weights=bool(a.model_shape))
        if not blocks:
            raise Failed("the section has no commands")
        try:
            runner.prose_defaults(prose)
        except Failed as e:
            problems.append(f"README.md '{SECTION}': {e}")
        for lang, text, lineno in blocks:
            kind = classify(lang, text)
            where = f"README.md:{lineno} ({kind or lang or 'no language'})"
            n += 1
            try:
                if kind is None:
                    raise Failed("a block this script does not know how to check (see classify)")
                result = getattr(runner, kind + ("_config" if kind in ("continue", "zed", "vim") else "_block"))(text)
                say(f"ok  {where}: {result}")
            except Failed as e:
                problems.append(f"{where}: {e}")
                say(f"FAIL {where}: {e}")
            except Exception as e:  # a crash of this script is a failure too, not a pass
                problems.append(f"{where}: {type(e).__name__}: {e}")
                say(f"FAIL {where}: {type(e).__name__}: {e}")
        try:
            runner.stop()
        except Failed as e:
            problems.append(f"the last server: {e}")
    except Failed as e:
        problems.append(str(e))
    finally:
        if runner and runner.proc and runner.proc.poll() is None:
            os.killpg(runner.proc.pid, signal.SIGKILL)
        if not problems:
            shutil.rmtree(work, ignore_errors=True)
    for p in problems:
        print("FAILED " + p)
    say(f"{n} blocks, {len(problems)} failures, {time.time() - started:.1f} s"
        + (f" (logs in {work})" if problems else ""))
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
