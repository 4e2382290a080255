#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""tests/replay_sweep_test.py FS_REPLAY SHARED_DIR: foresightd's default
policy is never worse than the `static`, `lru` or `strata-adapt` peer on the
real route traces (issue 18).

On each trace of ../shared/data/route-traces (qwen, gemma) at 10, 25, 50
and 75 % of the experts as slots, fs-replay runs `static`, `lru`,
`strata-adapt` and `all` (the daemon's default tiers, bus on, default
expert sizes) through the residency core; `all`'s distinct misses must not
exceed any peer's.  It also prints issue 18's tier check, the default with
one tier's slots left to the others (`static+predicted`: no recency tier;
`static+recency`: no predicted tier), naming a row where that is better
than the default; the check is not met on these traces (docs/results/
replay.md, "Session 7", says where and why), so it is printed, not a pass
condition.  Until session 8 qwen at 10 % was a known exception (`all`
17349 against `lru`'s 17151); per-layer tiers of one slot lost it, and
the auto sizes no longer make them (daemon/residency/fsr_core.c).
FS_REPLAY_SWEEP_FULL=1 adds 15, 40 and 60 %.  The figures are in
docs/results/replay.md ("Levers").  Exit 77 (ctest: skipped) when
../shared or its traces are absent; 1 when a row is worse.
"""
import json
import os
import subprocess
import sys

FRACS = (0.10, 0.25, 0.50, 0.75)
FULL = (0.15, 0.40, 0.60)


def skip(why):
    print(f"SKIP: replay_sweep_test: {why}")
    sys.exit(77)


fs_replay, shared = sys.argv[1], sys.argv[2]
traces_dir = os.path.join(shared, "data", "route-traces")
traces = [os.path.join(traces_dir, f"{n}.route.csv") for n in ("qwen", "gemma")]
for t in traces:
    if not os.path.isfile(t):
        skip(f"{t} absent (a fresh checkout has no ../shared)")
fracs = sorted(FRACS + (FULL if os.environ.get("FS_REPLAY_SWEEP_FULL") == "1" else ()))

PEERS = ("static", "lru", "strata-adapt")
CHECK = ("static+predicted", "static+recency")
bad = 0
print(f"{'trace':<16} {'slots':>6} {'static':>8} {'lru':>8} {'strata':>8} {'all':>8}"
      f"  {'no rec':>8} {'no pred':>8}  (distinct misses)")
for t in traces:
    for f in fracs:
        pols = PEERS + ("all",) + CHECK
        out = subprocess.run([fs_replay, t, "--slots-frac", str(f), "--no-bound", "--json"]
                             + [a for p in pols for a in ("--policy", p)],
                             check=True, capture_output=True, text=True).stdout
        rows = {r["policy"]: r["distinct_misses"] for r in json.loads(out)}
        if set(rows) != set(pols):
            print(f"FAIL: {t} {f}: rows {sorted(rows)}")
            sys.exit(1)
        best = min(rows[p] for p in PEERS)
        worse = rows["all"] > best
        bad += worse
        verdict = "WORSE" if worse else "ok"
        tier = [p for p in CHECK if rows[p] < rows["all"]]
        print(f"{os.path.basename(t):<16} {f:>6.2f} {rows['static']:>8} {rows['lru']:>8}"
              f" {rows['strata-adapt']:>8} {rows['all']:>8}  {rows['static+predicted']:>8}"
              f" {rows['static+recency']:>8}  {verdict}"
              + (f" (tier check: {', '.join(tier)} better)" if tier else ""))
if bad:
    print(f"FAIL: the default policy missed more than a peer in {bad} row(s)")
    sys.exit(1)
print("ok: never worse than static, lru or strata-adapt")
