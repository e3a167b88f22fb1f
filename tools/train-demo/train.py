#!/usr/bin/env python3
"""train.py: trains Strata's demo model, a small qwen35moe, and writes it as a Q8_0 GGUF.

The model computes what llama.cpp computes from the GGUF this script writes (MODELS.md §2, §5.4):
- RMSNorm weights are the multiplier itself (the file's "+1 already folded" form), ε = 1e-6;
- Gated DeltaNet layers: qkv projection -> causal depthwise conv1d (kernel 4, no bias) -> silu;
  q, k L2-normalised (x / sqrt(Σx² + ε)); β = sigmoid(b); γ = softplus(a + dt_bias)·ssm_a with
  ssm_a = -exp(A_log); the delta rule S ← e^γ S, δ = β(v - Sᵀk), S += kδᵀ, o = Sᵀq / sqrt(dk);
  v-head h reads k-head h mod n_k (the tiled order of GGUF files, trained directly in that order);
  gated RMSNorm (plain weight) times silu(z); output projection;
- every 4th layer gated full attention: q and its gate interleaved per head in attn_q, per-head
  q/k RMSNorm, NeoX RoPE over the first n_rot dims (IMRoPE equals it for text), GQA grouped,
  scale 1/sqrt(hd), output times sigmoid(gate);
- MoE: softmax over all experts, top-k, renormalised, SwiGLU experts; a shared SwiGLU expert
  scaled by sigmoid(ffn_gate_inp_shexp · h); tied output head.
Training uses the chunked (WY) form of the delta rule; --smoke checks it against the sequential
recurrence. bf16 autocast for the matrix products; the recurrence and norms in f32.

  python3 train.py --corpus .corpus --out OUT [--steps N] [--time-budget S]   # the real run
  python3 train.py --corpus .corpus --out OUT --smoke                         # seconds
"""
import argparse
import gzip
import json
import math
import os
import sys
import time
from dataclasses import dataclass, field

import torch
import torch.nn as nn
import torch.nn.functional as F

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import export_gguf  # noqa: E402

SPECIALS = ["<|endoftext|>", "<|im_start|>", "<|im_end|>"]
ADDED = ["<think>", "</think>"]
QWEN2_PRETOKENIZE = (r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*"
                     r"|\s*[\r\n]+|\s+(?!\S)|\s+")


@dataclass
class Config:
    vocab: int = 8192
    d: int = 512
    n_layer: int = 8
    full_attn_interval: int = 4
    n_head: int = 8
    n_head_kv: int = 2
    head_dim: int = 64
    n_rot: int = 16
    rope_sections: list = field(default_factory=lambda: [3, 3, 2, 0])
    rope_base: float = 10000.0
    n_k: int = 4
    n_v: int = 8
    dk: int = 64
    conv_kernel: int = 4
    n_expert: int = 8
    n_expert_used: int = 2
    n_ff_exp: int = 192
    n_ff_shexp: int = 512
    eps: float = 1e-6
    context_length: int = 4096

    def is_full_attn(self, i):
        return (i + 1) % self.full_attn_interval == 0


def smoke_config(vocab):
    return Config(vocab=vocab, d=64, n_layer=4, n_head=4, n_head_kv=2, head_dim=16, n_rot=8,
                  rope_sections=[2, 1, 1, 0], n_k=2, n_v=4, dk=16, n_expert=4, n_ff_exp=32, n_ff_shexp=64)


# ----------------------------------------------------------------------------- model
class RMSNorm(nn.Module):
    """weight · x / sqrt(mean(x²) + ε), computed in f32; the weight is stored as is in the GGUF."""

    def __init__(self, n, eps):
        super().__init__()
        self.weight = nn.Parameter(torch.ones(n))
        self.eps = eps

    def forward(self, x):
        xf = x.float()
        return xf * torch.rsqrt(xf.pow(2).mean(-1, keepdim=True) + self.eps) * self.weight


def l2norm(x, eps):
    return x * torch.rsqrt(x.pow(2).sum(-1, keepdim=True) + eps)


