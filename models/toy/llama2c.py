"""Independent (numpy-only, no torch, no sentencepiece) readers for llama2.c's
tokenizer.bin and model .bin formats, a reference of llama2.c's encode/decode,
and a float32 forward pass written after llama2.c's run.c.  Used by check.py
to verify the exported files exactly as an inference engine sees them.
"""
import re
import struct

import numpy as np

BOS, EOS = 1, 2
V1_MAGIC = 0x616B3432  # "ak42"


# ---------------------------------------------------------------------------
# Tokenizer

class Tokenizer:
    def __init__(self, path):
        with open(path, "rb") as f:
            data = f.read()
        (self.max_token_length,) = struct.unpack_from("<i", data, 0)
        off, self.vocab, self.scores = 4, [], []
        while off < len(data):
            score, n = struct.unpack_from("<fi", data, off)
            off += 8
            self.vocab.append(data[off:off + n])
            self.scores.append(score)
            off += n
        self.index = {}
        for i, piece in enumerate(self.vocab):  # first id wins, as bsearch on unique pieces
            self.index.setdefault(piece, i)

    def encode(self, text, bos=True, eos=False):
        """llama2.c run.c encode(): BOS, dummy prefix " ", codepoints with
        byte fallback (id = byte + 3), then repeatedly merge the adjacent pair
        whose concatenation is in the vocab with the highest score (leftmost on
        ties)."""
        tokens = [BOS] if bos else []
        if text:
            tokens.append(self.index[b" "])
        for ch in text:
            b = ch.encode("utf-8")
            if b in self.index:
                tokens.append(self.index[b])
            else:
                tokens.extend(byte + 3 for byte in b)
        while True:
            best_score, best_id, best_idx = -1e10, -1, -1
            for i in range(len(tokens) - 1):
                j = self.index.get(self.vocab[tokens[i]] + self.vocab[tokens[i + 1]])
                if j is not None and self.scores[j] > best_score:
                    best_score, best_id, best_idx = self.scores[j], j, i
            if best_idx == -1:
                break
            tokens[best_idx:best_idx + 2] = [best_id]
        if eos:
            tokens.append(EOS)
        return tokens

    def piece(self, prev, token):
        """llama2.c decode(): strip the leading space after BOS, turn <0xXX>
        into the raw byte."""
        p = self.vocab[token]
        if prev == BOS and p.startswith(b" "):
            p = p[1:]
        m = re.fullmatch(rb"<0x([0-9A-F]{2})>", p)
        return bytes([int(m.group(1), 16)]) if m else p

    def decode(self, tokens):
        out, prev = b"", BOS
        for t in tokens:
            out += self.piece(prev, t)
            prev = t
        return out.decode("utf-8", errors="replace")


# ---------------------------------------------------------------------------
# Model

CONFIG_KEYS = ("dim", "hidden_dim", "n_layers", "n_heads", "n_kv_heads",
               "vocab_size", "seq_len")


