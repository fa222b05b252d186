#!/usr/bin/python3
"""Train the toy llama-architecture model on the toy-world corpus (PyTorch, CPU)
and export it in llama2.c's formats.

    train.py CORPUS SPM_MODEL OUT_V1_BIN [--legacy OUT_LEGACY_BIN] [options]

The model is llama2.c's model.py, trimmed to what the toy needs: token
embedding; per layer RMSNorm(eps 1e-5) -> attention with RoPE (theta 10000,
interleaved pairs (2i, 2i+1) of each head) and grouped-query attention ->
residual -> RMSNorm -> SwiGLU FFN w2(silu(w1 x) * w3 x) -> residual; final
RMSNorm; classifier tied to the embedding.  No biases.

Every document is [BOS] + sp.encode(text) + [EOS] (a conversation's text with
its real line breaks, which encode as the byte token <0x0A>, as glassbox's
encoder does); the documents are
concatenated in corpus order and each training row is the seq_len+1 tokens
starting at a randomly chosen document start (so BOS sits at position 0 of
every row, and later documents in the row see earlier ones as context).
"""
import argparse
import math
import struct
import time

import numpy as np
import sentencepiece as spm
import torch
import torch.nn as nn
import torch.nn.functional as F

import grammar


class RMSNorm(nn.Module):
    def __init__(self, dim, eps=1e-5):
        super().__init__()
        self.eps = eps
        self.weight = nn.Parameter(torch.ones(dim))

    def forward(self, x):
        return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + self.eps) * self.weight


