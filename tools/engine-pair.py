#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""tools/engine-pair.py CSV MODE_A MODE_B: mode A against mode B of one
fs-engine-bench run, paired per repetition.

The bench's report compares every mode with the best peer; an A/B of two
daemon configurations (mode `alt` against `both`, issue 18) wants the two
compared with each other, repetition by repetition: the two ran in the same
repetition, minutes apart, on the same routing, so the pair removes the
drift between repetitions that widens each mode's own interval.  Prints,
per config (label), the ratio A/B of tokens/s and of misses per
layer-window for every repetition both have with status ok, their medians
and ranges, and how many of the pairs A won.  Exits 1 when a config of the file (any
mode's rows) has no pair, when A or B is not among a config's promised
modes, or when a repetition of A or B is missing or failed (the
repetitions: promised_reps, or where that column is empty, every
repetition any mode of the config ran): a pair table with holes is not a
result.
"""
import csv
import statistics
import sys


def main(argv):
    if len(argv) != 4:
        sys.stderr.write(__doc__)
        return 2
    path, a, b = argv[1:]
    by = {}
    reps_seen = {}
    with open(path, newline="") as f:
        for r in csv.DictReader(f):
            lab = r["label"]
            by.setdefault(lab, {})
            # what the config promised: its promised_reps, else every
            # repetition any of its modes has a row for
            want = int(r.get("promised_reps") or 0) or int(r["rep"])
            reps_seen[lab] = max(reps_seen.get(lab, 0), want)
            pm = r.get("promised_modes")
            if pm and (a not in pm.split("+") or b not in pm.split("+")):
                by[lab]["unpromised"] = pm
            if r["mode"] in (a, b):
                by[lab][(r["mode"], int(r["rep"]))] = r
    if not by:
        print(f"engine-pair: no rows in {path}", file=sys.stderr)
        return 1
    fail = 0
    print(f"| config | pairs | tok/s {a} / {b} per repetition | median (range) | {a} faster in | "
          f"misses/layer-window {a} / {b} per repetition | median (range) |")
    print("|---|---|---|---|---|---|---|")
    for lab in sorted(by):
        rows = by[lab]
        if "unpromised" in rows:
            print(f"engine-pair: {lab}: {a} or {b} not among its modes ({rows['unpromised']})", file=sys.stderr)
            fail = 1
            continue
        reps = range(1, reps_seen[lab] + 1)
        tps, mis = [], []
        for k in reps:
            ra, rb = rows.get((a, k)), rows.get((b, k))
            if not ra or not rb or ra["status"] != "ok" or rb["status"] != "ok":
                print(f"engine-pair: {lab} repetition {k}: {a} or {b} missing or failed", file=sys.stderr)
                fail = 1
                continue
            tps.append(float(ra["tokens_per_s"]) / float(rb["tokens_per_s"]))
            mb = float(rb["misses_per_layer_window"])
            mis.append(float(ra["misses_per_layer_window"]) / mb if mb > 0 else float("nan"))
        if len(tps) < reps_seen[lab]:
            print(f"engine-pair: {lab}: {len(tps)} pairs of {reps_seen[lab]} promised repetitions",
                  file=sys.stderr)
            fail = 1
        if not tps:
            continue
        won = sum(1 for x in tps if x > 1.0)
        print(f"| {lab} | {len(tps)} | {' '.join(f'{x:.3f}' for x in tps)} | {statistics.median(tps):.3f} "
              f"({min(tps):.3f}..{max(tps):.3f}) | {won} of {len(tps)} | {' '.join(f'{x:.3f}' for x in mis)} | "
              f"{statistics.median(mis):.3f} ({min(mis):.3f}..{max(mis):.3f}) |")
    return fail


if __name__ == "__main__":
    sys.exit(main(sys.argv))
