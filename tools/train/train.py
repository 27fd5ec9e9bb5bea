"""The trainer: one model, one run, resumable, deterministic for a seed (torch on one thread).

    python3 tools/train/train.py SPEC.json

SPEC.json (run.py writes it) holds everything: the model shape, the data folder, the mixture, the loss
weights by token kind, the schedule and the output folder:

    {"name": "target", "data": ".../data", "out": ".../target", "seed": 1,
     "model": {model_config fields}, "init": "" | "path/to/ckpt.pt" | "path/to/model.gguf",
     "steps": 3000, "batch": 4, "lr": 2e-3, "lr_min_frac": 0.1, "warmup": 100, "weight_decay": 0.1,
     "p_edit": 0.5,                           # fraction of sequences packed with edit examples
     "copy_warmup": 0,                        # first steps made of pure copy sequences (copy_sequence)
     "threads_more": {"threads": 2, "after": PATH},   # optional: more threads once PATH exists
     "weights": {"prompt": 0, "same": 1, "new": 1, "eos": 1, "code": 1},   # loss weight by token kind
     "eval_every": 200, "ckpt_every": 200, "log_every": 20, "threads": 1, "precision": "bf16" | "fp32",
     "ftype": "f16"}

Batches depend only on (seed, step): sequence b of step s is drawn by numpy's PCG64 seeded with
[seed, s, b], so a resumed run sees exactly the batches of an uninterrupted one. Each sequence is either
a window of n_ctx + 1 tokens of the code stream (files concatenated, BOS before each) or edit examples
packed whole (BOS ... EOS) and padded. The loss is the mean cross-entropy over target tokens, each
weighted by its kind (data.KIND_*): plain language modelling weights every kind, plain fine-tuning
weights the answer (same + new + eos), edit-oriented fine-tuning (EfficientEdit eq. 8) only `new`.

Outputs in "out": ckpt.pt (the latest checkpoint: model, optimizer, step), log.jsonl (progress and
held-out evaluations), model.gguf (at the end), done.json (final metrics and timing).
"""
from __future__ import annotations

import json
import math
import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import numpy as np  # noqa: E402
import torch  # noqa: E402

import data  # noqa: E402
from model import llama, loss_weighted, model_config, model_save_gguf  # noqa: E402

KIND_NAMES = {data.KIND_PROMPT: "prompt", data.KIND_SAME: "same", data.KIND_NEW: "new", data.KIND_EOS: "eos",
              data.KIND_CODE: "code", data.KIND_PAD: "pad"}


def log_line(fh, obj):
    fh.write(json.dumps(obj) + "\n")
    fh.flush()