def precompute_freqs_cis(head_size, end, theta=10000.0):
    freqs = 1.0 / (theta ** (torch.arange(0, head_size, 2)[: head_size // 2].float() / head_size))
    t = torch.arange(end, device=freqs.device)
    freqs = torch.outer(t, freqs).float()
    return torch.cos(freqs), torch.sin(freqs)  # (end, head_size/2) each


def apply_rotary_emb(x, cos, sin):
    # x: (B, T, H, head_size); rotate the pairs (x[..., 2i], x[..., 2i+1]).
    xr, xi = x.float().reshape(x.shape[:-1] + (-1, 2)).unbind(-1)
    cos = cos.view(1, cos.shape[0], 1, cos.shape[1])
    sin = sin.view(1, sin.shape[0], 1, sin.shape[1])
    out_r = xr * cos - xi * sin
    out_i = xr * sin + xi * cos
    return torch.stack([out_r, out_i], dim=-1).flatten(3).type_as(x)


def repeat_kv(x, n_rep):
    # (B, T, n_kv, hs) -> (B, T, n_kv * n_rep, hs); query head h uses kv head h // n_rep.
    if n_rep == 1:
        return x
    b, t, n_kv, hs = x.shape
    return x[:, :, :, None, :].expand(b, t, n_kv, n_rep, hs).reshape(b, t, n_kv * n_rep, hs)


class Attention(nn.Module):
    def __init__(self, a):
        super().__init__()
        self.n_heads, self.n_kv_heads = a.n_heads, a.n_kv_heads
        self.head_size = a.dim // a.n_heads
        self.wq = nn.Linear(a.dim, a.n_heads * self.head_size, bias=False)
        self.wk = nn.Linear(a.dim, a.n_kv_heads * self.head_size, bias=False)
        self.wv = nn.Linear(a.dim, a.n_kv_heads * self.head_size, bias=False)
        self.wo = nn.Linear(a.n_heads * self.head_size, a.dim, bias=False)

    def forward(self, x, cos, sin):
        b, t, _ = x.shape
        q = self.wq(x).view(b, t, self.n_heads, self.head_size)
        k = self.wk(x).view(b, t, self.n_kv_heads, self.head_size)
        v = self.wv(x).view(b, t, self.n_kv_heads, self.head_size)
        q, k = apply_rotary_emb(q, cos, sin), apply_rotary_emb(k, cos, sin)
        rep = self.n_heads // self.n_kv_heads
        k, v = repeat_kv(k, rep), repeat_kv(v, rep)
        q, k, v = q.transpose(1, 2), k.transpose(1, 2), v.transpose(1, 2)
        att = (q @ k.transpose(2, 3)) / math.sqrt(self.head_size)
        mask = torch.full((t, t), float("-inf")).triu(1)
        att = F.softmax(att + mask, dim=-1)
        y = (att @ v).transpose(1, 2).contiguous().view(b, t, -1)
        return self.wo(y)


class FeedForward(nn.Module):
    def __init__(self, dim, hidden_dim):
        super().__init__()
        self.w1 = nn.Linear(dim, hidden_dim, bias=False)
        self.w2 = nn.Linear(hidden_dim, dim, bias=False)
        self.w3 = nn.Linear(dim, hidden_dim, bias=False)

    def forward(self, x):
        return self.w2(F.silu(self.w1(x)) * self.w3(x))


class Block(nn.Module):
    def __init__(self, a):
        super().__init__()
        self.attention = Attention(a)
        self.feed_forward = FeedForward(a.dim, a.hidden_dim)
        self.attention_norm = RMSNorm(a.dim)
        self.ffn_norm = RMSNorm(a.dim)

    def forward(self, x, cos, sin):
        h = x + self.attention(self.attention_norm(x), cos, sin)
        return h + self.feed_forward(self.ffn_norm(h))


class Transformer(nn.Module):
    def __init__(self, a):
        super().__init__()
        self.a = a
        self.tok_embeddings = nn.Embedding(a.vocab_size, a.dim)
        self.layers = nn.ModuleList([Block(a) for _ in range(a.n_layers)])
        self.norm = RMSNorm(a.dim)
        self.output = nn.Linear(a.dim, a.vocab_size, bias=False)
        self.output.weight = self.tok_embeddings.weight  # tied classifier
        cos, sin = precompute_freqs_cis(a.dim // a.n_heads, a.seq_len)
        self.register_buffer("freqs_cos", cos, persistent=False)
        self.register_buffer("freqs_sin", sin, persistent=False)
        # llama2.c's init: N(0, 0.02), residual projections scaled down.
        for m in self.modules():
            if isinstance(m, (nn.Linear, nn.Embedding)):
                nn.init.normal_(m.weight, mean=0.0, std=0.02)
        for n, p in self.named_parameters():
            if n.endswith("w3.weight") or n.endswith("wo.weight"):
                nn.init.normal_(p, mean=0.0, std=0.02 / math.sqrt(2 * a.n_layers))

    def forward(self, tokens):
        t = tokens.shape[1]
        h = self.tok_embeddings(tokens)
        cos, sin = self.freqs_cos[:t], self.freqs_sin[:t]
        for layer in self.layers:
            h = layer(h, cos, sin)
        return self.output(self.norm(h))


# ---------------------------------------------------------------------------
# Export (llama2.c export.py: version1_export and legacy_export).

def serialize_fp32(f, t):
    f.write(t.detach().cpu().view(-1).to(torch.float32).numpy().astype("<f4").tobytes())


def export_v1(model, path):
    a = model.a
    with open(path, "wb") as f:
        f.write(struct.pack("<I", 0x616B3432))
        f.write(struct.pack("<i", 1))
        f.write(struct.pack("<7i", a.dim, a.hidden_dim, a.n_layers, a.n_heads,
                            a.n_kv_heads, a.vocab_size, a.seq_len))
        shared = torch.equal(model.tok_embeddings.weight, model.output.weight)
        f.write(struct.pack("B", int(shared)))
        f.write(b"\0" * (256 - f.tell()))
        L = model.layers
        weights = [*[l.attention_norm.weight for l in L], *[l.ffn_norm.weight for l in L],
                   model.norm.weight, model.tok_embeddings.weight,
                   *[l.attention.wq.weight for l in L], *[l.attention.wk.weight for l in L],
                   *[l.attention.wv.weight for l in L], *[l.attention.wo.weight for l in L],
                   *[l.feed_forward.w1.weight for l in L], *[l.feed_forward.w2.weight for l in L],
                   *[l.feed_forward.w3.weight for l in L]]
        for w in weights:
            serialize_fp32(f, w)
        if not shared:
            serialize_fp32(f, model.output.weight)


def export_legacy(model, path):
    a = model.a
    shared = torch.equal(model.tok_embeddings.weight, model.output.weight)
    with open(path, "wb") as f:
        f.write(struct.pack("<7i", a.dim, a.hidden_dim, a.n_layers, a.n_heads, a.n_kv_heads,
                            a.vocab_size if shared else -a.vocab_size, a.seq_len))
        serialize_fp32(f, model.tok_embeddings.weight)
        L = model.layers
        for l in L:
            serialize_fp32(f, l.attention_norm.weight)
        for name in ("wq", "wk", "wv", "wo"):
            for l in L:
                serialize_fp32(f, getattr(l.attention, name).weight)
        for l in L:
            serialize_fp32(f, l.ffn_norm.weight)
        for name in ("w1", "w2", "w3"):
            for l in L:
                serialize_fp32(f, getattr(l.feed_forward, name).weight)
        serialize_fp32(f, model.norm.weight)
        serialize_fp32(f, model.freqs_cos[: a.seq_len])
        serialize_fp32(f, model.freqs_sin[: a.seq_len])
        if not shared:
            serialize_fp32(f, model.output.weight)


# ---------------------------------------------------------------------------

def load_stream(corpus, sp_model):
    sp = spm.SentencePieceProcessor(model_file=sp_model)
    docs = grammar.read_corpus(corpus)  # conversations get their line breaks back
    ids = sp.encode(docs)
    starts, stream = [], []
    for d in ids:
        starts.append(len(stream))
        stream.extend([sp.bos_id()] + d + [sp.eos_id()])
    return sp, np.array(stream, dtype=np.int64), np.array(starts, dtype=np.int64)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("corpus")
    ap.add_argument("sp_model")
    ap.add_argument("out")
    ap.add_argument("--legacy", help="also write the legacy llama2.c format here")
    ap.add_argument("--dim", type=int, default=64)
    ap.add_argument("--hidden_dim", type=int, default=176)
    ap.add_argument("--n_layers", type=int, default=4)
    ap.add_argument("--n_heads", type=int, default=4)
    ap.add_argument("--n_kv_heads", type=int, default=2)
    ap.add_argument("--seq_len", type=int, default=128)
    ap.add_argument("--batch", type=int, default=32)
    ap.add_argument("--steps", type=int, default=800)
    ap.add_argument("--lr", type=float, default=3e-3)
    ap.add_argument("--min_lr", type=float, default=3e-5)
    ap.add_argument("--warmup", type=int, default=100)
    ap.add_argument("--weight_decay", type=float, default=0.1)
    ap.add_argument("--grad_clip", type=float, default=1.0)
    ap.add_argument("--seed", type=int, default=1337)
    # One intra-op thread: on the 2-core reference VM two threads were no faster
    # for these small matrices, and much slower whenever the cores were shared
    # (OpenMP threads spin-waiting on each other).  It also keeps the result
    # independent of the machine's core count.
    ap.add_argument("--threads", type=int, default=1)
    a = ap.parse_args()

    torch.manual_seed(a.seed)
    torch.set_num_threads(a.threads)
    sp, stream, starts = load_stream(a.corpus, a.sp_model)
    a.vocab_size = sp.get_piece_size()
    usable = starts[starts + a.seq_len + 1 <= len(stream)]
    print(f"train: {len(starts)} documents, {len(stream)} tokens; "
          f"{a.steps} steps x {a.batch} x {a.seq_len} = "
          f"{a.steps * a.batch * a.seq_len / len(stream):.1f} epochs")

    model = Transformer(a)
    n_params = sum(p.numel() for p in model.parameters())
    print(f"model: dim {a.dim} hidden {a.hidden_dim} layers {a.n_layers} heads {a.n_heads} "
          f"kv_heads {a.n_kv_heads} vocab {a.vocab_size} seq_len {a.seq_len}: {n_params} parameters")
    decay = [p for p in model.parameters() if p.dim() >= 2]
    no_decay = [p for p in model.parameters() if p.dim() < 2]
    opt = torch.optim.AdamW([{"params": decay, "weight_decay": a.weight_decay},
                             {"params": no_decay, "weight_decay": 0.0}],
                            lr=a.lr, betas=(0.9, 0.95))

    def lr_at(step):  # linear warmup, cosine decay to min_lr
        if step < a.warmup:
            return a.lr * (step + 1) / a.warmup
        r = (step - a.warmup) / max(1, a.steps - a.warmup)
        return a.min_lr + 0.5 * (1 + math.cos(math.pi * r)) * (a.lr - a.min_lr)

    gen = torch.Generator().manual_seed(a.seed)
    stream_t = torch.from_numpy(stream)
    offs = torch.arange(a.seq_len + 1)
    t0 = time.time()
    model.train()
    for step in range(a.steps):
        pick = torch.from_numpy(usable)[torch.randint(len(usable), (a.batch,), generator=gen)]
        rows = stream_t[pick[:, None] + offs[None, :]]
        x, y = rows[:, :-1], rows[:, 1:]
        for g in opt.param_groups:
            g["lr"] = lr_at(step)
        logits = model(x)
        loss = F.cross_entropy(logits.reshape(-1, logits.shape[-1]), y.reshape(-1))
        opt.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), a.grad_clip)
        opt.step()
        if step % 100 == 0 or step == a.steps - 1:
            print(f"  step {step:5d} loss {loss.item():.4f} lr {lr_at(step):.2e} "
                  f"{time.time() - t0:6.1f}s", flush=True)
    print(f"train: {a.steps} steps in {time.time() - t0:.1f}s")

    model.eval()
    export_v1(model, a.out)
    print(f"export: v1 (ak42) -> {a.out}")
    if a.legacy:
        export_legacy(model, a.legacy)
        print(f"export: legacy -> {a.legacy}")


if __name__ == "__main__":
    main()
