# SPDX-License-Identifier: Apache-2.0
"""Export a Qwen3-MoE model to GGUF with foresight.gguf_writer, in
llama.cpp's qwen3moe naming, so that foresightd serves its routed experts.

The plan (names, shapes, types) is pure Python: `plan(spec)` works without
torch and is what test_offline.py checks against the daemon's reader.
`export(model, spec, path)` fills it from a torch model (torch needed).

Expert tensors (foresightd's arena members), per block N, row-major:
    blk.N.ffn_gate_exps.weight  (E, F, D)   expert e's gate_proj weight
    blk.N.ffn_up_exps.weight    (E, F, D)   up_proj
    blk.N.ffn_down_exps.weight  (E, D, F)   down_proj
The daemon's blob for (N, e) is then [gate | up | down], each part on a
256-byte boundary: with F * D * itemsize a multiple of 256, gate and up are
adjacent, i.e. exactly the fused gate_up_proj[e] (2F, D) of transformers 5.
"""

import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "client", "python"))

from foresight import gguf_writer as gw  # noqa: E402

DTYPES = {"bfloat16": gw.BF16, "float16": gw.F16, "float32": gw.F32}


class Spec:
    """The model's sizes (what Qwen3MoeConfig says), independent of torch."""

    def __init__(self, layers=8, hidden=512, experts=32, top_k=4, moe_ff=256, vocab=4096, heads=8, kv_heads=4,
                 head_dim=64, dtype="bfloat16", name="foresight-torch-qwen3moe", rms_eps=1e-6, rope_theta=1e6,
                 context=4096):
        self.layers, self.hidden, self.experts, self.top_k = layers, hidden, experts, top_k
        self.moe_ff, self.vocab, self.heads, self.kv_heads, self.head_dim = moe_ff, vocab, heads, kv_heads, head_dim
        self.dtype, self.name, self.rms_eps, self.rope_theta, self.context = dtype, name, rms_eps, rope_theta, context

    def as_dict(self):
        return dict(self.__dict__)

    @property
    def itemsize(self):
        return 4 if self.dtype == "float32" else 2

    def fused_gate_up(self):
        """Whether gate and up sit back to back in the daemon's blob."""
        return self.moe_ff * self.hidden * self.itemsize % 256 == 0


def metadata(spec):
    a = "qwen3moe"
    return [
        ("general.architecture", gw.V_STR, a),
        ("general.name", gw.V_STR, spec.name),
        ("general.file_type", gw.V_U32, {"float32": 0, "float16": 1, "bfloat16": 32}[spec.dtype]),
        (a + ".block_count", gw.V_U32, spec.layers),
        (a + ".context_length", gw.V_U32, spec.context),
        (a + ".embedding_length", gw.V_U32, spec.hidden),
        (a + ".feed_forward_length", gw.V_U32, spec.moe_ff * 4),
        (a + ".attention.head_count", gw.V_U32, spec.heads),
        (a + ".attention.head_count_kv", gw.V_U32, spec.kv_heads),
        (a + ".attention.key_length", gw.V_U32, spec.head_dim),
        (a + ".attention.value_length", gw.V_U32, spec.head_dim),
        (a + ".attention.layer_norm_rms_epsilon", gw.V_F32, spec.rms_eps),
        (a + ".rope.freq_base", gw.V_F32, spec.rope_theta),
        (a + ".expert_count", gw.V_U32, spec.experts),
        (a + ".expert_used_count", gw.V_U32, spec.top_k),
        (a + ".expert_feed_forward_length", gw.V_U32, spec.moe_ff),
    ]