def rope_neox(x, cos, sin, n_rot):
    """x [B, T, H, hd]; rotates pairs (i, i + n_rot/2), i < n_rot/2; the rest passes through."""
    half = n_rot // 2
    x1, x2, rest = x[..., :half], x[..., half:n_rot], x[..., n_rot:]
    c, s = cos[None, :, None, :], sin[None, :, None, :]
    return torch.cat([x1 * c - x2 * s, x1 * s + x2 * c, rest], dim=-1)


def causal_attention(q, k, v):
    """softmax(q k^T / sqrt(hd)) v over earlier positions: torch's fused kernel where it has one
    (2.0 and later), else written out (Debian's torch 1.13, which train_mtp.py runs on)."""
    if hasattr(F, "scaled_dot_product_attention"):
        return F.scaled_dot_product_attention(q, k, v, is_causal=True)
    T = q.shape[-2]
    s = (q @ k.transpose(-1, -2)) / math.sqrt(q.shape[-1])
    s = s.masked_fill(torch.ones(T, T, dtype=torch.bool, device=q.device).triu(1), float("-inf"))
    return torch.softmax(s.float(), -1).to(v.dtype) @ v


class GatedAttention(nn.Module):
    def __init__(self, c: Config):
        super().__init__()
        self.c = c
        self.wq = nn.Linear(c.d, 2 * c.n_head * c.head_dim, bias=False)
        self.wk = nn.Linear(c.d, c.n_head_kv * c.head_dim, bias=False)
        self.wv = nn.Linear(c.d, c.n_head_kv * c.head_dim, bias=False)
        self.wo = nn.Linear(c.n_head * c.head_dim, c.d, bias=False)
        self.q_norm = RMSNorm(c.head_dim, c.eps)
        self.k_norm = RMSNorm(c.head_dim, c.eps)

    def forward(self, h, cos, sin):
        c = self.c
        B, T, _ = h.shape
        qg = self.wq(h).view(B, T, c.n_head, 2 * c.head_dim)  # per head: [q | gate]
        q, gate = qg[..., :c.head_dim], qg[..., c.head_dim:]
        k = self.wk(h).view(B, T, c.n_head_kv, c.head_dim)
        v = self.wv(h).view(B, T, c.n_head_kv, c.head_dim)
        q = rope_neox(self.q_norm(q), cos, sin, c.n_rot)
        k = rope_neox(self.k_norm(k), cos, sin, c.n_rot)
        dt = v.dtype
        rep = c.n_head // c.n_head_kv
        q = q.to(dt).transpose(1, 2)
        k = k.to(dt).transpose(1, 2).repeat_interleave(rep, dim=1)  # q head j uses kv head j // rep
        v = v.transpose(1, 2).repeat_interleave(rep, dim=1)
        o = causal_attention(q, k, v)  # scale 1/sqrt(hd)
        o = o.transpose(1, 2).reshape(B, T, c.n_head * c.head_dim)
        o = o * torch.sigmoid(gate.reshape(B, T, -1).float()).to(o.dtype)
        return self.wo(o)


def gdn_sequential(q, k, v, beta, g):
    """The recurrence exactly as llama.cpp runs it. q, k [B, T, H, dk], v [B, T, H, dv],
    beta, g [B, T, H]. Returns o [B, T, H, dv]."""
    B, T, H, dk = k.shape
    S = q.new_zeros(B, H, dk, v.shape[-1])
    out = []
    for t in range(T):
        S = S * g[:, t].exp()[..., None, None]
        kt = k[:, t]
        delta = beta[:, t, :, None] * (v[:, t] - torch.einsum("bhij,bhi->bhj", S, kt))
        S = S + kt[..., :, None] * delta[..., None, :]
        out.append(torch.einsum("bhij,bhi->bhj", S, q[:, t]) / math.sqrt(dk))
    return torch.stack(out, 1)


