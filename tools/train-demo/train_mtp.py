#!/usr/bin/env python3
"""train_mtp.py: trains an MTP (NextN) head for the demo model on its frozen trunk, on the CPU,
and writes the model file with the head (MODELS.md §7).

The trunk is the shipped GGUF, untouched: its tensors are copied byte for byte into the new file.
Strata itself computes the trunk's output-normed hidden states h_p (`strata eval --hidden`, the
exact rows the engine feeds the head at run time), so only the head runs in PyTorch:

  row p: e = RMSNorm(embed(x_p); enorm), g = RMSNorm(h_{p-1}; hnorm), h_{-1} = 0
         u = W_eh [e ; g]; u += GatedAttn(RMSNorm(u)); u += MoE+shared(RMSNorm(u))
         logits_p = token_embd · RMSNorm(u; shared_head_norm)          (the tied head, frozen)

A draft is accepted when the trunk's own sample equals it, so the head should predict what the
trunk predicts one position later: softmax(token_embd · h_p). With the tied head that is exact when
RMSNorm(u) = RMSNorm(h_p) / output_norm, so the head's eh_proj is first fitted in closed form, by
ridge regression of rmsnorm(x_p) (h_p without output_norm's gain) on [enorm(e_p) ; hnorm(h_{p-1})]
(and again with the head's own state in place of h_{p-1}, as a chained draft feeds it), with the
block's output projections (attn_output, ffn_down_exps, ffn_down_shexp) zero so the block passes u
through. `--steps N` then trains the whole head from there by gradient descent on the frozen trunk
(the block starting as a copy of the trunk's last full-attention layer, layer 7, its output
projections zero, so it opens as training finds use for it): distillation, KL(trunk || head) over
the whole vocabulary against the trunk's next-position distribution, on each row once with the
trunk's h_{p-1} and once (weight --chain-weight) with the head's own state, as the second and third
drafts see it. Both are judged on held-out windows by what acceptance needs: how often the head's
top token is the trunk's top token one position later (and, chained, two positions later), and
KL(trunk || head). The corpus is the demo model's training split (tools/train-demo/corpus.sh),
tokenized here with the model's byte-level BPE (models/tokenizer.json); `--made-up N` adds the
trunk's own answers to N questions about made-up words (what it says where it knows nothing, as on
the held-out questions of bench/prompts/heldout-chat.txt). A file that already has a head has it
dropped first: the new head is fitted on the same trunk bytes, from nothing.

  python3 tools/train-demo/train_mtp.py --gguf models/strata-demo-q8_0.gguf --strata build/strata \\
      --corpus .corpus --out OUT [--steps N] [--made-up N] [--time-budget S] [--seed 1234]

Needs Debian's python3-torch, python3-numpy and python3-regex; runs on the CPU. Writes OUT/strata-demo-q8_0.gguf and OUT/mtp-result.json.
"""
import argparse
import gzip
import json
import math
import os
import random
import struct
import subprocess
import sys
import tempfile
import time

import numpy as np
import regex
import torch
import torch.nn as nn
import torch.nn.functional as F

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import export_gguf as eg  # noqa: E402
import train  # noqa: E402


