# SPDX-License-Identifier: Apache-2.0
"""served.Engine on the CPU against a host-backend foresightd, with a small
stand-in for transformers' Qwen3-MoE (a TopKRouter `gate` returning
(logits, weights, indices) and fused Qwen3MoeExperts-style weights, the
transformers 5 layout).  Needs torch (not transformers); skipped, with a
line saying so, where torch is not installed."""

import os
import shutil
import sys
import tempfile
import types
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.normpath(os.path.join(HERE, "..", ".."))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(ROOT, "client", "python"))
sys.path.insert(0, os.path.join(ROOT, "client", "python", "tests"))

try:
    import torch
    import torch.nn as nn
    import torch.nn.functional as F
except ImportError:
    torch = None

if torch is not None:

    class TopKRouter(nn.Module):
        def __init__(self, E, D, k):
            super().__init__()
            self.top_k, self.weight = k, nn.Parameter(torch.zeros(E, D))

        def forward(self, h):
            logits = F.linear(h, self.weight)
            p = F.softmax(logits, dtype=torch.float, dim=-1)
            w, idx = torch.topk(p, self.top_k, dim=-1)
            w /= w.sum(dim=-1, keepdim=True)
            return logits, w.to(logits.dtype), idx

    class Experts(nn.Module):
        def __init__(self, E, D, Fh):
            super().__init__()
            self.num_experts = E
            self.gate_up_proj = nn.Parameter(torch.zeros(E, 2 * Fh, D))
            self.down_proj = nn.Parameter(torch.zeros(E, D, Fh))
            self.act_fn = F.silu

        def forward(self, x, top_k_index, top_k_weights):  # transformers 5's eager loop
            final = torch.zeros_like(x)
            mask = F.one_hot(top_k_index, num_classes=self.num_experts).permute(2, 1, 0)
            hit = torch.greater(mask.sum(dim=(-1, -2)), 0).nonzero()
            for e in hit:
                e = e[0]
                pos, tok = torch.where(mask[e])
                gate, up = F.linear(x[tok], self.gate_up_proj[e]).chunk(2, dim=-1)
                h = F.linear(self.act_fn(gate) * up, self.down_proj[e]) * top_k_weights[tok, pos, None]
                final.index_add_(0, tok, h.to(final.dtype))
            return final

    class FakeSparseMoeBlock(nn.Module):
        def __init__(self, E, D, Fh, k):
            super().__init__()
            self.gate, self.experts = TopKRouter(E, D, k), Experts(E, D, Fh)

        def forward(self, hidden):
            b, s, d = hidden.shape
            x = hidden.view(-1, d)
            _, w, idx = self.gate(x)
            return self.experts(x, idx, w).reshape(b, s, d)

    class Layer(nn.Module):
        def __init__(self, E, D, Fh, k):
            super().__init__()
            self.mlp = FakeSparseMoeBlock(E, D, Fh, k)

        def forward(self, x):
            h = x * torch.rsqrt(x.float().pow(2).mean(-1, keepdim=True) + 1e-6).to(x.dtype)
            return x + self.mlp(h)

    class FakeLM(nn.Module):
        """Embedding, MoE layers, head; no attention: each step sees its own tokens."""

        def __init__(self, spec):
            super().__init__()
            self.model = nn.Module()
            self.model.embed = nn.Embedding(spec.vocab, spec.hidden)
            self.model.layers = nn.ModuleList(
                [Layer(spec.experts, spec.hidden, spec.moe_ff, spec.top_k) for _ in range(spec.layers)])
            self.lm_head = nn.Linear(spec.hidden, spec.vocab, bias=False)

        def forward(self, input_ids, past_key_values=None, use_cache=True):
            x = self.model.embed(input_ids)
            for layer in self.model.layers:
                x = layer(x)
            return types.SimpleNamespace(logits=self.lm_head(x), past_key_values=None)


