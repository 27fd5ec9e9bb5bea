"""The llama architecture in PyTorch, laid out so its weights load in stock llama.cpp unchanged.

    cfg = model_config(n_vocab=4096, n_embd=256, n_layer=4, n_head=4, n_ff=768, n_ctx=512)
    net = llama(cfg)                                  # torch.nn.Module, init from a seeded generator
    logits = net(tokens)                              # tokens [B, T] int64 -> logits [B, T, n_vocab]
    model_save_gguf(net, "out.gguf", vocab_gguf="tok.gguf", ftype="f16", name="editspec-target")

Matches llama.cpp's LLM_ARCH_LLAMA graph (src/models/llama.cpp at the pinned commit):
  x = token_embd[tokens]
  per layer: h = x + attn_output(attn(rope(attn_q(n)), rope(attn_k(n)), attn_v(n))),  n = rms_norm(x) * attn_norm
             x = h + ffn_down(silu(ffn_gate(m)) * ffn_up(m)),                           m = rms_norm(h) * ffn_norm
  logits = output(rms_norm(x) * output_norm)        (output = token_embd when tied)
RoPE is llama.cpp's LLAMA_ROPE_TYPE_NORM: it rotates adjacent pairs (x[2i], x[2i+1]) by pos * base^(-2i/d).
(HF checkpoints rotate halves and convert_hf_to_gguf.py permutes Q/K to compensate; we train in the
GGUF layout directly, so no permutation.) A torch nn.Linear weight [out, in] is row-major, which is
ggml's ne = [in, out]: the bytes go to the file as they are.
tools/train/check-export (train.py --check-export) compares these logits with llama.cpp's.
"""
from __future__ import annotations

import math
import os
import sys
from dataclasses import asdict, dataclass

import torch
import torch.nn as nn
import torch.nn.functional as F

GGUF_PY = os.environ.get("EDITSPEC_GGUF_PY", "")


def gguf_import():
    """gguf-py from the pinned llama.cpp source tree (the writer llama.cpp's converters use)."""
    if GGUF_PY and GGUF_PY not in sys.path:
        sys.path.insert(0, GGUF_PY)
    import gguf  # noqa: E402
    return gguf


@dataclass
class model_config:
    n_vocab: int = 4096
    n_embd: int = 256
    n_layer: int = 4
    n_head: int = 4
    n_head_kv: int = 0        # 0 = n_head (no grouped-query attention)
    n_ff: int = 768
    n_ctx: int = 512          # training context, tokens; written as llama.context_length
    rope_base: float = 10000.0
    rms_eps: float = 1e-5
    tied: bool = True         # output layer = token_embd (no output.weight in the file)

    def __post_init__(self):
        if self.n_head_kv == 0:
            self.n_head_kv = self.n_head
        assert self.n_embd % self.n_head == 0 and self.n_head % self.n_head_kv == 0

    @property
    def head_dim(self) -> int:
        return self.n_embd // self.n_head

    def n_params(self) -> int:
        d, f, L, v = self.n_embd, self.n_ff, self.n_layer, self.n_vocab
        kv = self.n_head_kv * self.head_dim
        per_layer = d * d * 2 + d * kv * 2 + 3 * d * f + 2 * d
        return v * d * (1 if self.tied else 2) + L * per_layer + d

    def n_params_compute(self) -> int:
        """parameters that cost a multiply per token: all but the input embedding lookup"""
        return self.n_params() - (0 if self.tied else self.n_vocab * self.n_embd)

    def to_dict(self) -> dict:
        return asdict(self)


class rms_norm(nn.Module):
    def __init__(self, d: int, eps: float):
        super().__init__()
        self.eps = eps
        self.weight = nn.Parameter(torch.ones(d))

    def forward(self, x):
        return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + self.eps) * self.weight


def rope_tables(n_ctx: int, head_dim: int, base: float):
    """cos, sin [n_ctx, head_dim/2] for LLAMA_ROPE_TYPE_NORM"""
    inv = base ** (-torch.arange(0, head_dim, 2, dtype=torch.float64) / head_dim)
    ang = torch.arange(n_ctx, dtype=torch.float64)[:, None] * inv[None, :]
    return torch.cos(ang).float(), torch.sin(ang).float()


