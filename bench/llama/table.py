#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""bench/llama/table.py: the table of bench/llama/run.sh's runs.

    python3 bench/llama/table.py llama-runs.csv llama-promised.txt [--rows FILE]

Per workload and budget, per mode: decode (tg) and prefill (pp) tokens/s,
median and range over the repetitions; c's and lru's ratio to b and to a,
taken per repetition (the runs of one repetition ran side by side) and then
the median and range of those ratios; the token hit rate, the bytes read in
place and copied per second of decode, the peak VRAM of the process.  Then
the goals of issue 31, each met or not.  Exits 1 when a promised run is
missing or failed (its row says which), 0 otherwise: a goal that is measured
and missed is "no" in the table, not a failure.  --rows FILE: the goals as
bench/rows.sh rows too (bench/device.sh's summary reads them).
"""
import csv
import statistics
import sys
from collections import defaultdict


def med(xs):
    return statistics.median(xs) if xs else float("nan")


def rng(xs, fmt="{:.1f}"):
    if not xs:
        return "-"
    return (fmt + " [" + fmt + "-" + fmt + "]").format(med(xs), min(xs), max(xs))


def main():
    runs = list(csv.DictReader(open(sys.argv[1])))
    promised = [tuple(l.strip().split(",")) for l in open(sys.argv[2]) if l.strip()]
    got = {}
    for r in runs:
        key = (r["workload"], r["budget"], r["mode"], r["rep"], r["phase"], r["proc"])
        got[key] = r
    missing = [p for p in promised if p not in got or got[p]["status"] != "ok"]

    by = defaultdict(list)  # (w, b, mode, phase) -> runs
    for r in runs:
        if r["status"] == "ok":
            by[(r["workload"], r["budget"], r["mode"], r["phase"])].append(r)

    def tps(w, b, m, ph):
        return [float(r["tps"]) for r in by.get((w, b, m, ph), [])]

    def per_rep(w, b, m, ph):
        return {r["rep"]: float(r["tps"]) for r in by.get((w, b, m, ph), []) if r["proc"] == "0"}

    def ratio(w, b, m, ref_b, ref, ph):
        num, den = per_rep(w, b, m, ph), per_rep(w, ref_b, ref, ph)
        return [num[k] / den[k] for k in num if k in den and den[k] > 0]

    def same_as_a(w, b, m, a_budget):
        """(identical, compared): the runs' logit files against a's of the same repetition and phase."""
        same = n = 0
        for r in runs:
            if (r["workload"], r["budget"], r["mode"]) != (w, b, m) or r["status"] != "ok":
                continue
            ref = got.get((w, a_budget, "a", r["rep"], r["phase"], "0"))
            if not ref or ref["status"] != "ok" or r.get("logits", "-") == "-":
                continue
            n += 1
            same += r["logits"] == ref["logits"]
        return same, n

    out = []
    out.append("| workload | budget | mode | tg t/s | pp t/s | tg vs b | tg vs a | pp vs b | token hit % | "
               "read in place GB/s | copied GB/s | VRAM MiB | engines' private host MiB | host us/eval | logits = a |")
    out.append("|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|")
    workloads = sorted({p[0] for p in promised}, key=lambda w: ["qwen", "gemma", "calib"].index(w)
                       if w in ("qwen", "gemma", "calib") else 9)
    goals = []
    learned = []  # the learned predictor's worth, per workload and budget
    rows = []  # (id, goal, what, measured or None: failed)

    def goal(gid, text, gexpr, measured_txt, value_txt, ok):
        goals.append((text, measured_txt, ok))
        rows.append((gid, gexpr, text, value_txt))
    for w in workloads:
        budgets = sorted({p[1] for p in promised if p[0] == w})
        a_budget = next((p[1] for p in promised if p[0] == w and p[2] == "a"), None)
        for b in budgets:
            modes = [m for m in MODES if any(p[:3] == (w, b, m) for p in promised)]
            # a ran once per run.sh call (its first budget); a call of its own
            # at another budget (1.0: every expert fits) runs it beside that budget
            ab = b if "a" in modes else a_budget
            for m in modes:
                tg, pp = tps(w, b, m, "tg"), tps(w, b, m, "pp")
                tgruns = by.get((w, b, m, "tg"), [])
                hit = [100.0 * int(r["token_hits"]) / int(r["token_uses"]) for r in tgruns if int(r["token_uses"])]
                rd = [int(r["miss_bytes"]) * float(r["tps"]) / int(TG) / 1e9 for r in tgruns if float(r["tps"]) > 0]
                cp = [int(r["copy_bytes"]) * float(r["tps"]) / int(TG) / 1e9 for r in tgruns if float(r["tps"]) > 0]
                vram = [float(r["vram_mib"]) for r in tgruns]
                host = [float(r["host_mib"]) for r in tgruns if r.get("host_mib") not in (None, "")]
                vb = ratio(w, b, m, b, "b", "tg") if m not in ("a", "b", "d") else []
                va = ratio(w, b, m, ab, "a", "tg") if m not in ("a", "d") and ab else []
                pb = ratio(w, b, m, b, "b", "pp") if m not in ("a", "b", "d") else []
                same, n = same_as_a(w, b, m, ab) if m in SERVED and ab else (0, 0)
                if n:
                    goal(f"llama-{w}-{b}-{m}-logits", f"{w} {b}: {m}'s logits byte-identical to a's", "pass",
                         f"{same} of {n} runs", "identical" if same == n else None, same == n)
                hus = [float(r["begin_us"]) for r in tgruns if r.get("begin_us") not in (None, "", "0")]
                out.append("| {} | {} | {} | {} | {} | {} | {} | {} | {} | {} | {} | {} | {} | {} | {} |".format(
                    w, b, m, rng(tg), rng(pp), rng(vb, "{:.2f}"), rng(va, "{:.2f}"), rng(pb, "{:.2f}"),
                    rng(hit) if hit else "-", rng(rd, "{:.1f}") if m in SERVED else "-",
                    rng(cp, "{:.1f}") if m in OURS + ("d",) else "-", "{:.0f}".format(med(vram)) if vram else "-",
                    "{:.0f}".format(med(host)) if host else "-",
                    "{:.0f}".format(med(hus)) if hus else "-", f"{same}/{n}" if n else "-"))
                real = w in ("qwen", "gemma")
                if m in OURS and vb:
                    want = 2.0 if float(b) < 0.4 else 1.5
                    if real:
                        goal(f"llama-{w}-{b}-{m}-decode", f"{w} {b}: {m} decode >= {want}x b", f">= {want} x",
                             f"{med(vb):.2f}x", f"{med(vb):.2f} x", med(vb) >= want)
                    goal(f"llama-{w}-{b}-{m}-decode-min", f"{w} {b}: {m} decode never below b", ">= 1 x",
                         f"min {min(vb):.2f}x", f"{min(vb):.2f} x", min(vb) >= 1.0)
                if m in OURS and va and float(b) >= 1.0:
                    goal(f"llama-{w}-{b}-{m}-fits", f"{w} {b} (every expert fits): {m} decode >= 0.97x a", ">= 0.97 x",
                         f"{med(va):.3f}x", f"{med(va):.3f} x", med(va) >= 0.97)
                if m in OURS and pb:
                    goal(f"llama-{w}-{b}-{m}-prefill-min", f"{w} {b}: {m} prefill never below b", ">= 1 x",
                         f"min {min(pb):.2f}x", f"{min(pb):.2f} x", min(pb) >= 1.0)
                if m in OURS:
                    peer = "lru" if m == "c" else "lrus"  # the LRU read the same way
                    lr = ratio(w, b, m, b, peer, "tg")
                    if lr:
                        goal(f"llama-{w}-{b}-{m}-vs-lru", f"{w} {b}: {m} beats the in-process {peer}", ">= 1 x",
                             f"{med(lr):.2f}x", f"{med(lr):.2f} x", med(lr) > 1.0)
                if m in ("csn", "csl"):  # cs against its run with the learned predictor off / on
                    lo = ratio(w, b, "cs", b, m, "tg")
                    if lo:
                        learned.append(f"{w} {b}: cs / {m} decode {rng(lo, '{:.3f}')} (the default against {LEARN[m]})")
                if m == "d" and host:
                    # host RAM for the experts: foresightd's one arena whatever the
                    # number of engines, if the two keep no copy of their own: their
                    # private memory together within 10 % of twice one c engine's
                    one = [float(r["host_mib"]) for r in by.get((w, b, "c", "tg"), []) if r.get("host_mib")]
                    if one and med(one) > 0:
                        x = med(host) / (2 * med(one))
                        goal(f"llama-{w}-{b}-shared-host", f"{w} {b}: d's two engines keep no private copy of the experts "
                             "(their private host memory <= 1.1 x twice one c engine's)", "<= 1.1 x",
                             f"{med(host):.0f} MiB for two, {med(one):.0f} for one: {x:.2f}x", f"{x:.2f} x", x <= 1.1)
                if m == "d":
                    solo = med(tps(w, b, "c", "tg"))
                    each = [float(r["tps"]) for r in tgruns]
                    if each and solo == solo:
                        goal(f"llama-{w}-{b}-shared", f"{w} {b}: d each process >= 0.90x its solo decode",
                             ">= 0.9 x", f"min {min(each) / solo:.2f}x", f"{min(each) / solo:.2f} x",
                             min(each) / solo >= 0.9)
    out.append("")
    out.append("Ratios are per repetition (the runs of one repetition ran side by side), then median [range]. "
               "Decode from an empty context, cold (a fresh foresightd per c run); tg t/s over "
               f"{TG} tokens, pp over the prefill.")
    out.append("")
    if learned:
        out.extend(learned + [""])
    if goals:
        out.append("| goal | measured | met |")
        out.append("|---|---|---|")
        for g, v, ok in goals:
            out.append(f"| {g} | {v} | {'yes' if ok else 'no'} |")
        out.append("")
    if missing:
        out.append(f"MISSING or FAILED: {len(missing)} of {len(promised)} promised runs:")
        for p in missing[:40]:
            st = got[p]["status"] if p in got else "not run"
            out.append(f"- {','.join(p)}: {st}")
    else:
        out.append(f"All {len(promised)} promised runs ok.")
    print("\n".join(out))
    if ROWS:
        with open(ROWS, "w") as f:
            f.write(f"promise\tllama-runs\tpass\tevery promised run of bench/llama/run.sh\n")
            if missing:
                f.write(f"fail\tllama-runs\t{len(missing)} of {len(promised)} missing or failed\t\n")
            else:
                f.write(f"ok\tllama-runs\tpass\t{len(promised)} runs\n")
            for gid, gexpr, what, value in rows:
                f.write(f"promise\t{gid}\t{gexpr}\t{what}\n")
                f.write(f"ok\t{gid}\t{value}\t\n" if value is not None else f"fail\t{gid}\tdiffer\t\n")
    return 1 if missing else 0


TG = 128
ROWS = None
MODES = ("a", "b", "c", "cs", "csn", "csl", "lru", "lrus", "d")  # the table's order
OURS = ("c", "cs", "csn", "csl")  # one llama.cpp process served by foresightd
LEARN = {"csn": "--learn 0", "csl": "--learn 1"}  # what these daemons were given
SERVED = OURS + ("lru", "lrus", "d")  # modes whose experts the provider serves
if __name__ == "__main__":
    import os
    TG = int(os.environ.get("LB_TG", "128"))
    if "--rows" in sys.argv:
        i = sys.argv.index("--rows")
        ROWS = sys.argv[i + 1]
        del sys.argv[i:i + 2]
    sys.exit(main())
