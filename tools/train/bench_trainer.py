"""Training throughput of the torch trainer for a model shape: tokens/s of forward + backward + AdamW.

    OPENBLAS_NUM_THREADS=1 python3 tools/train/bench_trainer.py --vocab 4096 --embd 256 --layer 4 --ff 768 \
        --ctx 512 --batch 8 --threads 1 --steps 6

Random tokens (the speed does not depend on them); the first step is a warm-up and is not timed.
Prints one JSON line.
"""
import argparse
import json
import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import torch  # noqa: E402

from model import llama, loss_weighted, model_config  # noqa: E402


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--vocab", type=int, default=4096)
    ap.add_argument("--embd", type=int, default=256)
    ap.add_argument("--layer", type=int, default=4)
    ap.add_argument("--head", type=int, default=0, help="0 = embd/64")
    ap.add_argument("--ff", type=int, default=0, help="0 = 3*embd")
    ap.add_argument("--ctx", type=int, default=512)
    ap.add_argument("--batch", type=int, default=8)
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--steps", type=int, default=6)
    ap.add_argument("--untied", action="store_true")
    ap.add_argument("--bf16", action="store_true", help="autocast to bfloat16")
    a = ap.parse_args()
    torch.set_num_threads(a.threads)
    torch.set_flush_denormal(True)
    cfg = model_config(n_vocab=a.vocab, n_embd=a.embd, n_layer=a.layer, n_head=a.head or max(1, a.embd // 64),
                       n_ff=a.ff or 3 * a.embd, n_ctx=a.ctx, tied=not a.untied)
    net = llama(cfg, seed=1)
    opt = torch.optim.AdamW(net.parameters(), lr=1e-3, weight_decay=0.1)
    g = torch.Generator().manual_seed(1)
    x = torch.randint(0, a.vocab, (a.batch, a.ctx + 1), generator=g)
    w = torch.ones(a.batch, a.ctx)
    times = []
    cpu0 = wall0 = 0.0
    for step in range(a.steps + 1):
        if step == 1:
            cpu0, wall0 = time.process_time(), time.perf_counter()
        t0 = time.perf_counter()
        if a.bf16:
            with torch.autocast("cpu", dtype=torch.bfloat16):
                logits = net(x[:, :-1])
        else:
            logits = net(x[:, :-1])
        loss, _ = loss_weighted(logits, x[:, 1:], w)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
        if step > 0:
            times.append(time.perf_counter() - t0)
    cpu_share = (time.process_time() - cpu0) / (time.perf_counter() - wall0)
    times.sort()
    med = times[len(times) // 2]
    tok = a.batch * a.ctx
    print(json.dumps({
        "vocab": a.vocab, "embd": a.embd, "layer": a.layer, "ff": cfg.n_ff, "head": cfg.n_head, "ctx": a.ctx,
        "batch": a.batch, "threads": a.threads, "tied": cfg.tied, "bf16": a.bf16,
        "params_M": round(cfg.n_params() / 1e6, 2), "params_compute_M": round(cfg.n_params_compute() / 1e6, 2),
        "step_s_median": round(med, 3), "step_s_min": round(times[0], 3),
        "tok_s_median": round(tok / med, 1), "tok_s_best": round(tok / times[0], 1),
        "cpu_share": round(cpu_share, 2), "load1": os.getloadavg()[0]}))


if __name__ == "__main__":
    main()