class batch_source:
    """training sequences from the code stream and the packed edit examples"""

    def __init__(self, data_dir: str, split: str, n_ctx: int, pad: int, bos: int = -1):
        self.n_ctx = n_ctx
        self.pad = pad
        self.bos = bos
        self.code = np.load(os.path.join(data_dir, f"code-{split}.npy")).astype(np.int64)
        z = np.load(os.path.join(data_dir, f"edits-{split}.npz"))
        self.e_tok = z["tokens"].astype(np.int64)
        self.e_kind = z["kinds"]
        self.e_off = z["offsets"]
        self.n_edits = len(self.e_off) - 1

    def sequence(self, rng: np.random.Generator, p_edit: float):
        """(tokens [n_ctx + 1], kinds [n_ctx + 1])"""
        L = self.n_ctx + 1
        if self.n_edits == 0 or rng.random() >= p_edit:
            s = int(rng.integers(0, self.code.size - L))
            return self.code[s:s + L], np.full(L, data.KIND_CODE, np.uint8)
        toks = np.full(L, self.pad, np.int64)
        kinds = np.full(L, data.KIND_PAD, np.uint8)
        n = 0
        for _ in range(64):   # draws that do not fit are skipped, so the sequence fills up (~95 % vs 74 % when packing stopped at the first misfit)
            if L - n < 32:
                break
            i = int(rng.integers(0, self.n_edits))
            a, b = self.e_off[i], self.e_off[i + 1]
            if n + (b - a) > L:
                continue
            toks[n:n + b - a] = self.e_tok[a:b]
            kinds[n:n + b - a] = self.e_kind[a:b]
            n += b - a
        return toks, kinds

    def copy_sequence(self, rng: np.random.Generator):
        """the copy warm-up: [BOS] w w [BOS] v v ... with w, v windows of 16-200 code tokens; only the second
        copy is counted (as `same`), so the loss rewards nothing but copying"""
        L = self.n_ctx + 1
        toks = np.full(L, self.pad, np.int64)
        kinds = np.full(L, data.KIND_PAD, np.uint8)
        n = 0
        while n < L:
            w = int(rng.integers(16, 201))
            s = int(rng.integers(0, self.code.size - w))
            seg = self.code[s:s + w]
            piece = np.concatenate([[self.bos], seg, seg])
            kind = np.concatenate([np.full(1 + w, data.KIND_PROMPT, np.uint8), np.full(w, data.KIND_SAME, np.uint8)])
            m = min(L - n, piece.size)
            toks[n:n + m] = piece[:m]
            kinds[n:n + m] = kind[:m]
            n += m
        return toks, kinds

    def batch(self, seed: int, step: int, B: int, p_edit: float, copy: bool = False):
        xs, ks = [], []
        for b in range(B):
            rng = np.random.Generator(np.random.PCG64([seed, step, b]))
            t, k = self.copy_sequence(rng) if copy else self.sequence(rng, p_edit)
            xs.append(t)
            ks.append(k)
        return torch.from_numpy(np.stack(xs)), np.stack(ks)


def weights_of(kinds: np.ndarray, table: dict) -> torch.Tensor:
    lut = np.zeros(6, np.float32)
    for k, name in KIND_NAMES.items():
        lut[k] = float(table.get(name, 0.0))
    return torch.from_numpy(lut[kinds])


def lr_at(step: int, spec: dict) -> float:
    lr, warm, total = spec["lr"], spec.get("warmup", 100), spec["steps"]
    if step < warm:
        return lr * (step + 1) / warm
    t = (step - warm) / max(1, total - warm)
    lo = lr * spec.get("lr_min_frac", 0.1)
    return lo + (lr - lo) * 0.5 * (1 + math.cos(math.pi * min(1.0, t)))


def autocast(spec):
    if spec.get("precision", "bf16") == "bf16":
        return torch.autocast("cpu", dtype=torch.bfloat16)
    import contextlib
    return contextlib.nullcontext()


