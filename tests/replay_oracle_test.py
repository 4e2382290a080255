#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""tests/replay_oracle_test.py FS_REPLAY SHARED_DIR: fs-replay's baselines
against an independent reference replay.

../shared/tools/replay_ref.py was written apart from this code (it shares
no line with tools/replay or the residency core).  On each real trace of
../shared/data/route-traces, at 25 % and 50 % of the experts as slots:
  - fs-replay's `static-layer` (the residency core, static tier only, a
    per-layer profile from the prefill rows) and the reference's static
    (prefill profile) must agree exactly: uses and distinct misses;
  - fs-replay's `lru` (the core as one LRU per layer, every miss usable a
    window later) and the reference's `lru d=1` must agree on uses exactly
    and on distinct misses within LRU_TOL (0.5 %): the core picks its victim
    when the copy is issued and keeps a copied expert's slot through the
    grace period, the reference evicts when the copy lands
    (docs/results/replay.md, "The reference replay").
Exit 77 (ctest: skipped) when ../shared, its traces or its reference are
absent; 1 on any disagreement.
"""
import importlib.util
import json
import os
import subprocess
import sys

LRU_TOL = 0.005
FRACS = (0.25, 0.5)


def skip(why):
    print(f"SKIP: replay_oracle_test: {why}")
    sys.exit(77)


fs_replay, shared = sys.argv[1], sys.argv[2]
ref_path = os.path.join(shared, "tools", "replay_ref.py")
traces_dir = os.path.join(shared, "data", "route-traces")
if not os.path.isfile(ref_path):
    skip(f"{ref_path} absent (a fresh checkout has no ../shared)")
traces = [os.path.join(traces_dir, t) for t in ("qwen.route.csv", "gemma.route.csv")]
traces = [t for t in traces if os.path.isfile(t)]
if not traces:
    skip(f"no route traces in {traces_dir}")

spec = importlib.util.spec_from_file_location("replay_ref", ref_path)
ref = importlib.util.module_from_spec(spec)
spec.loader.exec_module(ref)

failed = 0
print(f"{'trace':16s} {'slots':>5s} {'policy':13s} {'uses':>7s} {'ref misses':>10s} {'ours':>7s} {'diff':>7s}")
for trace in traces:
    n_layer, n_expert, steps = ref.load(trace)
    pre = [v for (ph, s), v in steps.items() if ph == 0]
    dec = [v for (ph, s), v in steps.items() if ph == 1]
    for frac in FRACS:
        per_layer = int(round(frac * n_expert))
        out = subprocess.run([fs_replay, trace, "--slots", str(per_layer * n_layer), "--policy", "static-layer",
                              "--policy", "lru", "--json"], capture_output=True, text=True, timeout=300)
        if out.returncode != 0:
            print(f"FAIL: fs-replay exit {out.returncode}: {out.stderr}")
            sys.exit(1)
        ours = {r["policy"]: r for r in json.loads(out.stdout)}
        for name, pol, tol in (("static-layer", "static", 0.0), ("lru", "lru", LRU_TOL)):
            m, u = ref.run(pol, n_layer, n_expert, pre, dec, per_layer, 0, 1)
            o = ours[name]
            diff = (o["distinct_misses"] - m) / m if m else 0.0
            ok = o["uses"] == u and abs(diff) <= tol
            print(f"{os.path.basename(trace):16s} {per_layer:5d} {name:13s} {u:7d} {m:10d} "
                  f"{o['distinct_misses']:7d} {diff:+7.2%} {'ok' if ok else 'FAIL'}"
                  f"{'' if o['uses'] == u else ' (uses differ: ' + str(o['uses']) + ')'}")
            if not ok:
                failed = 1
if failed:
    print(f"FAIL: fs-replay disagrees with {ref_path} (static exactly, lru within {LRU_TOL:.1%})")
    sys.exit(1)
print("replay_oracle_test: OK")
