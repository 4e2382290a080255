# SPDX-License-Identifier: Apache-2.0
"""A Qwen3-MoE model whose routed experts come from foresightd.

Engine(client, model) wraps every sparse MoE block of the model (its
forward is replaced; its router `gate` is kept and called as before).  Per
decode step (Engine.step(): one window, one held epoch):

  - the block's own router picks each token's experts (so routing is the
    stock model's, bit for bit);
  - router-ahead: the routers of the next `ahead` layers, applied to this
    layer's input on the GPU, predict their experts; the top ones are
    posted (fs_post_predict, horizon = distance), before any expert runs;
  - each routed expert, in ascending expert order (transformers' eager
    loop), is computed from
      * its slot, when the held epoch maps it on this GPU's card: the slot's
        device memory viewed as a bf16 tensor through DLPack, no copy (hit);
      * the arena otherwise (miss), either copied to the GPU and computed
        by the same kernels (miss_path="copy": the numbers are those of a
        hit, bit for bit) or computed on the CPU in the same dtype and
        order (miss_path="cpu": other kernels, so tokens are compared);
  - each use is posted (fs_post_usage, hit or miss).
The expert math is transformers 5's eager loop: gate, up = linear(x,
gate_up[e]).chunk(2); act(gate) * up; linear(., down[e]); times the routing
weight; index_add_ into the output, experts in ascending order.  The
daemon's blob [gate | up | down] holds gate_up[e] as one (2F, D) matrix when
gate and up are adjacent (export_gguf.Spec.fused_gate_up), so even the
matmul shapes are the stock ones.

When the daemon is gone every lookup misses and the CPU path carries on;
the library re-attaches by itself when a daemon returns.
"""

import types

import torch
import torch.nn.functional as F

import foresight
import qwen_moe


