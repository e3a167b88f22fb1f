"""export_gguf.py: writes the demo model as a GGUF file in llama.cpp's converter layout for
qwen35moe (MODELS.md §3, §4.5), with the tokenizer keys of §9.1, and quantizes to Q8_0 exactly as
ggml's reference quantizer does (so a file written here is byte-identical to what llama-quantize or
`st_quantize_row` would make from the same f32 weights).

Which tensors stay f32 follows the converter (conversion/base.py): 1-D tensors, norms, the router
`ffn_gate_inp`, `ffn_gate_inp_shexp`, `ssm_conv1d`, and names not ending in `.weight`
(`ssm_a`, `ssm_dt.bias`). Everything else is Q8_0 (or f32 with q8_0=False).

Needs numpy (on the training machine) for the tensors; the key/value part is plain struct.
"""
import json
import struct

import numpy as np

GGUF_MAGIC = b"GGUF"
ALIGN = 32
T_U8, T_I8, T_U16, T_I16, T_U32, T_I32, T_F32, T_BOOL, T_STR, T_ARR, T_U64, T_I64, T_F64 = range(13)
GGML_F32, GGML_Q8_0 = 0, 8


def q8_0_quantize(x):
    """ggml's quantize_row_q8_0_ref on every row of x (f32, rows a multiple of 32 long): per block
    of 32, d = amax/127 (stored as f16, rounded to nearest even), q = roundf(x * (1/d))."""
    b = np.ascontiguousarray(x, dtype=np.float32).reshape(-1, 32)
    amax = np.abs(b).max(axis=1)
    d = (amax / np.float32(127)).astype(np.float32)
    safe = np.where(d != 0, d, np.float32(1)).astype(np.float32)
    inv = np.where(d != 0, np.float32(1) / safe, np.float32(0)).astype(np.float32)
    v = (b * inv[:, None]).astype(np.float32)
    q = np.trunc(v)
    frac = v - q  # exact in f32
    q = q + np.where(np.abs(frac) >= np.float32(0.5), np.sign(v), np.float32(0))  # roundf: ties away
    out = np.empty(b.shape[0], dtype=np.dtype([("d", "<f2"), ("qs", "i1", (32,))]))
    out["d"] = d.astype(np.float16)
    out["qs"] = q.astype(np.int8)
    return out.tobytes()


def _str(s):
    b = s.encode("utf-8")
    return struct.pack("<Q", len(b)) + b


class GGUFWriter:
    def __init__(self):
        self.kv = []        # (key, bytes of type + value)
        self.tensors = []   # (name, ggml type, ne tuple, bytes)

    def _add(self, key, payload):
        assert key not in [k for k, _ in self.kv], key
        self.kv.append((key, payload))

    def u32(self, key, v): self._add(key, struct.pack("<II", T_U32, v))
    def i32(self, key, v): self._add(key, struct.pack("<Ii", T_I32, v))
    def f32(self, key, v): self._add(key, struct.pack("<If", T_F32, v))
    def bool(self, key, v): self._add(key, struct.pack("<IB", T_BOOL, 1 if v else 0))
    def str(self, key, v): self._add(key, struct.pack("<I", T_STR) + _str(v))

    def arr(self, key, elem, values):
        fmt = {T_I32: "<i", T_U32: "<I", T_F32: "<f", T_BOOL: "<B"}[elem]
        body = b"".join(struct.pack(fmt, int(v) if elem != T_F32 else v) for v in values)
        self._add(key, struct.pack("<IIQ", T_ARR, elem, len(values)) + body)

    def str_arr(self, key, values):
        self._add(key, struct.pack("<IIQ", T_ARR, T_STR, len(values)) + b"".join(_str(v) for v in values))

    def tensor(self, name, array, q8_0):
        """array: numpy f32 in PyTorch layout ([out, in], or [E, rows, cols]); GGUF ne is the
        reversed shape (ne0 fastest)."""
        a = np.ascontiguousarray(array, dtype=np.float32)
        ne = tuple(reversed(a.shape))
        if q8_0:
            assert ne[0] % 32 == 0, (name, ne)
            self.tensors.append((name, GGML_Q8_0, ne, q8_0_quantize(a)))
        else:
            self.tensors.append((name, GGML_F32, ne, a.tobytes()))

    def write(self, path):
        out = bytearray()
        out += GGUF_MAGIC + struct.pack("<IQQ", 3, len(self.tensors), len(self.kv))
        for k, payload in self.kv:
            out += _str(k) + payload
        offset = 0
        for name, t, ne, data in self.tensors:
            out += _str(name) + struct.pack("<I", len(ne)) + b"".join(struct.pack("<Q", n) for n in ne)
            out += struct.pack("<IQ", t, offset)
            offset += (len(data) + ALIGN - 1) // ALIGN * ALIGN
        out += b"\0" * ((-len(out)) % ALIGN)
        with open(path, "wb") as f:
            f.write(out)
            for _, _, _, data in self.tensors:
                f.write(data)
                f.write(b"\0" * ((-len(data)) % ALIGN))


