"""A byte-level BPE tokenizer trained on the corpus and stored as a vocabulary GGUF that stock llama.cpp loads.

    merges = bpe_train(texts, n_vocab=4096)               # deterministic: ties go to the smallest pair
    bpe_save_vocab_gguf("tokenizer.gguf", merges)         # tokenizer.ggml.model = "gpt2", pre = "gpt-2"

Layout of the vocabulary (ids):
    0 <|bos|>  1 <|eos|>  2 <|pad|>      control tokens; llama.cpp adds BOS (add_bos_token = true)
    3 .. 258                             the 256 bytes, in GPT-2's bytes_to_unicode spelling
    259 ..                               one token per merge, in merge order
    n_vocab .. n_vocab + 2               <|fim_prefix|> <|fim_suffix|> <|fim_middle|>: added by
                                         vocab_add_fim for the fill-in-the-middle fine-tune only, so
                                         the pre-trainings and every other id stay as they were

Pre-tokenization is llama.cpp's LLAMA_VOCAB_PRE_TYPE_GPT2 ("gpt-2"):
    's|'t|'re|'ve|'m|'ll|'d| ?\\p{L}+| ?\\p{N}+| ?[^\\s\\p{L}\\p{N}]+|\\s+(?!\\S)
The trainer approximates \\p{L} / \\p{N} with Python's re ([^\\W\\d_] / \\d): the corpus is almost all
ASCII, and the training data itself is tokenized by llama.cpp (editspec-train-tokenize), so the model
always sees exactly what llama.cpp produces; an approximation here only costs merge quality.
"""
from __future__ import annotations

import heapq
import os
import re
from collections import Counter

PRETOKENIZE = re.compile(r"""'s|'t|'re|'ve|'m|'ll|'d| ?[^\W\d_]+| ?\d+| ?(?:[^\s\w]|_)+|\s+(?!\S)|\s+""")

SPECIAL = ["<|bos|>", "<|eos|>", "<|pad|>"]
N_SPECIAL = len(SPECIAL)
# Qwen2.5-Coder's spelling, which llama.cpp also recognizes by text
FIM = ["<|fim_prefix|>", "<|fim_suffix|>", "<|fim_middle|>"]


def bytes_to_unicode() -> dict[int, str]:
    """GPT-2's reversible byte -> printable character map (what byte-level BPE GGUFs store)"""
    bs = list(range(ord("!"), ord("~") + 1)) + list(range(ord("¡"), ord("¬") + 1)) + list(range(ord("®"), ord("ÿ") + 1))
    cs = bs[:]
    n = 0
    for b in range(256):
        if b not in bs:
            bs.append(b)
            cs.append(256 + n)
            n += 1
    return dict(zip(bs, [chr(c) for c in cs]))


def bpe_train(texts, n_vocab: int = 4096, log=print) -> list[tuple[int, int]]:
    """merges as pairs of token ids (byte b has id N_SPECIAL + b; merge k makes id N_SPECIAL + 256 + k)"""
    n_merges = n_vocab - N_SPECIAL - 256
    words: Counter = Counter()
    for t in texts:
        words.update(PRETOKENIZE.findall(t))
    seqs = [[N_SPECIAL + b for b in w.encode("utf-8")] for w in words]
    freqs = [words[w] for w in words]
    pair_count: Counter = Counter()
    where: dict[tuple[int, int], set[int]] = {}
    for i, (s, f) in enumerate(zip(seqs, freqs)):
        for p in zip(s, s[1:]):
            pair_count[p] += f
            where.setdefault(p, set()).add(i)
    heap = [(-c, p) for p, c in pair_count.items()]
    heapq.heapify(heap)
    merges = []
    next_id = N_SPECIAL + 256
    while len(merges) < n_merges and heap:
        c, p = heapq.heappop(heap)
        if -c != pair_count.get(p, 0) or -c <= 0:
            continue  # stale entry
        merges.append(p)
        new = next_id
        next_id += 1
        changed: Counter = Counter()
        for i in sorted(where.pop(p, ())):
            s, f = seqs[i], freqs[i]
            out, j = [], 0
            while j < len(s):
                if j + 1 < len(s) and s[j] == p[0] and s[j + 1] == p[1]:
                    out.append(new)
                    j += 2
                else:
                    out.append(s[j])
                    j += 1
            if len(out) == len(s):
                continue
            for q in zip(s, s[1:]):
                changed[q] -= f
            for q in zip(out, out[1:]):
                changed[q] += f
                where.setdefault(q, set()).add(i)
            seqs[i] = out
        for q, d in changed.items():
            if d == 0:
                continue
            pair_count[q] += d
            if pair_count[q] > 0:
                heapq.heappush(heap, (-pair_count[q], q))
            else:
                pair_count.pop(q, None)
        pair_count.pop(p, None)
        if log and len(merges) % 1000 == 0:
            log(f"bpe: {len(merges)}/{n_merges} merges, last count {-c}")
    return merges