def read_model(path):
    """Read a llama2.c checkpoint, version 1 ("ak42") or legacy.  Returns
    (config dict, weights dict of float32 numpy arrays, format name)."""
    with open(path, "rb") as f:
        data = f.read()
    (magic,) = struct.unpack_from("<I", data, 0)
    if magic == V1_MAGIC:
        (version,) = struct.unpack_from("<i", data, 4)
        assert version == 1, version
        cfg = dict(zip(CONFIG_KEYS, struct.unpack_from("<7i", data, 8)))
        shared = data[36] == 1
        off, fmt = 256, "v1"
    else:
        cfg = dict(zip(CONFIG_KEYS, struct.unpack_from("<7i", data, 0)))
        shared = cfg["vocab_size"] > 0
        cfg["vocab_size"] = abs(cfg["vocab_size"])
        off, fmt = 28, "legacy"
    cfg["shared_classifier"] = shared
    d, hd, L = cfg["dim"], cfg["hidden_dim"], cfg["n_layers"]
    hs = d // cfg["n_heads"]
    kv = cfg["n_kv_heads"] * hs
    V, S = cfg["vocab_size"], cfg["seq_len"]
    w = {}
    pos = off

    def take(name, shape):
        nonlocal pos
        n = int(np.prod(shape))
        w[name] = np.frombuffer(data, dtype="<f4", count=n, offset=pos).reshape(shape)
        pos += 4 * n

    if fmt == "v1":
        for name, shape in [("rms_att", (L, d)), ("rms_ffn", (L, d)), ("rms_final", (d,)),
                            ("tok_emb", (V, d)), ("wq", (L, d, d)), ("wk", (L, kv, d)),
                            ("wv", (L, kv, d)), ("wo", (L, d, d)), ("w1", (L, hd, d)),
                            ("w2", (L, d, hd)), ("w3", (L, hd, d))]:
            take(name, shape)
    else:
        for name, shape in [("tok_emb", (V, d)), ("rms_att", (L, d)), ("wq", (L, d, d)),
                            ("wk", (L, kv, d)), ("wv", (L, kv, d)), ("wo", (L, d, d)),
                            ("rms_ffn", (L, d)), ("w1", (L, hd, d)), ("w2", (L, d, hd)),
                            ("w3", (L, hd, d)), ("rms_final", (d,)),
                            ("freq_cis_real", (S, hs // 2)), ("freq_cis_imag", (S, hs // 2))]:
            take(name, shape)
    if shared:
        w["wcls"] = w["tok_emb"]
    else:
        take("wcls", (V, d))
    assert pos == len(data), f"{path}: {len(data) - pos} trailing bytes"
    return cfg, w, fmt


def rmsnorm(x, weight):
    ss = np.float32(np.mean(x * x, dtype=np.float32)) + np.float32(1e-5)
    return (x * np.float32(1.0 / np.sqrt(ss))) * weight


class Model:
    """float32 forward, one token at a time with a KV cache, as run.c."""

    def __init__(self, path):
        self.cfg, self.w, self.format = read_model(path)
        c = self.cfg
        self.hs = c["dim"] // c["n_heads"]
        self.kv_dim = c["n_kv_heads"] * self.hs
        self.kv_mul = c["n_heads"] // c["n_kv_heads"]
        shape = (c["n_layers"], c["seq_len"], self.kv_dim)
        self.key_cache = np.zeros(shape, np.float32)
        self.value_cache = np.zeros(shape, np.float32)
        # RoPE: pair (2i, 2i+1) of each head rotated by pos / 10000^(2i/head_size)
        head_dim = (np.arange(0, c["dim"], 2) % self.hs).astype(np.float32)
        self.freq = (np.float32(1.0) / np.power(np.float32(10000.0), head_dim / np.float32(self.hs))).astype(np.float32)

    def rope(self, v, pos):
        val = np.float32(pos) * self.freq[: v.size // 2]
        fcr, fci = np.cos(val).astype(np.float32), np.sin(val).astype(np.float32)
        v0, v1 = v[0::2].copy(), v[1::2].copy()
        out = np.empty_like(v)
        out[0::2] = v0 * fcr - v1 * fci
        out[1::2] = v0 * fci + v1 * fcr
        return out

    def forward(self, token, pos):
        c, w, hs = self.cfg, self.w, self.hs
        x = w["tok_emb"][token].astype(np.float32).copy()
        for l in range(c["n_layers"]):
            xb = rmsnorm(x, w["rms_att"][l])
            q = self.rope(w["wq"][l] @ xb, pos)
            k = self.rope(w["wk"][l] @ xb, pos)
            v = w["wv"][l] @ xb
            self.key_cache[l, pos] = k
            self.value_cache[l, pos] = v
            out = np.empty(c["dim"], np.float32)
            for h in range(c["n_heads"]):
                kh = (h // self.kv_mul) * hs
                keys = self.key_cache[l, : pos + 1, kh:kh + hs]
                att = keys @ q[h * hs:(h + 1) * hs] / np.float32(np.sqrt(hs))
                att = np.exp(att - att.max())
                att /= att.sum()
                out[h * hs:(h + 1) * hs] = att @ self.value_cache[l, : pos + 1, kh:kh + hs]
            x = x + w["wo"][l] @ out
            xb = rmsnorm(x, w["rms_ffn"][l])
            h1, h3 = w["w1"][l] @ xb, w["w3"][l] @ xb
            x = x + w["w2"][l] @ ((h1 / (np.float32(1.0) + np.exp(-h1))) * h3)
        x = rmsnorm(x, w["rms_final"])
        return (w["wcls"] @ x).astype(np.float32)

    def logits_for(self, tokens):
        """Feed tokens from position 0; return the logits after each."""
        return [self.forward(t, p) for p, t in enumerate(tokens)]


def softmax(z, temperature=1.0):
    z = z.astype(np.float64) / temperature
    e = np.exp(z - z.max())
    return e / e.sum()
