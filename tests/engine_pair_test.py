#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""tests/engine_pair_test.py ROOT: tools/engine-pair.py on hand-made CSVs.

Three repetitions of `alt` and `both` (and a static row it must ignore):
tok/s 110/100, 95/100, 102/100 -> ratios 1.100 0.950 1.020, median 1.020,
alt faster in 2 of 3; misses 1.8/2.0, 2.0/2.0, 2.2/2.0 -> 0.900 1.000 1.100.
Then the same with repetition 2 of alt failed: exit 1, named; a second
config with rows of static only (no pair at all): exit 1, named; no
promised_reps and repetition 3 of both modes missing (static ran it): exit
1; a config whose promised modes leave out alt: exit 1.
"""
import os
import subprocess
import sys
import tempfile

root = sys.argv[1]
tool = os.path.join(root, "tools", "engine-pair.py")
cols = ["label", "rep", "mode", "status", "tokens_per_s", "misses_per_layer_window", "promised_reps"]
rows = [(1, "both", 100, 2.0), (1, "alt", 110, 1.8), (1, "static", 90, 3.0),
        (2, "both", 100, 2.0), (2, "alt", 95, 2.0), (3, "both", 100, 2.0), (3, "alt", 102, 2.2)]


def run(bad_rep, extra=(), drop_rep=0, promised="3", modes="static+both+alt"):
    with tempfile.NamedTemporaryFile("w", suffix=".csv", delete=False) as f:
        f.write(",".join(cols + ["promised_modes"]) + "\n")
        for rep, m, tok, mlw in rows:
            if m != "static" and rep == drop_rep:
                continue
            st = "FAILED" if (m == "alt" and rep == bad_rep) else "ok"
            f.write(f"t-26,{rep},{m},{st},{tok},{mlw},{promised},{modes}\n")
        for line in extra:
            f.write(line + "\n")
        path = f.name
    try:
        return subprocess.run([sys.executable, tool, path, "alt", "both"], capture_output=True, text=True)
    finally:
        os.unlink(path)


def must_fail(res, what, name):
    print(res.stdout, res.stderr)
    if res.returncode != 1 or name not in res.stderr:
        sys.exit(f"engine-pair: {what} must fail the table (exit 1, naming {name!r})")


ok = run(0)
print(ok.stdout, ok.stderr)
want = "| t-26 | 3 | 1.100 0.950 1.020 | 1.020 (0.950..1.100) | 2 of 3 | 0.900 1.000 1.100 | 1.000 (0.900..1.100) |"
if ok.returncode != 0 or want not in ok.stdout:
    sys.exit(f"engine-pair: want exit 0 and the row\n{want}")
bad = run(2)
must_fail(bad, "a failed repetition", "repetition 2")
if "2 pairs of 3" not in bad.stderr:
    sys.exit("engine-pair: the count of pairs is not named")
must_fail(run(0, extra=["t-52,1,static,ok,80,1.0,3,static+both+alt"]), "a config with no pair", "t-52")
must_fail(run(0, extra=["t-26,3,static,ok,90,3.0,,static+both+alt"], drop_rep=3, promised=""), "a repetition both modes lack", "repetition 3")
must_fail(run(0, modes="static+both"), "a config that never promised alt", "not among its modes")
print("ok: pairs, medians, wins; a hole fails")
