"""Check that a model exported by model_save_gguf computes in llama.cpp what it computes in torch.

    python3 tools/train/check_export.py --vocab VOCAB.gguf --tokens TOKENS.bin --eval build/train/bin/editspec-train-eval
        [--checkpoint ckpt.pt]      # a trained checkpoint; default: a random model of a small shape

Writes the model as F32, has llama.cpp dump the logits of the first document's first 64 tokens
(editspec-train-eval dump) and compares them with torch's: relative L2 difference per position and
argmax agreement. Exit status 1 when the worst relative difference exceeds 1e-3 or an argmax differs.
"""
import argparse
import json
import os
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import numpy as np  # noqa: E402
import torch  # noqa: E402

from model import llama, model_config, model_save_gguf  # noqa: E402


def tokens_read(path):
    """documents of tokens.bin: list of (tokens int32 [n], byte_start uint32 [n])"""
    raw = open(path, "rb").read()
    out, off = [], 0
    while off < len(raw):
        n = int(np.frombuffer(raw, np.uint32, 1, off)[0])
        off += 4
        t = np.frombuffer(raw, np.int32, n, off)
        off += 4 * n
        s = np.frombuffer(raw, np.uint32, n, off)
        off += 4 * n
        out.append((t, s))
    return out


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--vocab", required=True)
    ap.add_argument("--tokens", required=True)
    ap.add_argument("--eval", required=True)
    ap.add_argument("--checkpoint", default="")
    ap.add_argument("--n", type=int, default=64)
    a = ap.parse_args()
    torch.set_num_threads(1)
    if a.checkpoint:
        ck = torch.load(a.checkpoint, map_location="cpu")
        cfg = model_config(**ck["config"])
        net = llama(cfg)
        net.load_state_dict(ck["model"])
    else:
        from model import gguf_import
        gguf = gguf_import()
        n_vocab = len(gguf.GGUFReader(a.vocab).fields["tokenizer.ggml.tokens"].data)
        cfg = model_config(n_vocab=n_vocab, n_embd=128, n_layer=2, n_head=2, n_head_kv=1, n_ff=320, n_ctx=128, tied=False)
        net = llama(cfg, seed=3)
        with torch.no_grad():   # larger than init, so the layers matter in the logits
            for p in net.parameters():
                if p.dim() == 2:
                    p.mul_(4.0)
    net.eval()
    with tempfile.TemporaryDirectory() as d:
        path = os.path.join(d, "m.gguf")
        model_save_gguf(net, path, a.vocab, ftype="f32", name="check")
        out = os.path.join(d, "logits.f32")
        r = subprocess.run([a.eval, "dump", "-m", path, "-t", a.tokens, "-o", out, "--ctx", str(a.n)],
                           capture_output=True, text=True)
        if r.returncode != 0:
            print(r.stderr)
            return 1
        got = np.fromfile(out, np.float32).reshape(-1, cfg.n_vocab)
    toks = tokens_read(a.tokens)[0][0]
    seq = np.concatenate([[0], toks])[:got.shape[0]]   # BOS = 0 in our vocabulary; checked below
    with torch.no_grad():
        want = net(torch.tensor(seq[None, :], dtype=torch.long))[0].numpy()
    rel = np.linalg.norm(got - want, axis=1) / np.linalg.norm(want, axis=1)
    agree = float((got.argmax(1) == want.argmax(1)).mean())
    res = {"n": int(got.shape[0]), "rel_l2_max": float(rel.max()), "rel_l2_mean": float(rel.mean()), "argmax_agree": agree}
    print(json.dumps(res))
    return 0 if res["rel_l2_max"] < 1e-3 and agree == 1.0 else 1


if __name__ == "__main__":
    sys.exit(main())