# ----------------------------------------------------------------------------- GGUF in
def read_gguf(path):
    """(kv, tensors): kv = [(key, raw type+value bytes)], tensors = [(name, type, ne, bytes)]."""
    data = open(path, "rb").read()
    magic, _, n_t, n_kv = struct.unpack_from("<4sIQQ", data, 0)
    assert magic == eg.GGUF_MAGIC, path
    fixed = {eg.T_U8: 1, eg.T_I8: 1, eg.T_U16: 2, eg.T_I16: 2, eg.T_U32: 4, eg.T_I32: 4, eg.T_F32: 4,
             eg.T_BOOL: 1, eg.T_U64: 8, eg.T_I64: 8, eg.T_F64: 8}

    def string(o):
        n = struct.unpack_from("<Q", data, o)[0]
        return data[o + 8:o + 8 + n].decode("utf-8"), o + 8 + n

    def skip(t, o):
        if t in fixed:
            return o + fixed[t]
        if t == eg.T_STR:
            return o + 8 + struct.unpack_from("<Q", data, o)[0]
        et, n = struct.unpack_from("<IQ", data, o)
        o += 12
        if et in fixed:
            return o + n * fixed[et]
        for _ in range(n):
            o = skip(et, o)
        return o

    off, kv, align = 24, [], 32
    for _ in range(n_kv):
        key, off = string(off)
        t = struct.unpack_from("<I", data, off)[0]
        end = skip(t, off + 4)
        kv.append((key, data[off:end]))
        if key == "general.alignment":
            align = struct.unpack_from("<I", data, off + 4)[0]
        off = end
    infos = []
    for _ in range(n_t):
        name, off = string(off)
        nd = struct.unpack_from("<I", data, off)[0]
        ne = struct.unpack_from(f"<{nd}Q", data, off + 4)
        typ, toff = struct.unpack_from("<IQ", data, off + 4 + 8 * nd)
        off += 4 + 8 * nd + 12
        infos.append((name, typ, ne, toff))
    base = (off + align - 1) // align * align
    tensors = []
    for name, typ, ne, toff in infos:
        n = math.prod(ne)
        size = n * 4 if typ == eg.GGML_F32 else n // 32 * 34
        tensors.append((name, typ, ne, data[base + toff:base + toff + size]))
    return kv, tensors


def dequant(typ, ne, raw):
    """f32 numpy array in PyTorch layout (the reversed ne)."""
    if typ == eg.GGML_F32:
        x = np.frombuffer(raw, dtype="<f4")
    else:
        assert typ == eg.GGML_Q8_0, typ
        b = np.frombuffer(raw, dtype=np.dtype([("d", "<f2"), ("qs", "i1", (32,))]))
        x = (b["d"].astype(np.float32)[:, None] * b["qs"].astype(np.float32)).reshape(-1)
    return x.reshape(tuple(reversed(ne))).astype(np.float32)


# ----------------------------------------------------------------------------- tokenizer
def bytes_to_unicode():
    bs = list(range(ord("!"), ord("~") + 1)) + list(range(ord("¡"), ord("¬") + 1)) + list(range(ord("®"), ord("ÿ") + 1))
    cs = bs[:]
    n = 0
    for b in range(256):
        if b not in bs:
            bs.append(b)
            cs.append(256 + n)
            n += 1
    return dict(zip(bs, map(chr, cs)))


class BPE:
    """The byte-level BPE of models/tokenizer.json: added tokens split out first, then the qwen2
    pre-tokenizer regex, each piece's bytes mapped to unicode and merged by rank."""

    def __init__(self, path):
        tj = json.load(open(path, encoding="utf-8"))
        self.vocab = tj["model"]["vocab"]
        self.ranks = {tuple(m if isinstance(m, list) else m.split(" ")): i for i, m in enumerate(tj["model"]["merges"])}
        self.added = {t["content"]: t["id"] for t in tj["added_tokens"]}
        self.split = regex.compile("(" + "|".join(regex.escape(t) for t in sorted(self.added, key=len, reverse=True)) + ")")
        self.pat = regex.compile(train.QWEN2_PRETOKENIZE)
        self.b2u = bytes_to_unicode()
        self.cache = {}

    def word(self, w):
        if w in self.cache:
            return self.cache[w]
        parts = list(w)
        while len(parts) > 1:
            pairs = [(self.ranks.get((parts[i], parts[i + 1]), 1 << 30), i) for i in range(len(parts) - 1)]
            r, i = min(pairs)
            if r == 1 << 30:
                break
            parts[i:i + 2] = [parts[i] + parts[i + 1]]
        ids = [self.vocab[p] for p in parts]
        self.cache[w] = ids
        return ids

    def encode(self, text):
        ids = []
        for piece in self.split.split(text):
            if not piece:
                continue
            if piece in self.added:
                ids.append(self.added[piece])
                continue
            for m in self.pat.findall(piece):
                ids.extend(self.word("".join(self.b2u[b] for b in m.encode("utf-8"))))
        return ids


