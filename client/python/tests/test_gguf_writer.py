# SPDX-License-Identifier: Apache-2.0
"""foresight.gguf_writer against the project's C reader (fs-gguf-dump,
foresightd --describe) and a daemon serving what it wrote."""

import hashlib
import json
import os
import shutil
import subprocess
import tempfile
import unittest

import foresight
from foresight import gguf_writer as gw

import fsd

L, E, K, D, F = 3, 4, 2, 64, 32


def det_bytes(name, n):
    """Deterministic bytes for a tensor (no numpy needed)."""
    out = bytearray()
    i = 0
    while len(out) < n:
        out += hashlib.sha256(("%s/%d" % (name, i)).encode()).digest()
        i += 1
    return bytes(out[:n])


def write_model(path, version=3, alignment=32, name="py-writer-test"):
    w = gw.GGUFWriter(path, alignment=alignment, version=version)
    w.add_str("general.architecture", "qwen3moe")
    w.add_str("general.name", name)
    w.add_u32("qwen3moe.block_count", L)
    w.add_u32("qwen3moe.embedding_length", D)
    w.add_u32("qwen3moe.expert_feed_forward_length", F)
    w.add_u32("qwen3moe.expert_count", E)
    w.add_u32("qwen3moe.expert_used_count", K)
    w.add_f32("qwen3moe.attention.layer_norm_rms_epsilon", 1e-6)
    w.add_array("tokenizer.ggml.tokens", gw.V_STR, ["a", "b"])
    data = {}

    def add(name, shape, ty):
        n = gw.tensor_bytes(ty, shape)
        data[name] = det_bytes(name, n)
        w.add_tensor(name, shape, ty, data[name] if len(data) % 2 else (lambda b=data[name]: b))

    add("token_embd.weight", (16, D), gw.F32)
    for layer in range(L):
        add("blk.%d.attn_norm.weight" % layer, (D,), gw.F32)
        add("blk.%d.ffn_gate_inp.weight" % layer, (E, D), gw.F32)
        add("blk.%d.ffn_gate_exps.weight" % layer, (E, F, D), gw.BF16)
        add("blk.%d.ffn_up_exps.weight" % layer, (E, F, D), gw.BF16)
        add("blk.%d.ffn_down_exps.weight" % layer, (E, D, F), gw.BF16)
    add("output_norm.weight", (D,), gw.F32)
    start = w.write()
    return w, data, start


class WriterUnit(unittest.TestCase):
    def test_refuses_what_the_reader_would(self):
        w = gw.GGUFWriter(os.devnull)
        w.add_u32("a.b", 1)
        with self.assertRaises(gw.GGUFError):
            w.add_u32("a.b", 2)
        with self.assertRaises(gw.GGUFError):
            w.add_tensor("t", (2, 3), gw.F32, b"\0" * 23)
        with self.assertRaises(gw.GGUFError):
            w.add_tensor("q", (2, 31), gw.Q8_0, b"")
        with self.assertRaises(gw.GGUFError):
            w.add_tensor("x" * 64, (1,), gw.F32, b"\0" * 4)
        with self.assertRaises(gw.GGUFError):
            gw.GGUFWriter(os.devnull, alignment=48)
        self.assertEqual(gw.tensor_bytes(gw.Q8_0, (3, 64)), 3 * 2 * 34)
        self.assertEqual(gw.tensor_bytes(gw.BF16, (4, 8, 16)), 4 * 8 * 16 * 2)