def rope_apply(x, cos, sin):
    """x [B, T, H, D]; rotates adjacent pairs (x[2i], x[2i+1])"""
    B, T, H, D = x.shape
    xp = x.view(B, T, H, D // 2, 2)
    x0, x1 = xp[..., 0], xp[..., 1]
    c, s = cos[:T, None, :], sin[:T, None, :]
    return torch.stack((x0 * c - x1 * s, x0 * s + x1 * c), dim=-1).view(B, T, H, D)


class block(nn.Module):
    def __init__(self, cfg: model_config):
        super().__init__()
        d, kv = cfg.n_embd, cfg.n_head_kv * cfg.head_dim
        self.cfg = cfg
        self.attn_norm = rms_norm(d, cfg.rms_eps)
        self.attn_q = nn.Linear(d, d, bias=False)
        self.attn_k = nn.Linear(d, kv, bias=False)
        self.attn_v = nn.Linear(d, kv, bias=False)
        self.attn_output = nn.Linear(d, d, bias=False)
        self.ffn_norm = rms_norm(d, cfg.rms_eps)
        self.ffn_gate = nn.Linear(d, cfg.n_ff, bias=False)
        self.ffn_up = nn.Linear(d, cfg.n_ff, bias=False)
        self.ffn_down = nn.Linear(cfg.n_ff, d, bias=False)

    def forward(self, x, cos, sin, mask):
        cfg = self.cfg
        B, T, _ = x.shape
        hd, H, Hkv = cfg.head_dim, cfg.n_head, cfg.n_head_kv
        n = self.attn_norm(x)
        q = rope_apply(self.attn_q(n).view(B, T, H, hd), cos, sin).transpose(1, 2)    # [B, H, T, hd]
        k = rope_apply(self.attn_k(n).view(B, T, Hkv, hd), cos, sin).transpose(1, 2)  # [B, Hkv, T, hd]
        v = self.attn_v(n).view(B, T, Hkv, hd).transpose(1, 2)
        if Hkv != H:
            k = k.repeat_interleave(H // Hkv, dim=1)
            v = v.repeat_interleave(H // Hkv, dim=1)
        att = q @ k.transpose(-1, -2)                                                  # [B, H, T, T]
        # under bf16 autocast the scores stay bf16: autocast would run the softmax and its backward in
        # fp32, 13 % of a training step, and round the result to bf16 for the next matmul anyway
        with torch.autocast("cpu", enabled=False):
            att = (att * (1.0 / math.sqrt(hd)) + mask[:T, :T].to(att.dtype)).softmax(-1)
        y = (att @ v).transpose(1, 2).reshape(B, T, H * hd)
        h = x + self.attn_output(y)
        m = self.ffn_norm(h)
        return h + self.ffn_down(F.silu(self.ffn_gate(m)) * self.ffn_up(m))


class llama(nn.Module):
    def __init__(self, cfg: model_config, seed: int = 1):
        super().__init__()
        self.cfg = cfg
        self.token_embd = nn.Embedding(cfg.n_vocab, cfg.n_embd)
        self.blocks = nn.ModuleList([block(cfg) for _ in range(cfg.n_layer)])
        self.output_norm = rms_norm(cfg.n_embd, cfg.rms_eps)
        self.output = None if cfg.tied else nn.Linear(cfg.n_embd, cfg.n_vocab, bias=False)
        cos, sin = rope_tables(cfg.n_ctx, cfg.head_dim, cfg.rope_base)
        self.register_buffer("rope_cos", cos, persistent=False)
        self.register_buffer("rope_sin", sin, persistent=False)
        mask = torch.full((cfg.n_ctx, cfg.n_ctx), float("-inf")).triu(1)
        self.register_buffer("causal_mask", mask, persistent=False)
        self.init_weights(seed)

    def init_weights(self, seed: int):
        """GPT-2 style: N(0, 0.02), residual projections N(0, 0.02/sqrt(2 n_layer)); deterministic for a seed"""
        g = torch.Generator().manual_seed(seed)
        std_res = 0.02 / math.sqrt(2 * self.cfg.n_layer)
        with torch.no_grad():
            for name, p in self.named_parameters():
                if p.dim() == 1:
                    p.fill_(1.0)
                elif name.endswith("attn_output.weight") or name.endswith("ffn_down.weight"):
                    p.normal_(0.0, std_res, generator=g)
                else:
                    p.normal_(0.0, 0.02, generator=g)

    def forward(self, tokens, select=None):
        """tokens [B, T] (T <= n_ctx) -> logits [B, T, n_vocab]; with select (bool [B, T]) only the selected
        positions' logits, [N, n_vocab]: the output layer is the largest matmul and a loss that weights a
        position 0 (the prompt of an edit example) needs none"""
        x = self.token_embd(tokens)
        for b in self.blocks:
            x = b(x, self.rope_cos, self.rope_sin, self.causal_mask)
        if select is not None:
            x = x[select]
        x = self.output_norm(x)
        w = self.token_embd.weight if self.output is None else self.output.weight
        return x @ w.t()


def loss_weighted(logits, targets, weights):
    """mean cross-entropy over tokens, each counted with its weight (0 = not counted).
    logits [..., V], targets and weights (float) of the same leading shape -> (loss, sum of weights)"""
    ce = F.cross_entropy(logits.reshape(-1, logits.shape[-1]).float(), targets.reshape(-1), reduction="none")
    w = weights.reshape(-1)
    wsum = w.sum()
    return (ce * w).sum() / wsum.clamp(min=1.0), wsum


# ----------------------------------------------------------------------------
# GGUF export

def gguf_tokenizer_fields(vocab_gguf: str):
    """the tokenizer.* key-values of a vocabulary GGUF as (key, value, type, sub_type) tuples"""
    gguf = gguf_import()
    r = gguf.GGUFReader(vocab_gguf)
    out = []
    for key, f in r.fields.items():
        if not key.startswith("tokenizer."):
            continue
        vtype = f.types[0]
        if vtype == gguf.GGUFValueType.ARRAY:
            sub = f.types[1]
            val = [f.contents(i) for i in range(len(f.data))]
            out.append((key, val, vtype, sub))
        else:
            out.append((key, f.contents(), vtype, None))
    return out


def model_load_gguf(net: llama, path: str, grow_vocab: bool = False) -> dict:
    """loads the weights of a GGUF that model_save_gguf wrote (F32 or F16) into net, whose shape must
    match (its n_ctx may differ: RoPE has no learned positions); returns the file's key-values
    editspec.* (the training spec of the run that made it). grow_vocab: net may have more tokens than
    the file (tokens appended to its vocabulary: the FIM fine-tune's); their embedding rows start as
    the mean of the file's rows"""
    gguf = gguf_import()
    import numpy as np
    r = gguf.GGUFReader(path)
    tensors = {t.name: t for t in r.tensors}
    params = dict(net.named_parameters())
    names = {"token_embd.weight": "token_embd.weight", "output_norm.weight": "output_norm.weight"}
    if net.output is not None:
        names["output.weight"] = "output.weight"
    for i in range(net.cfg.n_layer):
        for n in ("attn_norm", "attn_q", "attn_k", "attn_v", "attn_output", "ffn_norm", "ffn_gate", "ffn_up", "ffn_down"):
            names[f"blk.{i}.{n}.weight"] = f"blocks.{i}.{n}.weight"
    if set(tensors) != set(names):
        raise ValueError(f"{path}: tensors {sorted(set(tensors) ^ set(names))[:6]} do not match the model's shape")
    with torch.no_grad():
        for gname, pname in names.items():
            t = tensors[gname]
            shape = tuple(params[pname].shape)
            if grow_vocab and gname in ("token_embd.weight", "output.weight") and t.shape[-1] < shape[0]:
                a = np.asarray(t.data).astype(np.float32).reshape((-1, shape[1]))
                a = np.concatenate([a, np.repeat(a.mean(0, keepdims=True), shape[0] - a.shape[0], 0)])
            else:
                a = np.asarray(t.data).astype(np.float32).reshape(shape)
            params[pname].copy_(torch.from_numpy(a))
    out = {}
    for key, f in r.fields.items():
        if key.startswith("editspec."):
            out[key] = f.contents()
    return out


def model_save_gguf(net: llama, path: str, vocab_gguf: str, ftype: str = "f16", name: str = "editspec",
                    extra: dict | None = None):
    """writes net as a llama GGUF: tokenizer.* copied from vocab_gguf, matrices in ftype (f32 or f16),
    1-D tensors in F32. Written to path + ".tmp" and renamed."""
    gguf = gguf_import()
    import numpy as np
    cfg = net.cfg
    tmp = path + ".tmp"
    w = gguf.GGUFWriter(tmp, "llama")
    w.add_name(name)
    w.add_context_length(cfg.n_ctx)
    w.add_embedding_length(cfg.n_embd)
    w.add_block_count(cfg.n_layer)
    w.add_feed_forward_length(cfg.n_ff)
    w.add_head_count(cfg.n_head)
    w.add_head_count_kv(cfg.n_head_kv)
    w.add_rope_dimension_count(cfg.head_dim)
    w.add_rope_freq_base(cfg.rope_base)
    w.add_layer_norm_rms_eps(cfg.rms_eps)
    w.add_vocab_size(cfg.n_vocab)
    w.add_file_type(gguf.LlamaFileType.MOSTLY_F16 if ftype == "f16" else gguf.LlamaFileType.ALL_F32)
    for key, val, vtype, sub in gguf_tokenizer_fields(vocab_gguf):
        w.add_key_value(key, val, vtype, sub_type=sub)
    for k, v in (extra or {}).items():
        w.add_string(k, str(v))

    def put(tname, t):
        a = t.detach().float().cpu().numpy()
        if a.ndim >= 2 and ftype == "f16":
            a = a.astype(np.float16)
        w.add_tensor(tname, np.ascontiguousarray(a))

    put("token_embd.weight", net.token_embd.weight)
    for i, b in enumerate(net.blocks):
        for n in ("attn_norm", "attn_q", "attn_k", "attn_v", "attn_output", "ffn_norm", "ffn_gate", "ffn_up", "ffn_down"):
            put(f"blk.{i}.{n}.weight", getattr(b, n).weight)
    put("output_norm.weight", net.output_norm.weight)
    if net.output is not None:
        put("output.weight", net.output.weight)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    os.replace(tmp, path)


def gguf_vocab_extend(src: str, vocab_gguf: str, dst: str) -> int:
    """dst = the model GGUF src with vocab_gguf's vocabulary, which extends src's by tokens appended at
    the end (bpe.vocab_add_fim): their embedding rows are zeros, so a model that never learned them
    (the draft) reads them as nothing and never predicts them over a token it scores above zero; every
    other tensor and key-value is copied. Returns the number of tokens added."""
    gguf = gguf_import()
    import numpy as np
    r = gguf.GGUFReader(src)
    toks_src = r.fields["tokenizer.ggml.tokens"]
    n_src = len(toks_src.data)
    fields = gguf_tokenizer_fields(vocab_gguf)
    toks = next(v for k, v, _, _ in fields if k == "tokenizer.ggml.tokens")
    if toks[:n_src] != [toks_src.contents(i) for i in range(n_src)]:
        raise ValueError(f"{vocab_gguf}: its vocabulary does not extend that of {src}")
    n_add = len(toks) - n_src
    tmp = dst + ".tmp"
    w = gguf.GGUFWriter(tmp, "llama")
    for key, f in r.fields.items():
        if key.startswith("tokenizer.") or key.startswith("GGUF.") or key == "general.architecture":
            continue
        val = f.contents()
        if key == "llama.vocab_size":
            val = len(toks)
        if f.types[0] == gguf.GGUFValueType.ARRAY:
            w.add_key_value(key, val, f.types[0], sub_type=f.types[-1])
        else:
            w.add_key_value(key, val, f.types[0])
    for key, val, vtype, sub in fields:
        w.add_key_value(key, val, vtype, sub_type=sub)
    for t in r.tensors:
        a = np.asarray(t.data)
        if t.name in ("token_embd.weight", "output.weight"):
            a = np.concatenate([a, np.zeros((n_add, a.shape[1]), a.dtype)])
        w.add_tensor(t.name, np.ascontiguousarray(a))
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    os.replace(tmp, dst)
    return n_add