def gdn_chunked(q, k, v, beta, g, L=64):
    """The same, in chunks of L (MODELS.md §2.10 "prefill form"): within a chunk the deltas solve
    (I + A) Δ = βV - (β e^G K) S0 with A[i][j] = β_i (k_i·k_j) e^{G_i - G_j} (j < i)."""
    B, T, H, dk = k.shape
    dv = v.shape[-1]
    pad = (-T) % L
    q, k, v = [F.pad(x.transpose(1, 2), (0, 0, 0, pad)) for x in (q, k, v)]
    beta, g = [F.pad(x.transpose(1, 2), (0, pad)) for x in (beta, g)]
    N = (T + pad) // L
    q = q.reshape(B, H, N, L, dk)
    k = k.reshape(B, H, N, L, dk)
    v = v.reshape(B, H, N, L, dv)
    beta = beta.reshape(B, H, N, L)
    G = g.reshape(B, H, N, L).cumsum(-1)
    incl = torch.ones(L, L, dtype=torch.bool, device=q.device).tril()
    strict = incl.clone().fill_diagonal_(False)
    decay = (G[..., :, None] - G[..., None, :]).masked_fill(~incl, float("-inf")).exp()
    A = (beta[..., None] * (k @ k.transpose(-1, -2)) * decay).masked_fill(~strict, 0.0)
    eye = torch.eye(L, dtype=q.dtype, device=q.device)
    rhs = torch.cat([v * beta[..., None], k * (beta * G.exp())[..., None]], dim=-1)
    UW = torch.linalg.solve_triangular(A + eye, rhs, upper=False, unitriangular=True)
    U, W = UW[..., :dv], UW[..., dv:]
    qk = (q @ k.transpose(-1, -2)) * decay
    eG = G.exp()
    S = q.new_zeros(B, H, dk, dv)
    outs = []
    for n in range(N):
        Vn = U[:, :, n] - W[:, :, n] @ S
        outs.append((q[:, :, n] * eG[:, :, n, :, None]) @ S + qk[:, :, n] @ Vn)
        gl = G[:, :, n, -1]
        kd = k[:, :, n] * (gl[..., None] - G[:, :, n]).exp()[..., None]
        S = S * gl.exp()[..., None, None] + kd.transpose(-1, -2) @ Vn
    o = torch.stack(outs, 2).reshape(B, H, N * L, dv)[:, :, :T]
    return o.transpose(1, 2) / math.sqrt(dk)


class GatedDeltaNet(nn.Module):
    def __init__(self, c: Config):
        super().__init__()
        self.c = c
        self.key_dim, self.value_dim = c.n_k * c.dk, c.n_v * c.dk
        C = 2 * self.key_dim + self.value_dim
        self.in_qkv = nn.Linear(c.d, C, bias=False)
        self.in_z = nn.Linear(c.d, self.value_dim, bias=False)
        self.in_b = nn.Linear(c.d, c.n_v, bias=False)
        self.in_a = nn.Linear(c.d, c.n_v, bias=False)
        self.conv_w = nn.Parameter(torch.empty(C, c.conv_kernel).uniform_(-1, 1) / math.sqrt(c.conv_kernel))
        dt = torch.exp(torch.empty(c.n_v).uniform_(math.log(1e-3), math.log(1e-1)))
        self.dt_bias = nn.Parameter(dt + torch.log(-torch.expm1(-dt)))  # softplus(dt_bias) = dt
        self.A_log = nn.Parameter(torch.log(torch.empty(c.n_v).uniform_(1, 16)))
        self.norm = RMSNorm(c.dk, c.eps)
        self.out = nn.Linear(self.value_dim, c.d, bias=False)
        self.chunked = True

    def forward(self, h):
        c = self.c
        B, T, _ = h.shape
        m = self.in_qkv(h)
        z = self.in_z(h)
        b = self.in_b(h)
        a = self.in_a(h)
        K = c.conv_kernel
        # causal depthwise conv: w[ch][K-1] multiplies the current token
        conv = F.conv1d(F.pad(m.transpose(1, 2), (K - 1, 0)), self.conv_w.unsqueeze(1).to(m.dtype), groups=m.shape[-1])
        u = F.silu(conv.float()).transpose(1, 2)
        with torch.autocast(device_type=h.device.type, enabled=False):
            kd = self.key_dim
            q = l2norm(u[..., :kd].reshape(B, T, c.n_k, c.dk), c.eps)
            k = l2norm(u[..., kd:2 * kd].reshape(B, T, c.n_k, c.dk), c.eps)
            v = u[..., 2 * kd:].reshape(B, T, c.n_v, c.dk)
            r = c.n_v // c.n_k
            q, k = q.repeat(1, 1, r, 1), k.repeat(1, 1, r, 1)  # tiled: v-head h reads k-head h % n_k
            beta = torch.sigmoid(b.float())
            g = F.softplus(a.float() + self.dt_bias) * -torch.exp(self.A_log)
            o = (gdn_chunked if self.chunked else gdn_sequential)(q, k, v, beta, g)
            o = self.norm(o) * F.silu(z.float().reshape(B, T, c.n_v, c.dk))
        return self.out(o.reshape(B, T, self.value_dim))