# ----------------------------------------------------------------------------- the head
class MTPHead(nn.Module):
    def __init__(self, c, emb):
        super().__init__()
        self.c = c
        self.register_buffer("emb", emb)  # token_embd, frozen: embedding and tied head
        self.enorm = train.RMSNorm(c.d, c.eps)
        self.hnorm = train.RMSNorm(c.d, c.eps)
        self.eh = nn.Linear(2 * c.d, c.d, bias=False)
        self.attn_norm = train.RMSNorm(c.d, c.eps)
        self.attn = train.GatedAttention(c)
        self.ffn_norm = train.RMSNorm(c.d, c.eps)
        self.ffn = train.MoE(c)
        self.head_norm = train.RMSNorm(c.d, c.eps)

    def features(self, x, h_prev, cos, sin):
        """The output-normed state h' of every row."""
        e = self.enorm(F.embedding(x, self.emb))
        u = self.eh(torch.cat([e, self.hnorm(h_prev)], -1))
        u = u + self.attn(self.attn_norm(u), cos, sin)
        u = u + self.ffn(self.ffn_norm(u))
        return self.head_norm(u)

    def forward(self, x, h_prev, cos, sin):
        return F.linear(self.features(x, h_prev, cos, sin), self.emb)


def fit_eh_proj(head, x, h, lam, chain):
    """Ridge regression of rmsnorm(x_p) = h_p / output_norm on [e ; g] (head.enorm, head.hnorm as
    they are): eh_proj in closed form (normal equations summed in f32, solved in f64). With chain,
    a second fit on twice the rows: each row once with the trunk's h_{p-1} and once with the head's
    own state for p-1 (what a chained draft feeds it), so the second and third drafts hold up."""
    def solve(X, t):
        A = (X.T @ X).double() + lam * X.shape[0] * torch.eye(X.shape[1], dtype=torch.float64)
        return torch.linalg.solve(A, (X.T @ t).double()).T.float()

    with torch.no_grad():
        d = head.c.d
        e = head.enorm(F.embedding(x, head.emb)).reshape(-1, d)
        X = torch.cat([e, head.hnorm(shifted(h)).reshape(-1, d)], -1)
        w = head.head_norm.weight
        t = h.reshape(-1, d) / w
        t = t / t.pow(2).mean(-1, keepdim=True).sqrt()
        W = solve(X, t)
        if chain:
            own = head.head_norm(X @ W.T).reshape(h.shape)  # the head's h' at every row
            X2 = torch.cat([e, head.hnorm(shifted(own)).reshape(-1, d)], -1)
            X, t = torch.cat([X, X2]), torch.cat([t, t])
            W = solve(X, t)
        head.eh.weight.copy_(W)
        resid = ((X @ W.T - t).pow(2).mean() / t.pow(2).mean()).item()
    return resid


def load_from_trunk(head, T, il):
    """The block from trunk layer il (a full-attention layer), the head norm from output_norm."""
    def w(name):
        t = T[name]
        return torch.from_numpy(dequant(t[1], t[2], t[3]).copy())
    p = f"blk.{il}."
    with torch.no_grad():
        head.attn_norm.weight.copy_(w(p + "attn_norm.weight"))
        head.ffn_norm.weight.copy_(w(p + "post_attention_norm.weight"))
        head.attn.wq.weight.copy_(w(p + "attn_q.weight"))
        head.attn.wk.weight.copy_(w(p + "attn_k.weight"))
        head.attn.wv.weight.copy_(w(p + "attn_v.weight"))
        head.attn.wo.weight.copy_(w(p + "attn_output.weight"))
        head.attn.q_norm.weight.copy_(w(p + "attn_q_norm.weight"))
        head.attn.k_norm.weight.copy_(w(p + "attn_k_norm.weight"))
        f = head.ffn
        f.router.weight.copy_(w(p + "ffn_gate_inp.weight"))
        f.gate_exps.copy_(w(p + "ffn_gate_exps.weight"))
        f.up_exps.copy_(w(p + "ffn_up_exps.weight"))
        f.down_exps.copy_(w(p + "ffn_down_exps.weight"))
        f.shexp_gate.weight.copy_(w(p + "ffn_gate_inp_shexp.weight").reshape(1, -1))
        f.sh_gate.weight.copy_(w(p + "ffn_gate_shexp.weight"))
        f.sh_up.weight.copy_(w(p + "ffn_up_shexp.weight"))
        f.sh_down.weight.copy_(w(p + "ffn_down_shexp.weight"))
        head.head_norm.weight.copy_(w("output_norm.weight"))
        # the block's residual branches start closed: u passes through until training opens them
        head.attn.wo.weight.zero_()
        f.down_exps.zero_()
        f.sh_down.weight.zero_()


