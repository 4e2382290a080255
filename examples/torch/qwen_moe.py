# SPDX-License-Identifier: Apache-2.0
"""A transformers Qwen3-MoE model with seeded random weights, and where its
MoE pieces are, whatever the transformers version calls them.

transformers 5 keeps a layer's experts fused (Qwen3MoeExperts:
gate_up_proj (E, 2F, D) with gate rows first, down_proj (E, D, F)) behind a
Qwen3MoeTopKRouter `gate` returning (logits, weights, indices); 4.x kept a
ModuleList of Qwen3MoeMLP and an nn.Linear gate.  Blocks are found by type
name ("SparseMoe") and read through `gate` and `experts`, so either works.
Nothing is downloaded.
"""

import re


def build(spec, seed=0, device="cuda", attn="sdpa"):
    """Qwen3MoeForCausalLM of `spec` (export_gguf.Spec), weights drawn from a
    seeded generator (identical in every process), on `device` in
    spec.dtype, eval mode, experts forced to transformers' eager loop."""
    import torch
    from transformers import Qwen3MoeConfig, Qwen3MoeForCausalLM

    kw = dict(vocab_size=spec.vocab, hidden_size=spec.hidden, intermediate_size=spec.moe_ff * 4,
              moe_intermediate_size=spec.moe_ff, num_hidden_layers=spec.layers, num_attention_heads=spec.heads,
              num_key_value_heads=spec.kv_heads, head_dim=spec.head_dim, num_experts=spec.experts,
              num_experts_per_tok=spec.top_k, norm_topk_prob=True, decoder_sparse_step=1, mlp_only_layers=[],
              max_position_embeddings=spec.context, rms_norm_eps=spec.rms_eps, tie_word_embeddings=False,
              output_router_logits=False, use_cache=True)
    try:
        cfg = Qwen3MoeConfig(attn_implementation=attn, **kw)
    except TypeError:
        cfg = Qwen3MoeConfig(**kw)
    torch.manual_seed(seed)
    model = Qwen3MoeForCausalLM(cfg)
    reinit(model, seed, spec)
    model.to(device=device, dtype=getattr(torch, spec.dtype)).eval()
    rope = getattr(cfg, "rope_theta", None) or (getattr(cfg, "rope_parameters", None) or {}).get("rope_theta")
    if rope:
        spec.rope_theta = float(rope)
    return model


def reinit(model, seed, spec):
    """Every parameter from one seeded generator, in name order: norms 1,
    routers N(0, (2/sqrt(D))^2) (peaked routing), the rest N(0, 0.02^2)."""
    import torch

    g = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for name, p in sorted(model.named_parameters(), key=lambda kv: kv[0]):
            if p.dim() == 1 or name.endswith("norm.weight"):
                p.fill_(1.0)
                continue
            std = 0.02
            if re.search(r"\.gate\.weight$", name) or name.endswith("mlp.gate.weight"):
                std = 2.0 / spec.hidden ** 0.5
            p.copy_(torch.randn(p.shape, generator=g, dtype=torch.float32) * std)


def force_eager_experts(model):
    """Make transformers run its per-expert eager loop (the order our
    served block reproduces); returns the implementation in force."""
    seen = set()
    for m in model.modules():
        c = getattr(m, "config", None)
        if c is None or id(c) in seen:
            continue
        seen.add(id(c))
        if hasattr(c, "_experts_implementation"):
            try:
                c._experts_implementation = "eager"
            except Exception:
                pass
    fn = getattr(model, "set_experts_implementation", None)
    if callable(fn):
        try:
            fn("eager")
        except Exception:
            pass
    return getattr(model.config, "_experts_implementation", "eager (no dispatch in this transformers)")


def moe_blocks(model):
    """[(layer index, block)] for every sparse MoE block, in layer order."""
    out = []
    for name, m in model.named_modules():
        if "SparseMoe" in type(m).__name__:
            hit = re.search(r"layers\.(\d+)\.", name + ".")
            if hit is None:
                raise RuntimeError("MoE block %s: no layer index in its name" % name)
            out.append((int(hit.group(1)), m))
    if not out:
        raise RuntimeError("no sparse MoE block (type name containing 'SparseMoe') in the model")
    return sorted(out, key=lambda x: x[0])


def decoder_layers(model):
    base = getattr(model, "model", model)
    return list(base.layers)


def final_norm(model):
    return getattr(model, "model", model).norm


def router_weight(block):
    """(E, D)"""
    return block.gate.weight


def expert_weights(block):
    """{"gate": (E, F, D), "up": (E, F, D), "down": (E, D, F)} views of the
    block's expert weights, whichever layout holds them."""
    import torch

    ex = block.experts
    if hasattr(ex, "gate_up_proj"):
        gu, dn = ex.gate_up_proj, ex.down_proj
        if getattr(ex, "is_transposed", False):  # (E, D, 2F) and (E, F, D)
            gu, dn = gu.transpose(1, 2), dn.transpose(1, 2)
        f = gu.shape[1] // 2
        if getattr(ex, "is_concatenated", True):
            gate, up = gu[:, :f, :], gu[:, f:, :]
        else:  # interleaved rows: gate0, up0, gate1, ...
            gate, up = gu[:, 0::2, :], gu[:, 1::2, :]
        return {"gate": gate, "up": up, "down": dn}
    mlps = list(ex)
    return {
        "gate": torch.stack([m.gate_proj.weight for m in mlps]),
        "up": torch.stack([m.up_proj.weight for m in mlps]),
        "down": torch.stack([m.down_proj.weight for m in mlps]),
    }


def act_fn(block):
    import torch.nn.functional as F

    ex = block.experts
    fn = getattr(ex, "act_fn", None)
    if fn is None and len(getattr(ex, "_modules", {})):
        first = next(iter(ex.children()), None)
        fn = getattr(first, "act_fn", None)
    return fn or F.silu


def drop_gpu_experts(block):
    """Free the block's expert weights on the GPU (the served model reads
    experts from foresightd only; any stray use of these now fails)."""
    import torch

    ex = block.experts
    for name, p in list(ex.named_parameters()):
        p.data = torch.empty(0, dtype=p.dtype, device=p.device)