@unittest.skipIf(torch is None, "torch is not installed")
class ServedOnCPU(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        import export_gguf
        import qwen_moe

        cls.dir = tempfile.mkdtemp(prefix="fs-torch-cpu-")
        cls.spec = spec = export_gguf.Spec(layers=3, hidden=64, experts=8, top_k=2, moe_ff=32, vocab=128, heads=2,
                                           kv_heads=1, head_dim=32, name="cpu-fake-qwen3moe")
        torch.manual_seed(0)
        m = FakeLM(spec)
        qwen_moe.reinit(m, 0, spec)
        cls.model = m.to(torch.bfloat16).eval()
        blocks = dict(qwen_moe.moe_blocks(cls.model))
        assert sorted(blocks) == [0, 1, 2]

        def source(key, shape, ty):
            if key[0] == "experts":
                t = qwen_moe.expert_weights(blocks[key[1]])[key[2]]
            elif key[0] == "router":
                t = qwen_moe.router_weight(blocks[key[1]])
            else:
                return bytes(export_gguf.gw.tensor_bytes(ty, shape))
            assert tuple(t.shape) == tuple(shape), (key, t.shape, shape)
            return export_gguf.tensor_bytes(t, ty)

        cls.gguf = os.path.join(cls.dir, "m.gguf")
        export_gguf.write(spec, cls.gguf, source)

    @classmethod
    def tearDownClass(cls):
        shutil.rmtree(cls.dir, ignore_errors=True)

    def test_served_tokens_and_bits_equal_stock(self):
        import foresight
        import fsd
        import qwen_moe
        import run
        import served

        a = run.parse_args(["--tokens", "12", "--prompt-len", "5", "--vocab", "128", "--device", "cpu"])
        prompt = run.make_prompt(a, "cpu")
        toks, logits, t = run.greedy(self.model, prompt, a.tokens)
        ref = {"tokens": toks, "logits": logits, "tok_s": a.tokens / t}
        eng = served.Engine(self.model, self.spec, "cpu", ahead=2, ahead_extra=1)
        eng.install()
        for _, blk in eng.blocks:
            qwen_moe.drop_gpu_experts(blk)
        try:
            rows = []
            for slots, miss_path in ((4, "copy"), (64, "copy"), (4, "cpu")):
                d = fsd.Daemon("--model", self.gguf, "--allow-unlocked", "--slots", slots, "--cards", 1).start()
                try:
                    c = foresight.Client(socket=d.sock, name="cpu-torch", model=self.spec.name)
                    eng.miss_path = miss_path
                    eng.connect(c)
                    for p in (1, 2):
                        row = run.served_pass(a, self.model, prompt, ref, eng, c, "cpu %d %s" % (slots, miss_path))
                        row.update(slots=slots, p=p, miss_path=miss_path)
                        rows.append(row)
                        self.assertTrue(row["tokens"], row)
                        if miss_path == "copy":
                            self.assertTrue(row["bits"], "slot and arena paths run the stock kernels: %r" % row)
                        # Decode steps use top_k experts per layer; the prompt step 2..2*5.
                        used = row["hits"] + row["misses"]
                        self.assertTrue(a.tokens * 3 * 2 + 3 * 2 <= used <= a.tokens * 3 * 2 + 3 * 10, used)
                        self.assertGreater(row["predictions"], 0)
                    eng.disconnect()
                    c.close()
                    self.assertEqual(c.exports, 0)
                finally:
                    d.cleanup()
            big = [r for r in rows if r["slots"] == 64 and r["p"] == 2][0]
            self.assertGreater(big["hits"], 0, rows)
            print("\n".join("slots %(slots)d %(miss_path)s pass %(p)d: hits %(hits)d misses %(misses)d "
                            "bits %(bits)s" % r for r in rows), file=sys.stderr)
        finally:
            eng.uninstall()

    def test_dlpack_into_torch(self):
        import foresight
        import fsd

        d = fsd.Daemon("--model", self.gguf, "--allow-unlocked", "--slots", 8, "--cards", 1).start()
        try:
            with foresight.Client(socket=d.sock, name="cpu-dlpack") as c:
                blob = c.arena_expert(1, 3)
                t = torch.from_dlpack(blob.dlpack("bfloat16"))
                self.assertEqual(t.dtype, torch.bfloat16)
                self.assertEqual(t.data_ptr(), blob.ptr)
                self.assertEqual(t.numel() * 2, blob.nbytes)
                self.assertEqual(c.exports, 1)
                g = c.arena_parts(1, 3)[0]
                self.assertEqual(t[g.offset // 2:(g.offset + g.bytes) // 2].view(g.shape).shape, g.shape)
                del t
                self.assertEqual(c.exports, 0, "torch called the deleter")
        finally:
            d.cleanup()


if __name__ == "__main__":
    unittest.main()