# ----------------------------------------------------------------------------- GGUF out
def u32(v):
    return struct.pack("<II", eg.T_U32, v)


def export(kv, tensors, head, il, path, n_layer_all):
    a = "qwen35moe"
    w = eg.GGUFWriter()
    for key, payload in kv:
        if key == f"{a}.block_count":
            payload = u32(n_layer_all)
        elif key == f"{a}.attention.recurrent_layers":
            _, et, n = struct.unpack_from("<IIQ", payload, 0)
            flags = list(payload[16:16 + n]) + [0] * (n_layer_all - n)
            payload = struct.pack("<IIQ", eg.T_ARR, et, n_layer_all) + bytes(flags)
        w._add(key, payload)
    w._add(f"{a}.nextn_predict_layers", u32(1))
    for name, typ, ne, raw in tensors:
        w.tensors.append((name, typ, tuple(ne), raw))

    def t(x):
        return x.detach().float().cpu().numpy()
    p = f"blk.{il}."
    f = head.ffn
    w.tensor(p + "attn_norm.weight", t(head.attn_norm.weight), False)
    w.tensor(p + "post_attention_norm.weight", t(head.ffn_norm.weight), False)
    w.tensor(p + "attn_q.weight", t(head.attn.wq.weight), True)
    w.tensor(p + "attn_k.weight", t(head.attn.wk.weight), True)
    w.tensor(p + "attn_v.weight", t(head.attn.wv.weight), True)
    w.tensor(p + "attn_output.weight", t(head.attn.wo.weight), True)
    w.tensor(p + "attn_q_norm.weight", t(head.attn.q_norm.weight), False)
    w.tensor(p + "attn_k_norm.weight", t(head.attn.k_norm.weight), False)
    w.tensor(p + "ffn_gate_inp.weight", t(f.router.weight), False)
    w.tensor(p + "ffn_gate_exps.weight", t(f.gate_exps), True)
    w.tensor(p + "ffn_up_exps.weight", t(f.up_exps), True)
    w.tensor(p + "ffn_down_exps.weight", t(f.down_exps), True)
    w.tensor(p + "ffn_gate_inp_shexp.weight", t(f.shexp_gate.weight).reshape(-1), False)
    w.tensor(p + "ffn_gate_shexp.weight", t(f.sh_gate.weight), True)
    w.tensor(p + "ffn_up_shexp.weight", t(f.sh_up.weight), True)
    w.tensor(p + "ffn_down_shexp.weight", t(f.sh_down.weight), True)
    w.tensor(p + "nextn.eh_proj.weight", t(head.eh.weight), True)
    w.tensor(p + "nextn.enorm.weight", t(head.enorm.weight), False)
    w.tensor(p + "nextn.hnorm.weight", t(head.hnorm.weight), False)
    w.tensor(p + "nextn.shared_head_norm.weight", t(head.head_norm.weight), False)
    w.write(path)


# ----------------------------------------------------------------------------- data
def windows(bpe, corpus, split, n_tokens, T, seed, docs=None):
    if docs is None:
        docs = [json.loads(line)["text"] for line in gzip.open(os.path.join(corpus, f"{split}.jsonl.gz"), "rt", encoding="utf-8")]
        random.Random(seed).shuffle(docs)
    eot = bpe.added["<|endoftext|>"]
    ids = []
    for doc in docs:
        ids.extend(bpe.encode(doc))
        ids.append(eot)
        if len(ids) >= n_tokens:
            break
    n = len(ids) // T * T
    return np.array(ids[:n], dtype=np.int64).reshape(-1, T)