CHAT_TEMPLATE = (
    "{%- for message in messages %}"
    "{{- '<|im_start|>' + message.role + '\\n' + message.content + '<|im_end|>\\n' }}"
    "{%- endfor %}"
    "{%- if add_generation_prompt %}"
    "{{- '<|im_start|>assistant\\n' }}"
    "{%- if enable_thinking is defined and enable_thinking is false %}"
    "{{- '<think>\\n\\n</think>\\n\\n' }}"
    "{%- endif %}"
    "{%- endif %}"
)


def tokenizer_keys(w, tokenizer_json_path):
    """tokenizer.ggml.* as llama.cpp's converter writes them for a Qwen byte-level BPE
    tokenizer.json (MODELS.md §9.1): types 3 for special added tokens, 4 for other added tokens."""
    with open(tokenizer_json_path, encoding="utf-8") as f:
        tj = json.load(f)
    vocab = dict(tj["model"]["vocab"])
    added = {t["id"]: t for t in tj.get("added_tokens", [])}
    for i, t in added.items():
        vocab[t["content"]] = i
    n = max(vocab.values()) + 1
    tokens = [None] * n
    for s, i in vocab.items():
        tokens[i] = s
    assert all(t is not None for t in tokens), "tokenizer ids have holes"
    types = []
    for i in range(n):
        if i in added:
            t = added[i]
            types.append(3 if t.get("special") or (t["content"].startswith("<|") and t["content"].endswith("|>")) else 4)
        else:
            types.append(1)
    merges = [m if isinstance(m, str) else " ".join(m) for m in tj["model"]["merges"]]
    w.str("tokenizer.ggml.model", "gpt2")
    w.str("tokenizer.ggml.pre", "qwen2")
    w.str_arr("tokenizer.ggml.tokens", tokens)
    w.arr("tokenizer.ggml.token_type", T_I32, types)
    w.str_arr("tokenizer.ggml.merges", merges)
    w.u32("tokenizer.ggml.eos_token_id", vocab["<|im_end|>"])
    w.u32("tokenizer.ggml.padding_token_id", vocab["<|endoftext|>"])
    w.u32("tokenizer.ggml.bos_token_id", vocab["<|endoftext|>"])
    w.bool("tokenizer.ggml.add_bos_token", False)
    w.str("tokenizer.chat_template", CHAT_TEMPLATE)
    return n