@torch.no_grad()
def evaluate(net, spec, held: batch_source, n_code_windows: int, n_edits: int) -> dict:
    """held-out: greedy next-token accuracy on code windows (scored past the first quarter, so each token
    has context), and on edit answers teacher-forced (all answer tokens; new-line tokens alone)"""
    net.eval()
    n_ctx = spec["model"]["n_ctx"]
    res = {}
    # code: evenly spaced windows of the held-out stream
    code = held.code
    starts = np.linspace(0, code.size - n_ctx - 1, n_code_windows).astype(np.int64)
    correct = total = 0
    nll = 0.0
    for s in starts:
        x = torch.from_numpy(code[s:s + n_ctx + 1])[None]
        with autocast(spec):
            lg = net(x[:, :-1])
        lg = lg.float()[0, n_ctx // 4:]
        y = x[0, 1 + n_ctx // 4:]
        correct += int((lg.argmax(-1) == y).sum())
        total += y.numel()
        nll += float(torch.nn.functional.cross_entropy(lg, y, reduction="sum"))
    res["code_acc"] = correct / max(1, total)
    res["code_nll"] = nll / max(1, total)
    # edits: the first n_edits held-out examples, one at a time
    c_all = t_all = c_new = t_new = 0
    for i in range(min(n_edits, held.n_edits)):
        a, b = held.e_off[i], held.e_off[i + 1]
        x = torch.from_numpy(held.e_tok[a:b])[None]
        k = held.e_kind[a + 1:b]
        with autocast(spec):
            lg = net(x[:, :-1])
        ok = (lg.float()[0].argmax(-1) == x[0, 1:]).numpy()
        ans = (k == data.KIND_SAME) | (k == data.KIND_NEW) | (k == data.KIND_EOS)
        new = k == data.KIND_NEW
        c_all += int(ok[ans].sum())
        t_all += int(ans.sum())
        c_new += int(ok[new].sum())
        t_new += int(new.sum())
    res["edit_answer_acc"] = c_all / max(1, t_all)
    res["edit_new_acc"] = c_new / max(1, t_new)
    net.train()
    return res


def main():
    spec = json.load(open(sys.argv[1]))
    out = spec["out"]
    os.makedirs(out, exist_ok=True)
    torch.set_num_threads(spec.get("threads", 1))
    torch.set_flush_denormal(True)
    torch.manual_seed(spec["seed"])
    cfg = model_config(**spec["model"])
    sp = data.vocab_special(os.path.join(spec["data"], "tokenizer.gguf"))
    assert sp["n_vocab"] == cfg.n_vocab, f"tokenizer has {sp['n_vocab']} tokens, model {cfg.n_vocab}"
    train = batch_source(spec["data"], "train", cfg.n_ctx, sp["pad"], sp["bos"])
    held = batch_source(spec["data"], "heldout", cfg.n_ctx, sp["pad"])

    net = llama(cfg, seed=spec["seed"])
    decay = [p for n, p in net.named_parameters() if p.dim() >= 2]
    no_decay = [p for n, p in net.named_parameters() if p.dim() < 2]
    opt = torch.optim.AdamW([{"params": decay, "weight_decay": spec.get("weight_decay", 0.1)},
                             {"params": no_decay, "weight_decay": 0.0}], lr=spec["lr"], betas=(0.9, 0.95), eps=1e-8)
    step = 0
    t_prev = 0.0   # training seconds of earlier runs (resume)
    ckpt = os.path.join(out, "ckpt.pt")
    if os.path.exists(ckpt):
        ck = torch.load(ckpt, map_location="cpu")
        net.load_state_dict(ck["model"])
        opt.load_state_dict(ck["opt"])
        step, t_prev = ck["step"], ck.get("seconds", 0.0)
        print(f"{spec['name']}: resumed at step {step}", flush=True)
    elif spec.get("init", "").endswith(".gguf"):
        # a pre-trained model's export (F16): what the pipeline ships, so a fine-tuning can start from it
        from model import model_load_gguf
        model_load_gguf(net, spec["init"], grow_vocab=True)   # the FIM fine-tune adds tokens
        print(f"{spec['name']}: initialized from {spec['init']}", flush=True)
    elif spec.get("init"):
        ck = torch.load(spec["init"], map_location="cpu")
        net.load_state_dict(ck["model"])
        print(f"{spec['name']}: initialized from {spec['init']}", flush=True)

    logf = open(os.path.join(out, "log.jsonl"), "a")
    B, steps, n_ctx = spec["batch"], spec["steps"], cfg.n_ctx
    tok_per_step = B * n_ctx
    log_every, eval_every, ckpt_every = spec.get("log_every", 20), spec.get("eval_every", 200), spec.get("ckpt_every", 200)
    n_eval_code, n_eval_edits = spec.get("eval_code_windows", 16), spec.get("eval_edits", 64)
    print(f"{spec['name']}: {cfg.n_params() / 1e6:.2f}M parameters ({cfg.n_params_compute() / 1e6:.2f}M in matmuls), "
          f"{steps} steps x {tok_per_step} tokens, {spec.get('precision', 'bf16')}, {spec.get('threads', 1)} thread(s)", flush=True)
    if step == 0:
        ev = evaluate(net, spec, held, n_eval_code, n_eval_edits)
        log_line(logf, {"step": 0, "tokens": 0, "seconds": 0.0, **ev})
    t0 = time.perf_counter()
    cpu0 = time.process_time()
    step0 = step
    t_eval = 0.0   # seconds spent in evaluate() (not counted in the throughput)
    loss_acc, n_acc = 0.0, 0
    net.train()
    more = spec.get("threads_more")   # {"threads": N, "after": path}: N threads once `path` exists
    while step < steps:
        if more and torch.get_num_threads() != more["threads"] and os.path.exists(more["after"]):
            # the sibling training has finished and left its core free; the thread count changes no
            # result (checked: 1 and 2 threads give bit-identical weights), only the speed
            torch.set_num_threads(more["threads"])
            print(f"{spec['name']}: {more['after']} exists: {more['threads']} threads from step {step}", flush=True)
            log_line(logf, {"step": step, "threads": more["threads"]})
        x, kinds = train.batch(spec["seed"], step, B, spec.get("p_edit", 0.5), copy=step < spec.get("copy_warmup", 0))
        w = weights_of(kinds[:, 1:], spec["weights"])
        for g in opt.param_groups:
            g["lr"] = lr_at(step, spec)
        sel = w > 0
        with autocast(spec):
            logits = net(x[:, :-1], select=sel)
        loss, wsum = loss_weighted(logits, x[:, 1:][sel], w[sel])
        opt.zero_grad(set_to_none=True)
        if float(wsum) > 0:
            loss.backward()
            torch.nn.utils.clip_grad_norm_(net.parameters(), 1.0)
            opt.step()
        loss_acc += float(loss)
        n_acc += 1
        step += 1
        secs = t_prev + time.perf_counter() - t0
        if step % log_every == 0 or step == steps:
            wall = time.perf_counter() - t0 - t_eval
            rate = tok_per_step * (step - step0) / max(1e-9, wall)   # this process's tokens per second
            rec = {"step": step, "loss": loss_acc / n_acc, "lr": lr_at(step - 1, spec), "seconds": round(secs, 1),
                   "tokens": step * tok_per_step, "tok_s": round(rate, 1),
                   "cpu_share": round((time.process_time() - cpu0) / max(1e-9, time.perf_counter() - t0), 2)}
            log_line(logf, rec)
            print(f"{spec['name']}: step {step}/{steps} loss {rec['loss']:.3f} lr {rec['lr']:.2e} "
                  f"{rate:.0f} tok/s (cpu share {rec['cpu_share']:.2f}) "
                  f"elapsed {secs / 60:.1f} min, eta {(steps - step) * tok_per_step / max(1e-9, rate) / 60:.1f} min", flush=True)
            loss_acc, n_acc = 0.0, 0
        if step % eval_every == 0 or step == steps:
            te = time.perf_counter()
            ev = evaluate(net, spec, held, n_eval_code, n_eval_edits)
            t_eval += time.perf_counter() - te
            log_line(logf, {"step": step, "tokens": step * tok_per_step, "seconds": round(secs, 1), **ev})
            print(f"{spec['name']}: eval step {step}: code acc {ev['code_acc']:.3f} nll {ev['code_nll']:.3f}, "
                  f"edit answer acc {ev['edit_answer_acc']:.3f}, new-line acc {ev['edit_new_acc']:.3f}", flush=True)
        if step % ckpt_every == 0 or step == steps:
            tmp = ckpt + ".tmp"
            torch.save({"model": net.state_dict(), "opt": opt.state_dict(), "step": step, "seconds": secs,
                        "config": cfg.to_dict()}, tmp)
            os.replace(tmp, ckpt)
    secs = t_prev + time.perf_counter() - t0
    gguf_path = os.path.join(out, "model.gguf")
    model_save_gguf(net, gguf_path, os.path.join(spec["data"], "tokenizer.gguf"), ftype=spec.get("ftype", "f16"),
                    name=f"editspec-{spec['name']}",
                    extra={"editspec.train.spec": json.dumps({k: v for k, v in spec.items() if k not in ("out", "data", "init")},
                                                             sort_keys=True),
                           **({"editspec.fim_order": spec["fim_order"]} if spec.get("fim_order") else {})})
    ev = evaluate(net, spec, held, n_eval_code, n_eval_edits)
    done = {"name": spec["name"], "steps": steps, "tokens": steps * tok_per_step, "seconds": round(secs, 1),
            "params": cfg.n_params(), "gguf": gguf_path, **ev}
    data._write_json(os.path.join(out, "done.json"), done)
    print(f"{spec['name']}: done: {json.dumps(done)}", flush=True)


if __name__ == "__main__":
    main()