def bpe_token_strings(merges: list[tuple[int, int]]) -> list[str]:
    b2u = bytes_to_unicode()
    toks = SPECIAL + [b2u[b] for b in range(256)]
    for a, b in merges:
        toks.append(toks[a] + toks[b])
    return toks


def bpe_save_vocab_gguf(path: str, merges: list[tuple[int, int]], n_ctx: int = 512):
    """a vocabulary-only GGUF (llama hparams are placeholders, no tensors), like llama.cpp's ggml-vocab-*.gguf"""
    from model import gguf_import
    gguf = gguf_import()
    toks = bpe_token_strings(merges)
    types = [gguf.TokenType.CONTROL] * N_SPECIAL + [gguf.TokenType.NORMAL] * (len(toks) - N_SPECIAL)
    tmp = path + ".tmp"
    w = gguf.GGUFWriter(tmp, "llama")
    w.add_name("editspec-bpe")
    w.add_context_length(n_ctx)
    w.add_embedding_length(64)
    w.add_block_count(1)
    w.add_feed_forward_length(128)
    w.add_head_count(1)
    w.add_head_count_kv(1)
    w.add_layer_norm_rms_eps(1e-5)
    w.add_vocab_size(len(toks))
    w.add_tokenizer_model("gpt2")
    w.add_tokenizer_pre("gpt-2")
    w.add_token_list(toks)
    w.add_token_types(types)
    w.add_token_merges([toks[a] + " " + toks[b] for a, b in merges])
    w.add_bos_token_id(0)
    w.add_eos_token_id(1)
    w.add_pad_token_id(2)
    w.add_add_bos_token(True)
    w.add_add_eos_token(False)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    os.replace(tmp, path)


def vocab_add_fim(src: str, dst: str) -> dict:
    """dst = the vocabulary GGUF src with the three FIM tokens appended as control tokens and named by
    tokenizer.ggml.fim_{pre,suf,mid}_token_id; a vocabulary that names FIM tokens already (DeepSeek-
    Coder's) is copied unchanged. Returns {"pre", "suf", "mid", "n_vocab"}."""
    from model import gguf_import, gguf_tokenizer_fields
    gguf = gguf_import()
    fields = gguf_tokenizer_fields(src)
    kv = {k: v for k, v, _, _ in fields}
    toks = list(kv["tokenizer.ggml.tokens"])
    keys = ("tokenizer.ggml.fim_pre_token_id", "tokenizer.ggml.fim_suf_token_id", "tokenizer.ggml.fim_mid_token_id")
    if all(k in kv for k in keys):
        ids = [int(kv[k]) for k in keys]
        fields_out = fields
    else:
        if any(t in toks for t in FIM):
            raise ValueError(f"{src}: has a FIM token's text but not the FIM token ids")
        ids = [len(toks) + i for i in range(len(FIM))]
        fields_out = []
        for k, v, vt, sub in fields:
            if k == "tokenizer.ggml.tokens":
                v = toks + FIM
            elif k == "tokenizer.ggml.token_type":
                v = list(v) + [int(gguf.TokenType.CONTROL)] * len(FIM)
            elif k == "tokenizer.ggml.scores":
                v = list(v) + [0.0] * len(FIM)
            fields_out.append((k, v, vt, sub))
        for k, i in zip(keys, ids):
            fields_out.append((k, i, gguf.GGUFValueType.UINT32, None))
    tmp = dst + ".tmp"
    w = gguf.GGUFWriter(tmp, "llama")
    w.add_name("editspec-bpe-fim")
    r = gguf.GGUFReader(src)
    for key, f in r.fields.items():   # the placeholder hparams of a vocabulary GGUF
        if key.startswith("llama."):
            n = len(fields_out[[k for k, *_ in fields_out].index("tokenizer.ggml.tokens")][1])
            w.add_key_value(key, n if key == "llama.vocab_size" else f.contents(), f.types[0])
    for k, v, vt, sub in fields_out:
        w.add_key_value(k, v, vt, sub_type=sub)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    os.replace(tmp, dst)
    return {"pre": ids[0], "suf": ids[1], "mid": ids[2], "n_vocab": len(toks) + (0 if fields_out is fields else len(FIM))}
