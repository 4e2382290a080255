# SPDX-License-Identifier: Apache-2.0
"""What of the torch example runs without torch: the GGUF plan and writer
against foresightd's reader, the report, the driver's options, and that
every module compiles.  (The GPU run itself: gpu_run.sh.)"""

import hashlib
import json
import os
import py_compile
import subprocess
import sys
import tempfile
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.normpath(os.path.join(HERE, "..", ".."))
sys.path.insert(0, HERE)

import export_gguf  # noqa: E402
import report  # noqa: E402
import run  # noqa: E402


def tool(env, rel):
    return os.environ.get(env) or os.path.join(ROOT, "build", rel)


class Offline(unittest.TestCase):
    def test_modules_compile(self):
        for f in ("served.py", "qwen_moe.py", "run.py", "export_gguf.py", "report.py"):
            with tempfile.TemporaryDirectory() as d:
                py_compile.compile(os.path.join(HERE, f), cfile=os.path.join(d, f + "c"), doraise=True)

    def test_default_spec_keeps_gate_up_fused(self):
        s = export_gguf.Spec()
        self.assertTrue(s.fused_gate_up(), "the default model's blob holds gate_up[e] as one matrix")
        self.assertEqual((s.layers, s.hidden, s.experts, s.top_k, s.moe_ff), (8, 512, 32, 4, 256))
        names = [t[0] for t in export_gguf.plan(s)]
        self.assertEqual(len(names), len(set(names)))
        self.assertIn("blk.7.ffn_down_exps.weight", names)

    def test_plan_is_what_foresightd_reads(self):
        spec = export_gguf.Spec(layers=2, hidden=64, experts=4, top_k=2, moe_ff=32, vocab=64, heads=2, kv_heads=1,
                                head_dim=32, name="offline-test")
        data = {}

        def source(key, shape, ty):
            n = export_gguf.gw.tensor_bytes(ty, shape)
            b = bytearray()
            while len(b) < n:
                b += hashlib.sha256(repr((key, len(b))).encode()).digest()
            data[key] = bytes(b[:n])
            return data[key]

        with tempfile.TemporaryDirectory() as d:
            path = os.path.join(d, "m.gguf")
            export_gguf.write(spec, path, source)
            r = subprocess.run([tool("FORESIGHTD", "daemon/foresightd"), "--model", path, "--describe"],
                               capture_output=True, text=True)
            self.assertEqual(r.returncode, 0, r.stderr)
            desc = json.loads(r.stdout)
            self.assertEqual((desc["architecture"], desc["name"]), ("qwen3moe", "offline-test"))
            self.assertEqual((desc["layers"], desc["experts"], desc["experts_used"]), (2, 4, 2))
            parts = desc["parts"][1]["parts"]
            self.assertEqual([(p["role"], p["type"], p["shape"]) for p in parts],
                             [("gate", "BF16", [64, 32]), ("up", "BF16", [64, 32]), ("down", "BF16", [32, 64])])
            self.assertEqual(parts[1]["offset"], parts[0]["offset"] + parts[0]["bytes"], "gate and up adjacent")
            left = {x["name"]: x["why"] for x in desc["left_out"]}
            self.assertEqual(left["blk.0.ffn_gate_inp.weight"], "router")
            self.assertEqual(len(left) + 3 * spec.layers, len(export_gguf.plan(spec)))
            dump = subprocess.run([tool("FS_GGUF_DUMP", "tools/gguf/fs-gguf-dump"), path], capture_output=True,
                                  text=True, check=True).stdout
            tensors = [ln.split()[1] for ln in dump.splitlines() if ln.startswith("tensor ")]
            self.assertEqual(tensors, [t[0] for t in export_gguf.plan(spec)])

    def test_report(self):
        self.assertIsNone(report.first_difference([1, 2, 3], [1, 2, 3]))
        self.assertEqual(report.first_difference([1, 2, 3], [1, 5, 3]), 1)
        self.assertEqual(report.first_difference([1, 2], [1, 2, 3]), 2)
        rows = [{"mode": "stock", "tok_s": 100.0, "vs_stock": 1.0},
                {"mode": "budgets", "slots": 16, "pass": 1, "tokens": True, "bits": True, "hit_rate": 0.25,
                 "tok_s": 50.0, "vs_stock": 0.5}]
        t = report.table(rows)
        self.assertIn("| budgets | 16 | 1 | yes | yes | 25.0 % |", t)
        self.assertEqual(report.verdict(rows)[0], True)
        rows.append({"mode": "restart", "slots": 64, "pass": "after", "tokens": False})
        ok, why = report.verdict(rows)
        self.assertFalse(ok)
        self.assertIn("restart/64/after", why)
        self.assertFalse(report.verdict([{"mode": "stock"}])[0], "no served run is not a pass")

    def test_driver_options(self):
        a = run.parse_args(["--out", "/tmp/x", "--budgets", "8,16"])
        self.assertEqual(a.backend, "cuda")
        self.assertEqual(a.tokens, 64)
        self.assertEqual(run.spec_of(a).experts, 32)
        self.assertEqual(a.modes.split(","), ["budgets", "two-engines", "restart", "cpu-path"])


if __name__ == "__main__":
    unittest.main()
