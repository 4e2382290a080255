#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""tests/engine_ceiling_test.py ROOT: tools/engine-ceiling.py's arithmetic on a
hand-made CSV whose figures are worked out here.

One config (16 layers, 471872-byte experts over 3.375 GB/s, 26 %), windows of
2.5 tokens: zero-miss 500 tok/s (5 ms a window), the static peer 250 tok/s
(10 ms) at 2.0 misses per layer-window (32 a window), so a miss costs
5 ms / 32 = 156.25 us.  +30 % is 325 tok/s (7.6923 ms): 2.6923 ms of misses
= 17.23 a window = 1.077 per layer-window allowed, 0.923 to remove; the bus
lands 7.6923 ms / 139.81 us = 55.02 copies a window = 3.439 per layer-window,
so each copy must remove 0.27 (0.34 at the 80 % plan).  A mode at 300 tok/s
(8.333 ms), 1.5 misses per layer-window, 2.0 GB/s used: 35.32 copies a
window = 2.21 per layer-window for 0.5 removed = 0.23 per copy; the linear
model gives 2.5 / (5 ms + 24 x 156.25 us) = 285.7 tok/s.
"""
import os
import subprocess
import sys
import tempfile

root = sys.argv[1]
cols = ["label", "rep", "mode", "status", "layers", "budget", "expert_bytes", "bus_gbps", "tokens_per_s",
        "misses_per_layer_window", "bus_gbps_used"]
rows = [("static", 250, 2.0, 0.0), ("lru", 240, 2.1, 1.0), ("both", 300, 1.5, 2.0), ("zero", 500, 0.0, 0.0)]
with tempfile.NamedTemporaryFile("w", suffix=".csv", delete=False) as f:
    f.write(",".join(cols) + "\n")
    for rep in (1, 2, 3):
        for m, tok, mlw, gbs in rows:
            f.write(f"t-26,{rep},{m},ok,16,0.26,471872,3.375,{tok},{mlw},{gbs}\n")
    path = f.name
try:
    out = subprocess.run([sys.executable, os.path.join(root, "tools", "engine-ceiling.py"), path],
                         check=True, capture_output=True, text=True).stdout
finally:
    os.unlink(path)
print(out)
want = ["best peer **static** 250.0", "a distinct miss costs 156.2 us",
        "| +30 % over the best peer | 325.0 | 1.077 | 0.923 | 3.44 / 2.75 | **0.27** / **0.34** |",
        "| both | 300.0 | 1.500 | 0.500 | 2.21 | **0.23** | 285.7 |"]
bad = [w for w in want if w not in out]
for w in bad:
    print(f"FAIL: missing: {w}")
sys.exit(1 if bad else 0)