class MoE(nn.Module):
    """Routed experts computed densely (every expert on every token, weighted by the renormalised
    top-k weights, zero for the others): the same sum as a sparse dispatch, and fast at this size."""

    def __init__(self, c: Config):
        super().__init__()
        self.c = c
        E, Fe, d = c.n_expert, c.n_ff_exp, c.d
        self.router = nn.Linear(d, E, bias=False)
        self.gate_exps = nn.Parameter(torch.randn(E, Fe, d) * 0.02)  # GGUF {d, F, E}
        self.up_exps = nn.Parameter(torch.randn(E, Fe, d) * 0.02)
        self.down_exps = nn.Parameter(torch.randn(E, d, Fe) * 0.02)  # GGUF {F, d, E}
        self.shexp_gate = nn.Linear(d, 1, bias=False)
        self.sh_gate = nn.Linear(d, c.n_ff_shexp, bias=False)
        self.sh_up = nn.Linear(d, c.n_ff_shexp, bias=False)
        self.sh_down = nn.Linear(c.n_ff_shexp, d, bias=False)
        self.aux = None

    def forward(self, h):
        c = self.c
        B, T, d = h.shape
        x = h.reshape(-1, d)
        P = torch.softmax(self.router(x).float(), dim=-1)
        topv, topi = P.topk(c.n_expert_used, dim=-1)
        w = topv / topv.sum(-1, keepdim=True).clamp_min(6.103515625e-5)
        dense_w = torch.zeros_like(P).scatter(-1, topi, w)
        E, Fe = c.n_expert, c.n_ff_exp
        gx = F.linear(x, self.gate_exps.reshape(E * Fe, d)).view(-1, E, Fe)
        ux = F.linear(x, self.up_exps.reshape(E * Fe, d)).view(-1, E, Fe)
        act = F.silu(gx) * ux * dense_w[..., None].to(gx.dtype)
        y = F.linear(act.reshape(-1, E * Fe), self.down_exps.permute(1, 0, 2).reshape(d, E * Fe))
        sh = self.sh_down(F.silu(self.sh_gate(x)) * self.sh_up(x))
        y = y + torch.sigmoid(self.shexp_gate(x).float()).to(sh.dtype) * sh
        # Switch-style balance: E · Σ_e (share of routed slots) · (mean probability)
        frac = torch.zeros_like(P).scatter(-1, topi, 1.0).mean(0) / c.n_expert_used
        self.aux = E * (frac * P.mean(0)).sum()
        return y.view(B, T, d)


class Block(nn.Module):
    def __init__(self, c: Config, i):
        super().__init__()
        self.full = c.is_full_attn(i)
        self.attn_norm = RMSNorm(c.d, c.eps)
        self.mixer = GatedAttention(c) if self.full else GatedDeltaNet(c)
        self.ffn_norm = RMSNorm(c.d, c.eps)  # post_attention_norm
        self.ffn = MoE(c)

    def forward(self, x, cos, sin):
        h = self.attn_norm(x)
        x = x + (self.mixer(h, cos, sin) if self.full else self.mixer(h))
        return x + self.ffn(self.ffn_norm(x))