def made_up_answers(strata, gguf, corpus, n, seed, threads):
    """The trunk's own greedy answers (strata chat, no drafts) to n training-split questions about
    words it never saw: each question's word replaced by a pronounceable made-up one. A draft is
    accepted when it matches what the trunk says, and on words it does not know the trunk says
    things no corpus window shows, so the head is fitted on these too. Returns the conversations'
    texts, as the chat template renders them."""
    rng = random.Random(seed)
    qs = []
    for line in gzip.open(os.path.join(corpus, "train.jsonl.gz"), "rt", encoding="utf-8"):
        t = json.loads(line)["text"]
        m = regex.match(r"<\|im_start\|>user\n([^\n<]*)<\|im_end\|>", t)
        # the word asked about: the question's last, but for "mean(s)"
        words = [w for w in regex.finditer(r"\b[a-z]{3,}\b", m.group(1)) if w.group() not in ("mean", "means")] if m else []
        if words:
            q, w = m.group(1), words[-1]
            qs.append((q[:w.start()], q[w.end():]))
    rng.shuffle(qs)
    cons, vows = "bcdfghklmnprstvz", "aeiou"
    words = ["".join(rng.choice(cons) + rng.choice(vows) for _ in range(rng.randint(2, 4))) for _ in range(n)]
    questions = [a + w + b for (a, b), w in zip(qs[:n], words)]
    script = "".join(q + "\n/reset\n" for q in questions)
    out = subprocess.run([strata, "chat", "-m", gguf, "--temp", "0", "-n", "48", "-t", str(threads), "--no-think",
                          "--spec", "none", "--device", "cpu"], input=script, capture_output=True, text=True, check=True)
    answers = [a for a in out.stdout.split("\n") if a.strip()]
    texts = []
    for q, a in zip(questions, answers):
        texts.append(f"<|im_start|>user\n{q}<|im_end|>\n<|im_start|>assistant\n<think>\n\n</think>\n\n{a}<|im_end|>\n")
    return texts


def hidden(strata, gguf, win, threads):
    """The trunk's output-normed states of every row of every window (each from a fresh state)."""
    with tempfile.TemporaryDirectory() as tmp:
        ids, out = os.path.join(tmp, "ids.txt"), os.path.join(tmp, "h.bin")
        with open(ids, "w") as f:
            f.write(",".join(str(int(x)) for x in win.reshape(-1)))
        subprocess.run([strata, "eval", "-m", gguf, "--tokens", "@" + ids, "--window", str(win.shape[1]),
                        "--prefill", str(win.shape[1]), "--hidden", out, "-t", str(threads), "--device", "cpu"],
                       check=True)
        return np.fromfile(out, dtype="<f4").reshape(win.shape[0], win.shape[1], -1)


def shifted(h):
    """Row p's h input: the trunk's state at p-1, zeros at p = 0."""
    return torch.cat([torch.zeros_like(h[:, :1]), h[:, :-1]], 1)


def heldout_stats(head, emb, x, h, cos, sin):
    """KL(trunk || head) per row and the head's top-1 agreement with the trunk's (full vocabulary):
    row p of both predicts x_{p+1}, the trunk's from h_p."""
    logits = head(x, shifted(h), cos, sin)
    target = F.log_softmax(F.linear(h, emb), -1)
    logp = F.log_softmax(logits, -1)
    kl = (target.exp() * (target - logp)).sum(-1).mean()
    agree = (logits.argmax(-1) == target.argmax(-1)).float().mean()
    return kl, agree


def chained_agreement(head, emb, x, h, cos, sin):
    """The second draft's top-1 agreement: row p fed the head's own state for p-1 (a chained
    draft's input, with the right token x_p) against the trunk's top token from h_p."""
    own = head.features(x, shifted(h), cos, sin)
    logits = head(x, shifted(own), cos, sin)
    return (logits.argmax(-1) == F.linear(h, emb).argmax(-1)).float().mean()