class Engine:
    """The served MoE blocks of one model.  install() once; connect(client)
    to a daemon (again after disconnect(), e.g. for another slot budget)."""

    def __init__(self, model, spec, device, ahead=2, ahead_extra=2, miss_path="copy", live=False,
                 wrap_predict=True):
        self.c = None
        self.model = model
        self.spec = spec
        self.device = torch.device(device)
        self.ahead = ahead
        self.k_pred = spec.top_k + ahead_extra
        self.miss_path = miss_path
        self.live = live
        self.window = 1
        self.view = None
        self.blocks = qwen_moe.moe_blocks(model)
        self.layers = len(self.blocks)
        self.cards, self.host_cards, self.home = [], [], 0
        self.parts = {}
        self._slot_cache = {}
        self._arena_cache = {}
        self._cache_attach = None
        self._installed = []
        self.reset_counters()
        self._ahead_w = {}
        routers = {layer: qwen_moe.router_weight(b).detach() for layer, b in self.blocks}
        order = [layer for layer, _ in self.blocks]
        for i, layer in enumerate(order):
            nxt = []
            for j in range(1, ahead + 1):
                if i + j < len(order):
                    nxt.append((order[i + j], j, 0))
                elif wrap_predict:  # the next token's first layers
                    nxt.append((order[(i + j) % len(order)], j, 1))
            if nxt:
                self._ahead_w[layer] = (nxt, torch.cat([routers[lyr] for lyr, _, _ in nxt], 0).contiguous())

    def connect(self, client):
        """Serve from this client's daemon from the next step on."""
        self.disconnect()
        self.c = client
        dev_index = None
        if self.device.type == "cuda":
            dev_index = self.device.index if self.device.index is not None else torch.cuda.current_device()
        # The cards whose slots live on our GPU (CUDA backend), and host
        # cards (host backend: slots in host memory, copied like a miss).
        self.cards = [i for i, cd in enumerate(client.cards) if cd.is_cuda and cd.device == dev_index]
        self.host_cards = [i for i, cd in enumerate(client.cards) if not cd.is_cuda]
        self.home = (self.cards or self.host_cards or [0])[0]
        self.parts = {}
        self._cache_attach = None
        self.reset_counters()

    def disconnect(self):
        """Drop every tensor viewing the client's memory (so its close
        detaches at once)."""
        self._slot_cache.clear()
        self._arena_cache.clear()
        self.c = None

    # ---- counters ------------------------------------------------------

    def reset_counters(self):
        self.hits = 0
        self.misses = 0
        self.predicted = 0
        self.miss_bytes = 0
        self.steps = 0

    def counters(self):
        used = self.hits + self.misses
        return {"hits": self.hits, "misses": self.misses, "hit_rate": self.hits / used if used else 0.0,
                "predictions": self.predicted, "miss_bytes": self.miss_bytes, "steps": self.steps}

    # ---- wrapping --------------------------------------------------------

    def install(self):
        """Replace every MoE block's forward (keeps the block's gate)."""
        for layer, blk in self.blocks:
            tup = _returns_tuple(blk, self.spec, self.device)
            eng = self

            def fwd(block_self, hidden_states, _layer=layer, _tup=tup, **kw):
                return eng.block_forward(_layer, block_self, hidden_states, _tup)

            blk.forward = types.MethodType(fwd, blk)
            self._installed.append(blk)

    def uninstall(self):
        for blk in self._installed:
            if "forward" in blk.__dict__:
                del blk.forward
        self._installed = []

    # ---- one decode step = one window, one epoch ---------------------------

    def begin(self, tokens):
        w = self.window
        self.c.window_begin(w, tokens)
        self.view = self.c.acquire()
        ac = self.c.attach_count
        if ac != self._cache_attach:  # a new daemon: new pools, new arena
            self._slot_cache.clear()
            self._arena_cache.clear()
            self._cache_attach = ac

    def end(self):
        # Kernels reading slots must finish before the epoch is released:
        # the daemon may reuse a slot once no held epoch maps it.
        if self.device.type == "cuda":
            torch.cuda.synchronize(self.device)
        self.c.window_end(self.window)
        self.view.release()
        self.view = None
        self.window += 1
        self.steps += 1

    def step(self, tokens):
        return _Step(self, tokens)

    # ---- the block -----------------------------------------------------------

    def block_forward(self, layer, block, hidden_states, returns_tuple):
        shape = hidden_states.shape
        x = hidden_states.reshape(-1, shape[-1])
        logits, weights, index = _route(block, x)
        self._predict(layer, x)
        out = self._experts(layer, block, x, index, weights)
        out = out.reshape(shape)
        return (out, logits) if returns_tuple else out

    def _predict(self, layer, x):
        ent = self._ahead_w.get(layer)
        if ent is None or self.view is None:
            return
        nxt, w = ent
        E = self.spec.experts
        probs = F.softmax(F.linear(x, w).float().view(x.shape[0], len(nxt), E), dim=-1).mean(0)
        score, idx = torch.topk(probs, min(self.k_pred, E), dim=-1)
        score, idx = score.tolist(), idx.tolist()
        for (lyr, horizon, wrap), es, ss in zip(nxt, idx, score):
            for e, s in zip(es, ss):
                if self.c.post_predict(self.window + wrap, lyr, e, score=s, horizon=horizon, card=self.home):
                    self.predicted += 1

    def _experts(self, layer, block, x, top_k_index, top_k_weights):
        final = torch.zeros_like(x)
        mask = F.one_hot(top_k_index, num_classes=self.spec.experts).permute(2, 1, 0)
        act = qwen_moe.act_fn(block)
        for e in sorted(set(top_k_index.flatten().tolist())):
            top_k_pos, token_idx = torch.where(mask[e])
            cur = x[token_idx]
            w, hit, card = self._weights(layer, e)
            if w is None:  # miss, computed on the CPU
                h = self._cpu_expert(layer, e, cur, act)
            else:
                gate_up, down = w
                gate, up = F.linear(cur, gate_up).chunk(2, dim=-1)
                h = F.linear(act(gate) * up, down)
            h = h * top_k_weights[token_idx, top_k_pos, None]
            final.index_add_(0, token_idx, h.to(final.dtype))
            self.c.post_usage(self.window, layer, e, hit=hit, card=card)
            if hit:
                self.hits += 1
            else:
                self.misses += 1
        return final

    # ---- where an expert's weights come from -----------------------------------

    def _parts(self, layer, e):
        p = self.parts.get(layer)
        if p is None:
            ps = self.c.arena_parts(layer, e)
            byrole = {q.role: q for q in ps if q.what == foresight.WHAT_WEIGHT}
            g, u, d = byrole[foresight.ROLE_GATE], byrole[foresight.ROLE_UP], byrole[foresight.ROLE_DOWN]
            for q in (g, u, d):
                if q.dtype != self.spec.dtype:
                    raise RuntimeError("layer %d %s: %s in the arena, the model runs %s" % (layer, q.name, q.dtype,
                                                                                          self.spec.dtype))
            p = self.parts[layer] = (g, u, d)
        return p

    def _split(self, flat, layer, e):
        """(gate_up (2F, D), down (D, F)) views of a blob's flat tensor."""
        g, u, d = self._parts(layer, e)
        item = flat.element_size()
        if u.offset == g.offset + g.bytes:  # adjacent: gate_up[e] as one matrix
            gate_up = flat[g.offset // item:(u.offset + u.bytes) // item].view(2 * g.shape[0], g.shape[1])
        else:
            gate_up = torch.cat([flat[g.offset // item:(g.offset + g.bytes) // item].view(g.shape),
                                 flat[u.offset // item:(u.offset + u.bytes) // item].view(u.shape)])
        down = flat[d.offset // item:(d.offset + d.bytes) // item].view(d.shape)
        return gate_up, down

    def _weights(self, layer, e):
        """((gate_up, down) on the GPU, hit, card), or (None, False, card)
        for a miss computed on the CPU."""
        v = self.view
        for card in self.cards + self.host_cards:
            s = (v.lookup_live if self.live else v.lookup)(card, layer, e) if v is not None else None
            if s is None:
                continue
            if s.is_cuda:
                # A slot keeps its bytes while its generation stands: its
                # tensors are made once per (slot, generation).
                ent = self._slot_cache.get((card, s.slot))
                if ent is None or ent[0] != (s.gen, s.device, layer, e):
                    flat = torch.from_dlpack(s.dlpack(self.spec.dtype, (s.nbytes // self.spec.itemsize,)))
                    ent = self._slot_cache[(card, s.slot)] = ((s.gen, s.device, layer, e), self._split(flat, layer, e))
                return ent[1], True, card
            # host backend: host memory, copied like a miss but counted a hit
            flat = torch.from_dlpack(s.dlpack(self.spec.dtype, (s.nbytes // self.spec.itemsize,)))
            return tuple(t.to(self.device) for t in self._split(flat, layer, e)), True, card
        self.miss_bytes += self._blob(layer, e)[0].numel() * self.spec.itemsize
        if self.miss_path == "cpu":
            return None, False, self.home
        gate_up, down = self._arena_split(layer, e)
        return (gate_up.to(self.device), down.to(self.device)), False, self.home

    def _blob(self, layer, e):
        b = self._arena_cache.get((layer, e))
        if b is None:
            blob = self.c.arena_expert(layer, e)
            flat = torch.from_dlpack(blob.dlpack(self.spec.dtype, (blob.nbytes // self.spec.itemsize,)))
            b = self._arena_cache[(layer, e)] = (flat,)
        return b

    def _arena_split(self, layer, e):
        return self._split(self._blob(layer, e)[0], layer, e)

    def _cpu_expert(self, layer, e, cur, act):
        gate_up, down = self._arena_split(layer, e)
        gate, up = F.linear(cur.cpu(), gate_up).chunk(2, dim=-1)
        return F.linear(act(gate) * up, down).to(cur.device)


class _Step:
    def __init__(self, eng, tokens):
        self.eng, self.tokens = eng, tokens

    def __enter__(self):
        self.eng.begin(self.tokens)
        return self.eng

    def __exit__(self, *exc):
        self.eng.end()
        return False


def _route(block, x):
    """(router logits (T, E), routing weights (T, k), expert indices (T, k))
    from the block's own gate, as its stock forward computes them."""
    out = block.gate(x)
    if isinstance(out, torch.Tensor):  # transformers 4.x: an nn.Linear gate
        logits = out
        w = F.softmax(logits, dim=1, dtype=torch.float)
        w, idx = torch.topk(w, block.top_k, dim=-1)
        if getattr(block, "norm_topk_prob", False):
            w /= w.sum(dim=-1, keepdim=True)
        return logits, w.to(x.dtype), idx
    # transformers 5: (logits, weights, indices); told apart by dtype and
    # width, in case the order changes: logits are E wide, the rest k.
    E = qwen_moe.router_weight(block).shape[0]
    ints = [t for t in out if isinstance(t, torch.Tensor) and not t.is_floating_point()]
    flts = [t for t in out if isinstance(t, torch.Tensor) and t.is_floating_point()]
    if len(ints) != 1 or len(flts) != 2:
        raise RuntimeError("unexpected router output: %r" % ([getattr(t, "shape", t) for t in out],))
    idx = ints[0]
    wide = [t for t in flts if t.shape[-1] == E]
    logits = wide[0] if len(wide) == 1 or idx.shape[-1] != E else flts[0]
    weights = flts[1] if logits is flts[0] else flts[0]
    if weights.shape[-1] == E and idx.shape[-1] != E:  # dense (T, E) scores: the routed ones, in idx order
        weights = weights.gather(-1, idx)
    return logits, weights, idx


def _returns_tuple(block, spec, device):
    """Whether the block's stock forward returns (hidden, router_logits)
    (transformers 4.x) or the hidden states alone (5.x)."""
    with torch.no_grad():
        x = torch.zeros(1, 1, spec.hidden, device=device, dtype=getattr(torch, spec.dtype))
        return isinstance(block(x), tuple)


