#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""tools/engine-ceiling.py FILE.csv [--tpw 2.5]: issue 18's goals against the
bus, from fs-engine-bench's CSV (bench/engine/run.sh's engine-results.csv).

Per config, from the medians over the repetitions:
  - the window times of zero-miss and of the best peer, and what one distinct
    miss costs on the critical path under the discussion's linear model,
    (t_peer - t_zero) / misses per window;
  - for each goal (26 %: +30 % over the best peer; 52 %: +20 %, and 70 % of
    the zero-miss headroom), the misses per layer-window the goal allows, so
    the misses per layer-window that must be removed, and the copies the bus
    lands per layer-window at the goal's speed (at its full rate, and at the
    80 % the daemon plans with): their ratio is the misses each copied expert
    must remove, on average, for the goal to be reachable at all;
  - the same ratio measured for every mode that copies (misses removed per
    layer-window against the best peer / copies per layer-window from the bus
    GB/s it used), and the mode's tokens/s as the linear model predicts it
    from its misses (a check of the model).
A copy removes at most one miss in the window it was made for; more only
where the expert stays and is used again (the static and recency tiers).
Prints Markdown.  Exit 2 on a malformed CSV.
"""
import argparse
import csv
import statistics
import sys

ap = argparse.ArgumentParser()
ap.add_argument("csv", nargs="+")
ap.add_argument("--tpw", type=float, default=2.5, help="tokens per window (the bench alternates 2 and 3)")
ap.add_argument("--plan", type=float, default=0.8, help="share of the bus the daemon plans with")
a = ap.parse_args()

rows = []
for f in a.csv:
    with open(f) as fh:
        rows += [r for r in csv.DictReader(fh) if r.get("status") == "ok"]
if not rows:
    print("engine-ceiling: no ok rows", file=sys.stderr)
    sys.exit(2)

PEERS = ("static", "strata-adapt", "lru")
for label in dict.fromkeys(r["label"] for r in rows):
    rs = [r for r in rows if r["label"] == label]
    L = int(rs[0]["layers"])
    eb = float(rs[0]["expert_bytes"])
    bus = float(rs[0]["bus_gbps"]) * 1e9
    budget = float(rs[0]["budget"])

    def med(mode, col):
        v = [float(r[col]) for r in rs if r["mode"] == mode]
        return statistics.median(v) if v else None

    tok = {m: med(m, "tokens_per_s") for m in dict.fromkeys(r["mode"] for r in rs)}
    mlw = {m: med(m, "misses_per_layer_window") for m in tok}
    gbs = {m: med(m, "bus_gbps_used") for m in tok}
    if "zero" not in tok or not any(p in tok for p in PEERS):
        print(f"engine-ceiling: {label}: no zero or no peer row", file=sys.stderr)
        sys.exit(2)
    peer = max((p for p in PEERS if p in tok), key=lambda p: tok[p])
    t_zero, t_peer = a.tpw / tok["zero"], a.tpw / tok[peer]
    c_miss = (t_peer - t_zero) / (mlw[peer] * L)  # s per distinct miss
    copy_s = eb / bus
    print(f"#### {label}: {budget:.0%} slots, {L} layers, {eb / 2**20:.2f} MiB experts, bus {bus / 1e9:.3f} GB/s\n")
    print(f"best peer **{peer}** {tok[peer]:.1f} tok/s ({t_peer * 1e3:.3f} ms a window, {mlw[peer]:.3f} misses "
          f"per layer-window); zero-miss {tok['zero']:.1f} ({t_zero * 1e3:.3f} ms); a distinct miss costs "
          f"{c_miss * 1e6:.1f} us on the critical path; a copy takes {copy_s * 1e6:.1f} us of the bus "
          f"({t_zero / L / copy_s:.2f} copies per layer time at the zero-miss speed)\n")
    goals = [("+30 % over the best peer", 1.30 * tok[peer])] if budget < 0.4 else [
        ("+20 % over the best peer", 1.20 * tok[peer]),
        ("70 % of the zero-miss headroom", tok[peer] + 0.7 * (tok["zero"] - tok[peer]))]
    print("| goal | tok/s | misses/lw allowed | to remove per lw | copies per lw at that speed (full bus / planned) "
          "| misses each copy must remove (full / planned) |")
    print("|---|---:|---:|---:|---:|---:|")
    for name, g in goals:
        t_g = a.tpw / g
        m_g = max(0.0, (t_g - t_zero) / (c_miss * L))
        need = mlw[peer] - m_g
        k = t_g / copy_s / L
        print(f"| {name} | {g:.1f} | {m_g:.3f} | {need:.3f} | {k:.2f} / {k * a.plan:.2f} "
              f"| **{need / k:.2f}** / **{need / (k * a.plan):.2f}** |")
    print()
    print("| mode | tok/s | misses/lw | removed per lw | copies per lw | misses removed per copy "
          "| tok/s the linear model gives |")
    print("|---|---:|---:|---:|---:|---:|---:|")
    for m in tok:
        if m in PEERS or m == "zero" or not gbs[m]:
            continue
        t_m = a.tpw / tok[m]
        k_m = gbs[m] * 1e9 * t_m / eb / L
        rem = mlw[peer] - mlw[m]
        model = a.tpw / (t_zero + c_miss * mlw[m] * L)
        print(f"| {m} | {tok[m]:.1f} | {mlw[m]:.3f} | {rem:.3f} | {k_m:.2f} | **{rem / k_m:.2f}** | {model:.1f} |")
    print()