def export(model, cfg, tokenizer_json_path, path, q8_0=True, name="strata-demo"):
    """model: the trained Qwen35MoE (train.py); cfg: its Config."""
    def t(x):
        return x.detach().float().cpu().numpy()

    w = GGUFWriter()
    a = "qwen35moe"
    w.str("general.architecture", a)
    w.str("general.name", name)
    w.u32("general.file_type", 7 if q8_0 else 0)
    w.u32("general.quantization_version", 2)
    w.u32(f"{a}.context_length", cfg.context_length)
    w.u32(f"{a}.embedding_length", cfg.d)
    w.u32(f"{a}.block_count", cfg.n_layer)
    w.u32(f"{a}.feed_forward_length", cfg.n_ff_shexp)
    w.u32(f"{a}.expert_feed_forward_length", cfg.n_ff_exp)
    w.u32(f"{a}.expert_shared_feed_forward_length", cfg.n_ff_shexp)
    w.u32(f"{a}.expert_count", cfg.n_expert)
    w.u32(f"{a}.expert_used_count", cfg.n_expert_used)
    w.u32(f"{a}.attention.head_count", cfg.n_head)
    w.u32(f"{a}.attention.head_count_kv", cfg.n_head_kv)
    w.u32(f"{a}.attention.key_length", cfg.head_dim)
    w.u32(f"{a}.attention.value_length", cfg.head_dim)
    w.f32(f"{a}.attention.layer_norm_rms_epsilon", cfg.eps)
    w.u32(f"{a}.rope.dimension_count", cfg.n_rot)
    w.arr(f"{a}.rope.dimension_sections", T_I32, cfg.rope_sections)
    w.f32(f"{a}.rope.freq_base", cfg.rope_base)
    w.u32(f"{a}.ssm.conv_kernel", cfg.conv_kernel)
    w.u32(f"{a}.ssm.state_size", cfg.dk)
    w.u32(f"{a}.ssm.group_count", cfg.n_k)
    w.u32(f"{a}.ssm.time_step_rank", cfg.n_v)
    w.u32(f"{a}.ssm.inner_size", cfg.n_v * cfg.dk)
    w.arr(f"{a}.attention.recurrent_layers", T_BOOL, [not cfg.is_full_attn(i) for i in range(cfg.n_layer)])
    w.u32(f"{a}.full_attention_interval", cfg.full_attn_interval)
    n_vocab = tokenizer_keys(w, tokenizer_json_path)
    assert n_vocab == cfg.vocab, (n_vocab, cfg.vocab)

    w.tensor("token_embd.weight", t(model.embed.weight), q8_0)
    w.tensor("output_norm.weight", t(model.norm.weight), False)
    for i, blk in enumerate(model.blocks):
        p = f"blk.{i}."
        w.tensor(p + "attn_norm.weight", t(blk.attn_norm.weight), False)
        w.tensor(p + "post_attention_norm.weight", t(blk.ffn_norm.weight), False)
        m = blk.mixer
        if cfg.is_full_attn(i):
            w.tensor(p + "attn_q.weight", t(m.wq.weight), q8_0)
            w.tensor(p + "attn_k.weight", t(m.wk.weight), q8_0)
            w.tensor(p + "attn_v.weight", t(m.wv.weight), q8_0)
            w.tensor(p + "attn_output.weight", t(m.wo.weight), q8_0)
            w.tensor(p + "attn_q_norm.weight", t(m.q_norm.weight), False)
            w.tensor(p + "attn_k_norm.weight", t(m.k_norm.weight), False)
        else:
            w.tensor(p + "attn_qkv.weight", t(m.in_qkv.weight), q8_0)
            w.tensor(p + "attn_gate.weight", t(m.in_z.weight), q8_0)
            w.tensor(p + "ssm_conv1d.weight", t(m.conv_w), False)
            w.tensor(p + "ssm_dt.bias", t(m.dt_bias), False)
            w.tensor(p + "ssm_a", -np.exp(t(m.A_log)), False)
            w.tensor(p + "ssm_beta.weight", t(m.in_b.weight), q8_0)
            w.tensor(p + "ssm_alpha.weight", t(m.in_a.weight), q8_0)
            w.tensor(p + "ssm_norm.weight", t(m.norm.weight), False)
            w.tensor(p + "ssm_out.weight", t(m.out.weight), q8_0)
        f = blk.ffn
        w.tensor(p + "ffn_gate_inp.weight", t(f.router.weight), False)
        w.tensor(p + "ffn_gate_exps.weight", t(f.gate_exps), q8_0)
        w.tensor(p + "ffn_up_exps.weight", t(f.up_exps), q8_0)
        w.tensor(p + "ffn_down_exps.weight", t(f.down_exps), q8_0)
        w.tensor(p + "ffn_gate_inp_shexp.weight", t(f.shexp_gate.weight).reshape(-1), False)
        w.tensor(p + "ffn_gate_shexp.weight", t(f.sh_gate.weight), q8_0)
        w.tensor(p + "ffn_up_shexp.weight", t(f.sh_up.weight), q8_0)
        w.tensor(p + "ffn_down_shexp.weight", t(f.sh_down.weight), q8_0)
    w.write(path)