def distill_loss(head, emb, x, h, cos, sin, chain_weight):
    """What acceptance needs, by gradient: KL(trunk || head) over the whole vocabulary, the head's
    row p (fed x_p and h_{p-1}) against the trunk's next-position distribution softmax(token_embd ·
    h_p), the tied head frozen. With chain_weight, the same rows again fed the head's own state for
    p-1 (detached), as a chained draft feeds it, weighted so."""
    with torch.no_grad():
        target = F.log_softmax(F.linear(h, emb), -1)
        p_t = target.exp()

    def kl(u):
        logp = F.log_softmax(F.linear(u, emb), -1)
        return (p_t * (target - logp)).sum(-1).mean()

    u = head.features(x, shifted(h), cos, sin)
    loss = kl(u)
    aux = head.ffn.aux
    if chain_weight > 0:
        u2 = head.features(x, shifted(u.detach()), cos, sin)
        loss = loss + chain_weight * kl(u2)
        aux = aux + head.ffn.aux
    return loss, aux


def strip_head(kv, tensors):
    """A file that already has a head: the trunk's keys and tensors as the head-less file held them
    (block_count and recurrent_layers cut back, nextn_predict_layers dropped, blk.N.* dropped), so
    the head is fitted again from nothing, the same way, on the same trunk bytes."""
    keys = dict(kv)
    n_all = struct.unpack_from("<I", keys["qwen35moe.block_count"], 4)[0]
    n_mtp = struct.unpack_from("<I", keys["qwen35moe.nextn_predict_layers"], 4)[0]
    n = n_all - n_mtp
    out = []
    for key, payload in kv:
        if key == "qwen35moe.nextn_predict_layers":
            continue
        if key == "qwen35moe.block_count":
            payload = u32(n)
        elif key == "qwen35moe.attention.recurrent_layers":
            _, et, _ = struct.unpack_from("<IIQ", payload, 0)
            payload = struct.pack("<IIQ", eg.T_ARR, et, n) + payload[16:16 + n]
        out.append((key, payload))
    head_names = tuple(f"blk.{i}." for i in range(n, n_all))
    return out, [t for t in tensors if not t[0].startswith(head_names)]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--gguf", default="models/strata-demo-q8_0.gguf")
    ap.add_argument("--strata", default="build/strata")
    ap.add_argument("--corpus", default=".corpus")
    ap.add_argument("--tokenizer", default="models/tokenizer.json")
    ap.add_argument("--out", required=True)
    ap.add_argument("--tokens", type=int, default=32768, help="training tokens (trunk states computed once)")
    ap.add_argument("--heldout-tokens", type=int, default=2048)
    ap.add_argument("--window", type=int, default=128)
    ap.add_argument("--batch", type=int, default=8)
    ap.add_argument("--chain-weight", type=float, default=0.5,
                    help="weight of the chained rows (fed the head's own state) in the distillation loss")
    ap.add_argument("--lr", type=float, default=2e-3)
    ap.add_argument("--ridge", type=float, default=1e-3, help="ridge weight of the closed-form fit")
    ap.add_argument("--no-chain", action="store_true", help="fit on the trunk's states only (no chained rows)")
    ap.add_argument("--made-up", type=int, default=0,
                    help="questions about made-up words whose trunk answers (strata chat) join the data; 0: none")
    ap.add_argument("--eval-every", type=int, default=100, help="held-out numbers every N steps (a multiple of 25)")
    ap.add_argument("--steps", type=int, default=0, help="gradient steps after the fit (0: the fit alone)")
    ap.add_argument("--time-budget", type=float, default=240.0, help="seconds of gradient training at most")
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--seed", type=int, default=1234)
    args = ap.parse_args()
    t_start = time.time()
    torch.manual_seed(args.seed)
    torch.set_num_threads(args.threads)
    os.makedirs(args.out, exist_ok=True)

    kv, tensors = read_gguf(args.gguf)
    if "qwen35moe.nextn_predict_layers" in dict(kv):
        kv, tensors = strip_head(kv, tensors)
        print(f"{args.gguf} has a head: fitting a new one on its trunk (its tensors kept byte for byte)", flush=True)
    T = {t[0]: t for t in tensors}
    keys = dict(kv)
    n_layer = struct.unpack_from("<I", keys["qwen35moe.block_count"], 4)[0]
    c = train.Config()
    emb = torch.from_numpy(dequant(*T["token_embd.weight"][1:4]).copy())
    assert emb.shape == (c.vocab, c.d), emb.shape
    il_src = max(i for i in range(n_layer) if c.is_full_attn(i))

    bpe = BPE(args.tokenizer)
    t0 = time.time()
    train_w = windows(bpe, args.corpus, "train", args.tokens, args.window, args.seed)
    held_w = windows(bpe, args.corpus, "heldout", args.heldout_tokens, args.window, args.seed)
    print(f"tokenized {train_w.size} training and {held_w.size} held-out tokens in {time.time() - t0:.1f}s", flush=True)

    def states(name, w):
        """The trunk's states of windows w, cached in OUT/trunk-states-NAME.npz for the same windows."""
        cache = os.path.join(args.out, f"trunk-states-{name}.npz")
        if os.path.exists(cache):
            z = np.load(cache)
            if z["w"].shape == w.shape and (z["w"] == w).all():
                print(f"trunk states from {cache}", flush=True)
                return z["h"]
        t0 = time.time()
        h = hidden(args.strata, args.gguf, w, args.threads)
        np.savez(cache, w=w, h=h)
        print(f"trunk states of {name} from {args.strata}: {h.shape} in {time.time() - t0:.1f}s", flush=True)
        return h

    train_h, held_h = states("train", train_w), states("heldout", held_w)
    if args.made_up:
        texts_path = os.path.join(args.out, f"made-up-{args.made_up}-{args.seed}.json")
        if os.path.exists(texts_path):
            texts = json.load(open(texts_path, encoding="utf-8"))
        else:
            t0 = time.time()
            texts = made_up_answers(args.strata, args.gguf, args.corpus, args.made_up, args.seed, args.threads)
            json.dump(texts, open(texts_path, "w", encoding="utf-8"), indent=0)
            print(f"{len(texts)} made-up answers from the trunk in {time.time() - t0:.1f}s", flush=True)
        own_w = windows(bpe, None, None, 1 << 30, args.window, args.seed, docs=texts)
        train_w = np.concatenate([train_w, own_w])
        train_h = np.concatenate([train_h, states("made-up", own_w)])
        print(f"{len(texts)} made-up answers, {own_w.size} tokens", flush=True)

    head = MTPHead(c, emb)
    load_from_trunk(head, T, il_src)
    cos, sin = train.Qwen35MoE.rope_tables(head, args.window, "cpu")
    params = [p for p in head.parameters() if p.requires_grad]
    opt = torch.optim.AdamW(params, lr=args.lr, betas=(0.9, 0.95), weight_decay=0.0)
    gen = torch.Generator().manual_seed(args.seed)
    xh = torch.from_numpy(held_w)
    hh = torch.from_numpy(held_h)

    def heldout():
        """KL, top-1 agreement, and the chained (second draft's) agreement on the held-out windows."""
        with torch.no_grad():
            kl, agree, agree2, n = 0.0, 0.0, 0.0, 0
            for s in range(0, xh.shape[0], 32):
                xb, hb = xh[s:s + 32], hh[s:s + 32]
                k, a = heldout_stats(head, emb, xb, hb, cos, sin)
                a2 = chained_agreement(head, emb, xb, hb, cos, sin)
                m = xb.shape[0]
                kl, agree, agree2, n = kl + k.item() * m, agree + a.item() * m, agree2 + a2.item() * m, n + m
        return kl / n, agree / n, agree2 / n

    xt, ht = torch.from_numpy(train_w), torch.from_numpy(train_h)
    t0 = time.time()
    # the fit is a function of the data and the ridge weight alone: cached in OUT for reruns
    fit_cache = os.path.join(args.out, f"ridge-{train_w.size}-{int(train_w.sum())}-{args.ridge}-{int(not args.no_chain)}.pt")
    if os.path.exists(fit_cache):
        z = torch.load(fit_cache)
        with torch.no_grad():
            head.eh.weight.copy_(z["eh"])
        resid = z["resid"]
        print(f"closed-form eh_proj from {fit_cache}", flush=True)
    else:
        resid = fit_eh_proj(head, xt, ht, args.ridge, not args.no_chain)
        torch.save({"eh": head.eh.weight.detach().clone(), "resid": resid}, fit_cache)
    fit_s = time.time() - t0
    kl0, agree0, agree0_2 = heldout()
    print(f"closed-form eh_proj in {fit_s:.1f}s (relative residual {resid:.3f}); held-out: KL {kl0:.3f}, "
          f"top-1 agreement with the trunk {agree0:.3f} (chained {agree0_2:.3f})", flush=True)
    log = [{"step": 0, "fit_residual": round(resid, 4), "heldout_kl": round(kl0, 4), "heldout_agree": round(agree0, 4),
            "heldout_agree_chained": round(agree0_2, 4)}]
    t_train = time.time()
    step = 0
    for step in range(1, args.steps + 1):
        lr = args.lr * min(1.0, step / 20) * (0.1 + 0.9 * 0.5 * (1 + math.cos(math.pi * min(1.0, step / args.steps))))
        for g in opt.param_groups:
            g["lr"] = lr
        idx = torch.randint(0, xt.shape[0], (args.batch,), generator=gen)
        loss, aux = distill_loss(head, emb, xt[idx], ht[idx], cos, sin, args.chain_weight)
        opt.zero_grad(set_to_none=True)
        (loss + 0.01 * aux).backward()
        torch.nn.utils.clip_grad_norm_(params, 1.0)
        opt.step()
        if step % 25 == 0 or step == 1:
            rec = {"step": step, "loss": round(loss.item(), 4), "lr": lr,
                   "elapsed_s": round(time.time() - t_train, 1)}
            if step % args.eval_every == 0:
                k, a, a2 = heldout()
                rec.update(heldout_kl=round(k, 4), heldout_agree=round(a, 4), heldout_agree_chained=round(a2, 4))
            log.append(rec)
            print(json.dumps(rec), flush=True)
        if time.time() - t_train > args.time_budget:
            print(f"time budget reached at step {step}", flush=True)
            break
    train_s = time.time() - t_train
    kl1, agree1, agree1_2 = kl0, agree0, agree0_2
    if step:
        kl1, agree1, agree1_2 = heldout()
        print(f"held-out after {step} steps ({train_s:.0f}s): KL {kl1:.3f}, top-1 agreement with the trunk {agree1:.3f} "
              f"(chained {agree1_2:.3f})", flush=True)
        log.append({"step": step, "heldout_kl": round(kl1, 4), "heldout_agree": round(agree1, 4),
                    "heldout_agree_chained": round(agree1_2, 4)})

    path = os.path.join(args.out, os.path.basename(args.gguf))
    export(kv, tensors, head, n_layer, path, n_layer + 1)
    result = {"fit_seconds": round(fit_s, 1), "fit_residual": resid, "ridge": args.ridge, "chain": not args.no_chain,
              "made_up": args.made_up, "chain_weight": args.chain_weight, "loss": "KL(trunk || head), full vocabulary",
              "steps": step, "steps_planned": args.steps,
              "train_seconds": round(train_s, 1), "train_tokens": int(train_w.size),
              "heldout_tokens": int(held_w.size), "window": args.window, "batch": args.batch, "lr": args.lr,
              "seed": args.seed, "init_layer": il_src, "torch": torch.__version__, "threads": args.threads,
              "heldout_kl_before": kl0, "heldout_agree_before": agree0, "heldout_agree_chained_before": agree0_2,
              "heldout_kl": kl1, "heldout_agree": agree1, "heldout_agree_chained": agree1_2,
              "log": log}
    with open(os.path.join(args.out, "mtp-result.json"), "w") as f:
        json.dump(result, f, indent=1)
    print(f"wrote {path} ({os.path.getsize(path) / 1e6:.1f} MB); total {time.time() - t_start:.0f}s", flush=True)


if __name__ == "__main__":
    main()