def plan(spec):
    """[(gguf name, row-major shape, ggml type, source key)]: every tensor
    of the file.  Source keys name what export() reads from the model:
    ("embed",), ("norm",), ("lm_head",), ("attn", layer, what),
    ("router", layer), ("experts", layer, "gate"|"up"|"down")."""
    t = DTYPES[spec.dtype]
    D, E, F, V = spec.hidden, spec.experts, spec.moe_ff, spec.vocab
    q, kv = spec.heads * spec.head_dim, spec.kv_heads * spec.head_dim
    out = [("token_embd.weight", (V, D), t, ("embed",))]
    for n in range(spec.layers):
        b = "blk.%d." % n
        out += [
            (b + "attn_norm.weight", (D,), gw.F32, ("attn", n, "input_layernorm")),
            (b + "attn_q.weight", (q, D), t, ("attn", n, "q_proj")),
            (b + "attn_k.weight", (kv, D), t, ("attn", n, "k_proj")),
            (b + "attn_v.weight", (kv, D), t, ("attn", n, "v_proj")),
            (b + "attn_output.weight", (D, q), t, ("attn", n, "o_proj")),
            (b + "attn_q_norm.weight", (spec.head_dim,), gw.F32, ("attn", n, "q_norm")),
            (b + "attn_k_norm.weight", (spec.head_dim,), gw.F32, ("attn", n, "k_norm")),
            (b + "ffn_norm.weight", (D,), gw.F32, ("attn", n, "post_attention_layernorm")),
            (b + "ffn_gate_inp.weight", (E, D), gw.F32, ("router", n)),
            (b + "ffn_gate_exps.weight", (E, F, D), t, ("experts", n, "gate")),
            (b + "ffn_up_exps.weight", (E, F, D), t, ("experts", n, "up")),
            (b + "ffn_down_exps.weight", (E, D, F), t, ("experts", n, "down")),
        ]
    out += [("output_norm.weight", (D,), gw.F32, ("norm",)), ("output.weight", (V, D), t, ("lm_head",))]
    return out


def write(spec, path, source):
    """Write the file; source(key, shape, ggml_type) returns the bytes of
    one tensor (called while writing, one tensor at a time)."""
    w = gw.GGUFWriter(path)
    for key, vt, v in metadata(spec):
        w.add(key, vt, v)
    for name, shape, ty, key in plan(spec):
        w.add_tensor(name, shape, ty, (lambda k=key, s=shape, t=ty: source(k, s, t)))
    return w.write()


# ---- from a torch model ----------------------------------------------------


def tensor_bytes(t, ggml_type):
    """A torch tensor as the bytes of ggml_type (F32 norms and routers are
    converted; the rest keep the model's dtype)."""
    import ctypes

    import torch

    want = {gw.F32: torch.float32, gw.F16: torch.float16, gw.BF16: torch.bfloat16}[ggml_type]
    t = t.detach().to("cpu", want).contiguous()
    return ctypes.string_at(t.data_ptr(), t.numel() * t.element_size())


def export(model, spec, path):
    """Export a transformers Qwen3-MoE model (qwen_moe.build) to GGUF."""
    import qwen_moe

    blocks = {layer: blk for layer, blk in qwen_moe.moe_blocks(model)}
    layers = qwen_moe.decoder_layers(model)

    def source(key, shape, ggml_type):
        kind = key[0]
        if kind == "embed":
            t = model.get_input_embeddings().weight
        elif kind == "lm_head":
            t = model.get_output_embeddings().weight
        elif kind == "norm":
            t = qwen_moe.final_norm(model).weight
        elif kind == "attn":
            layer, what = key[1], key[2]
            mod = layers[layer]
            if what in ("input_layernorm", "post_attention_layernorm"):
                t = getattr(mod, what).weight
            else:
                t = getattr(mod.self_attn, what).weight
        elif kind == "router":
            t = qwen_moe.router_weight(blocks[key[1]])
        elif kind == "experts":
            t = qwen_moe.expert_weights(blocks[key[1]])[key[2]]
        else:
            raise KeyError(key)
        if tuple(t.shape) != tuple(shape):
            raise ValueError("%r: the model has %r, the plan says %r" % (key, tuple(t.shape), shape))
        return tensor_bytes(t, ggml_type)

    return write(spec, path, source)