class Qwen35MoE(nn.Module):
    def __init__(self, c: Config):
        super().__init__()
        self.c = c
        self.embed = nn.Embedding(c.vocab, c.d)
        self.blocks = nn.ModuleList([Block(c, i) for i in range(c.n_layer)])
        self.norm = RMSNorm(c.d, c.eps)
        for n, p in self.named_parameters():
            if p.dim() == 2 and "conv_w" not in n:
                nn.init.normal_(p, std=0.02)
        for blk in self.blocks:  # residual-branch outputs scaled down, as GPT-2 does
            out = blk.mixer.wo if blk.full else blk.mixer.out
            nn.init.normal_(out.weight, std=0.02 / math.sqrt(2 * c.n_layer))
            nn.init.normal_(blk.ffn.down_exps, std=0.02 / math.sqrt(2 * c.n_layer))
            nn.init.normal_(blk.ffn.sh_down.weight, std=0.02 / math.sqrt(2 * c.n_layer))

    def rope_tables(self, T, device):
        c = self.c
        inv = c.rope_base ** (-torch.arange(0, c.n_rot // 2, device=device, dtype=torch.float64) * 2 / c.n_rot)
        ang = torch.arange(T, device=device, dtype=torch.float64)[:, None] * inv[None, :]
        return ang.cos().float(), ang.sin().float()

    def forward(self, ids):
        cos, sin = self.rope_tables(ids.shape[1], ids.device)
        x = self.embed(ids).float()
        for blk in self.blocks:
            x = blk(x, cos, sin)
        return F.linear(self.norm(x), self.embed.weight)  # tied head

    def aux_loss(self):
        return sum(b.ffn.aux for b in self.blocks) / len(self.blocks)


# ----------------------------------------------------------------------------- data
def read_docs(path, limit=None):
    docs = []
    with gzip.open(path, "rt", encoding="utf-8") as f:
        for line in f:
            docs.append(json.loads(line)["text"])
            if limit and len(docs) >= limit:
                break
    return docs


def train_tokenizer(docs, vocab_size, path):
    from tokenizers import AddedToken, Regex, Tokenizer, decoders, models, pre_tokenizers, trainers
    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.Sequence([
        pre_tokenizers.Split(Regex(QWEN2_PRETOKENIZE), behavior="isolated", invert=False),
        pre_tokenizers.ByteLevel(add_prefix_space=False, trim_offsets=False, use_regex=False),
    ])
    tok.decoder = decoders.ByteLevel(add_prefix_space=False, trim_offsets=False, use_regex=False)
    trainer = trainers.BpeTrainer(vocab_size=vocab_size - len(ADDED), min_frequency=2, show_progress=False,
                                  special_tokens=SPECIALS, initial_alphabet=pre_tokenizers.ByteLevel.alphabet())
    tok.train_from_iterator(docs, trainer=trainer)
    tok.add_tokens([AddedToken(t, special=False, normalized=False) for t in ADDED])
    tok.save(path)
    return tok


def encode_stream(tok, docs):
    eot = tok.token_to_id("<|endoftext|>")
    ids = []
    for enc in tok.encode_batch(docs, add_special_tokens=False):
        ids.extend(enc.ids)
        ids.append(eot)
    return torch.tensor(ids, dtype=torch.int32)


@torch.no_grad()
def window_nll(model, stream, T, n_windows, device, batch=16):
    """Mean NLL over consecutive windows of T tokens of `stream`, each from a fresh state,
    predicting tokens 1..T-1 of the window; f32 (no autocast). Returns (nll, n_tokens)."""
    model.eval()
    total, count = 0.0, 0
    n_windows = min(n_windows, len(stream) // T)
    for s in range(0, n_windows, batch):
        e = min(n_windows, s + batch)
        x = stream[s * T:e * T].view(e - s, T).to(device).long()
        logits = model(x)
        nll = F.cross_entropy(logits[:, :-1].reshape(-1, logits.shape[-1]).float(), x[:, 1:].reshape(-1), reduction="sum")
        total += nll.item()
        count += (e - s) * (T - 1)
    model.train()
    return total / max(count, 1), count


@torch.no_grad()
def greedy(model, tok, prompt, n, device):
    model.eval()
    ids = tok.encode(prompt, add_special_tokens=False).ids
    out = []
    for _ in range(n):
        logits = model(torch.tensor([ids + out], device=device))
        nxt = int(logits[0, -1].argmax())
        out.append(nxt)
        if nxt in (tok.token_to_id("<|im_end|>"), tok.token_to_id("<|endoftext|>")):
            break
    model.train()
    return ids, out


# ----------------------------------------------------------------------------- checks
def check_gdn(device):
    torch.manual_seed(0)
    B, T, H, dk = 2, 150, 4, 16
    q = l2norm(torch.randn(B, T, H, dk, dtype=torch.float64, device=device), 1e-6)
    k = l2norm(torch.randn(B, T, H, dk, dtype=torch.float64, device=device), 1e-6)
    v = torch.randn(B, T, H, dk, dtype=torch.float64, device=device)
    beta = torch.rand(B, T, H, dtype=torch.float64, device=device)
    g = -torch.rand(B, T, H, dtype=torch.float64, device=device) * 2
    a = gdn_sequential(q, k, v, beta, g)
    b = gdn_chunked(q, k, v, beta, g)
    err = (a - b).abs().max().item()
    print(f"check: chunked vs sequential delta rule, max |diff| = {err:.3e} (f64)")
    assert err < 1e-10, err
    # f32 as trained
    b32 = gdn_chunked(q.float(), k.float(), v.float(), beta.float(), g.float())
    err32 = (a - b32.double()).abs().max().item()
    print(f"check: chunked f32 vs sequential f64, max |diff| = {err32:.3e}")
    assert err32 < 1e-4, err32


def check_model_paths(model, device):
    """The whole model with the chunked and with the sequential recurrence gives the same logits."""
    ids = torch.randint(0, model.c.vocab, (2, 100), device=device)
    with torch.no_grad():
        a = model(ids)
        for b in model.blocks:
            if not b.full:
                b.mixer.chunked = False
        s = model(ids)
        for b in model.blocks:
            if not b.full:
                b.mixer.chunked = True
    err = (a - s).abs().max().item()
    print(f"check: model logits chunked vs sequential GDN, max |diff| = {err:.3e}")
    assert err < 1e-3, err


# ----------------------------------------------------------------------------- main
def lr_at(step, total, peak, warmup):
    if step < warmup:
        return peak * (step + 1) / warmup
    p = min(1.0, (step - warmup) / max(1, total - warmup))
    return peak * (0.1 + 0.9 * 0.5 * (1 + math.cos(math.pi * p)))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--corpus", default=".corpus")
    ap.add_argument("--out", required=True)
    ap.add_argument("--smoke", action="store_true")
    ap.add_argument("--seed", type=int, default=1234)
    ap.add_argument("--vocab", type=int, default=8192)
    ap.add_argument("--steps", type=int, default=3000)
    ap.add_argument("--time-budget", type=float, default=420.0, help="seconds of training at most")
    ap.add_argument("--batch", type=int, default=32)
    ap.add_argument("--seq", type=int, default=1024)
    ap.add_argument("--lr", type=float, default=2e-3)
    ap.add_argument("--warmup", type=int, default=100)
    ap.add_argument("--tokenizer", help="tokenizer.json to use instead of training one")
    ap.add_argument("--bench-steps", type=int, default=0, help="smoke: time this many steps of the full config")
    args = ap.parse_args()
    t_start = time.time()
    torch.manual_seed(args.seed)
    device = "cuda" if torch.cuda.is_available() else "cpu"
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    os.makedirs(args.out, exist_ok=True)
    print(f"torch {torch.__version__}, device {device}"
          + (f" ({torch.cuda.get_device_name()})" if device == "cuda" else ""), flush=True)

    check_gdn(device)

    train_docs = read_docs(os.path.join(args.corpus, "train.jsonl.gz"))
    held_docs = read_docs(os.path.join(args.corpus, "heldout.jsonl.gz"))
    vocab = args.vocab
    tok_path = os.path.join(args.out, "tokenizer.json")
    t0 = time.time()
    if args.tokenizer:  # the same tokenizer, trained by an earlier run of this script
        from tokenizers import Tokenizer
        tok = Tokenizer.from_file(args.tokenizer)
        tok.save(tok_path)
    else:
        tok = train_tokenizer(train_docs, vocab, tok_path)
    assert tok.get_vocab_size() == vocab, tok.get_vocab_size()
    if args.smoke:
        train_docs, held_docs = train_docs[:4000], held_docs[:400]
    train_ids = encode_stream(tok, train_docs)
    held_ids = encode_stream(tok, held_docs)
    print(f"tokenizer: {vocab} tokens in {time.time() - t0:.1f}s; train {len(train_ids)} tokens "
          f"({len(train_docs)} docs), held-out {len(held_ids)} tokens ({len(held_docs)} docs)", flush=True)

    cfg = smoke_config(vocab) if args.smoke else Config(vocab=vocab)
    model = Qwen35MoE(cfg).to(device)
    n_params = sum(p.numel() for p in model.parameters())
    print(f"model: {cfg}\nparameters: {n_params / 1e6:.2f} M", flush=True)
    if args.smoke:
        check_model_paths(model, device)

    decay, no_decay = [], []
    for n, p in model.named_parameters():
        (decay if p.dim() >= 2 and "conv_w" not in n else no_decay).append(p)
    opt = torch.optim.AdamW([{"params": decay, "weight_decay": 0.1}, {"params": no_decay, "weight_decay": 0.0}],
                            lr=args.lr, betas=(0.9, 0.95), eps=1e-8, fused=(device == "cuda"))
    gen = torch.Generator(device="cpu").manual_seed(args.seed)
    steps = 30 if args.smoke else args.steps
    B, T = (8, 128) if args.smoke else (args.batch, args.seq)
    train_dev = train_ids.to(device)
    log = []
    t_train = time.time()
    step = 0
    for step in range(steps):
        lr = lr_at(step, steps, args.lr, min(args.warmup, steps // 5 + 1))
        for gp in opt.param_groups:
            gp["lr"] = lr
        starts = torch.randint(0, len(train_dev) - T - 1, (B,), generator=gen)
        idx = (starts[:, None] + torch.arange(T + 1)[None, :]).to(device)
        xy = train_dev[idx].long()
        with torch.autocast(device_type="cuda", dtype=torch.bfloat16, enabled=(device == "cuda")):
            logits = model(xy[:, :-1])
        loss = F.cross_entropy(logits.float().reshape(-1, cfg.vocab), xy[:, 1:].reshape(-1))
        aux = model.aux_loss()
        opt.zero_grad(set_to_none=True)
        (loss + 0.01 * aux).backward()
        gn = torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        if step % 50 == 0 or step == steps - 1:
            el = time.time() - t_train
            rec = {"step": step, "loss": round(loss.item(), 4), "aux": round(aux.item(), 4),
                   "grad_norm": round(gn.item(), 3), "lr": lr, "elapsed_s": round(el, 1),
                   "tokens": (step + 1) * B * T}
            log.append(rec)
            print(json.dumps(rec), flush=True)
        if time.time() - t_train > args.time_budget:
            print(f"time budget reached at step {step}", flush=True)
            break
    train_s = time.time() - t_train
    n_tok = (step + 1) * B * T
    print(f"trained {step + 1} steps, {n_tok / 1e6:.1f} M tokens in {train_s:.0f}s ({n_tok / train_s / 1e3:.0f}k tok/s)", flush=True)

    # held-out perplexity: all of it in windows of T, and the first 8 windows of 512 that the
    # engine check (tools/train-demo/check.py) recomputes from the GGUF
    nll_all, n_all = window_nll(model, held_ids, T, 10 ** 9, device)
    W, NW = (128, 4) if args.smoke else (512, 8)
    nll_chk, n_chk = window_nll(model, held_ids, W, NW, device)
    with open(os.path.join(args.out, "heldout_windows.txt"), "w") as f:
        for i in range(NW):
            f.write(",".join(str(int(t)) for t in held_ids[i * W:(i + 1) * W]) + "\n")
    result = {"train_steps": step + 1, "train_tokens": n_tok, "train_seconds": round(train_s, 1),
              "final_loss": log[-1]["loss"], "parameters": n_params,
              "heldout_ppl": math.exp(nll_all), "heldout_tokens": n_all, "heldout_window": T,
              "check_ppl": math.exp(nll_chk), "check_tokens": n_chk, "check_window": W, "check_windows": NW,
              "config": cfg.__dict__, "seed": args.seed, "vocab": vocab, "lr": args.lr, "batch": B, "seq": T}
    print(f"held-out perplexity {result['heldout_ppl']:.3f} over {n_all} tokens (f32); "
          f"check windows {W}x{NW}: {result['check_ppl']:.4f}", flush=True)

    samples = []
    for q in ["Hello", "What does ocean mean?", "What is a computer?", "Define happy.", "Who are you?"]:
        prompt = f"<|im_start|>user\n{q}<|im_end|>\n<|im_start|>assistant\n"
        ids, out = greedy(model, tok, prompt, 48, device)
        text = tok.decode(out, skip_special_tokens=False)
        samples.append({"prompt": prompt, "prompt_ids": ids, "greedy_ids": out, "text": text})
        print(f"sample: {q!r} -> {text!r}", flush=True)
    result["samples"] = samples
    result["log"] = log

    gguf_path = os.path.join(args.out, "strata-demo-q8_0.gguf")
    export_gguf.export(model, cfg, tok_path, gguf_path, q8_0=True)
    print(f"wrote {gguf_path}: {os.path.getsize(gguf_path) / 1e6:.1f} MB", flush=True)
    if args.smoke:
        export_gguf.export(model, cfg, tok_path, os.path.join(args.out, "smoke-f32.gguf"), q8_0=False)
        torch.save(model.state_dict(), os.path.join(args.out, "smoke.pt"))
    with open(os.path.join(args.out, "result.json"), "w") as f:
        json.dump(result, f, indent=1)

    if args.bench_steps:
        cfg = Config(vocab=args.vocab)
        model = Qwen35MoE(cfg).to(device)
        opt = torch.optim.AdamW(model.parameters(), lr=1e-3, fused=(device == "cuda"))
        B, T = args.batch, args.seq
        for i in range(args.bench_steps + 3):
            if i == 3:
                torch.cuda.synchronize()
                tb = time.time()
            x = torch.randint(0, cfg.vocab, (B, T + 1), device=device)
            with torch.autocast(device_type="cuda", dtype=torch.bfloat16):
                logits = model(x[:, :-1])
            loss = F.cross_entropy(logits.float().reshape(-1, cfg.vocab), x[:, 1:].reshape(-1)) + 0.01 * model.aux_loss()
            opt.zero_grad()
            loss.backward()
            opt.step()
        torch.cuda.synchronize()
        dt = (time.time() - tb) / args.bench_steps
        print(f"bench: full config {sum(p.numel() for p in model.parameters()) / 1e6:.1f} M params, "
              f"batch {B}x{T}: {dt * 1000:.0f} ms/step, {B * T / dt / 1e3:.0f}k tok/s, "
              f"peak mem {torch.cuda.max_memory_allocated() / 2**30:.1f} GiB", flush=True)
    print(f"total {time.time() - t_start:.0f}s", flush=True)


if __name__ == "__main__":
    main()