class WriterAgainstCReader(unittest.TestCase):
    def setUp(self):
        self.dir = tempfile.mkdtemp(prefix="fs-py-gguf-")

    def tearDown(self):
        shutil.rmtree(self.dir, ignore_errors=True)

    def check_dump(self, path, w, start):
        out = subprocess.run([fsd.gguf_dump(), path], check=True, capture_output=True, text=True).stdout
        tensors = {}
        kv = {}
        for line in out.splitlines():
            f = line.split(" ")
            if f[0] == "tensor":
                tensors[f[1]] = (int(f[2]), f[3], int(f[4]))
            elif f[0] == "kv":
                kv[f[1]] = f[3] if len(f) > 3 else None
        want = {name: (ty, ",".join(str(x) for x in ne), start + off) for name, ne, ty, _, off in w.tensors()}
        self.assertEqual(tensors, want)
        self.assertEqual(kv["general.architecture"], "qwen3moe")
        self.assertEqual(kv["qwen3moe.expert_count"], str(E))

    def test_dump_and_describe(self):
        for version, alignment in ((3, 32), (2, 64)):
            path = os.path.join(self.dir, "v%d-a%d.gguf" % (version, alignment))
            w, _, start = write_model(path, version, alignment)
            self.assertEqual(start % alignment, 0)
            self.check_dump(path, w, start)
            r = subprocess.run([fsd.foresightd(), "--model", path, "--describe"], capture_output=True, text=True)
            self.assertEqual(r.returncode, 0, r.stderr)
            desc = json.loads(r.stdout)
            self.assertEqual(desc["architecture"], "qwen3moe")
            self.assertEqual(desc["name"], "py-writer-test")
            self.assertEqual((desc["layers"], desc["moe_layers"], desc["experts"], desc["experts_used"]),
                             (L, L, E, K))
            self.assertEqual(desc["experts_from"], "metadata")
            roles = [(p["role"], p["type"], p["shape"]) for p in desc["parts"][0]["parts"]]
            self.assertEqual(roles, [("gate", "BF16", [D, F]), ("up", "BF16", [D, F]), ("down", "BF16", [F, D])])

    def test_served_by_foresightd(self):
        path = os.path.join(self.dir, "m.gguf")
        _, data, _ = write_model(path)
        d = fsd.Daemon("--model", path, "--allow-unlocked", "--slots", 8, "--cards", 1, "--tiers", 0).start()
        try:
            with foresight.Client(socket=d.sock, name="py-gguf", model="py-writer-test") as c:
                m = c.model
                self.assertEqual((m.layers, m.experts, m.experts_used, m.name), (L, E, K, "py-writer-test"))
                nb = F * D * 2
                for layer in range(L):
                    for e in range(E):
                        parts = c.arena_parts(layer, e)
                        self.assertEqual([p.name for p in parts], ["gate.weight", "up.weight", "down.weight"])
                        self.assertEqual([p.dtype for p in parts], ["bfloat16"] * 3)
                        self.assertEqual([p.shape for p in parts], [(F, D), (F, D), (D, F)])
                        blob = c.arena_expert(layer, e).tobytes()
                        for p, role in zip(parts, ("gate", "up", "down")):
                            src = data["blk.%d.ffn_%s_exps.weight" % (layer, role)][e * nb:(e + 1) * nb]
                            self.assertEqual(p.bytes, nb)
                            self.assertEqual(blob[p.offset:p.offset + p.bytes], src, (layer, e, role))
                # The same bytes through a slot.
                with c.window(1):
                    c.post_predict(1, 2, 3, card=0)
                v = fsd.wait_for(lambda: (lambda v: v if v.lookup(0, 2, 3) else v.release())(c.acquire()), 10)
                self.assertIsNotNone(v, "the predicted expert never landed")  # one card: it lands there
                with v:
                    s = v.lookup(0, 2, 3)
                    down = c.arena_parts(2, 3)[2]
                    got = bytes(s.memoryview()[down.offset:down.offset + down.bytes])
                    self.assertEqual(got, data["blk.2.ffn_down_exps.weight"][3 * nb:4 * nb])
            # A model name the daemon does not serve is refused with a message.
            with self.assertRaises(foresight.ConnectError) as cm:
                foresight.Client(socket=d.sock, model="some-other-model")
            self.assertIn("some-other-model", str(cm.exception))
        finally:
            d.cleanup()


if __name__ == "__main__":
    unittest.main()
