#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# tools/replay-learn.sh [FS_REPLAY] [MODE]: issue 32's tables (docs/results/replay.md, "Issue 32:
# predictions from routing alone").  Distinct misses per layer-window, bus on, default expert
# sizes; the oracle's engine posts as fs-engine-bench's (--pred-max 8).  Draws: the calibrated
# model --gen-seed 1-5 (every policy), the oracle on the real traces --seed 1-5; the learned
# predictor on a real trace has nothing random (one run).  Prints Markdown.
#   main       every workload: static, lru, static+recency, the default tiers with no predictor
#              (the learner on, posting nothing: --learn-min-p 1), all (the oracle), learned,
#              learned --learn-past; against lru; and the misses no routing-only predictor can
#              name (why_info unseen: the expert's layer never used it before)
#   horizons   the learned predictor's recall at k and 2k per horizon and its posting's
#              precision, and its calibration (reliability per decile)
#   sense      learned, one knob at a time against its defaults (qwen and gemma at 25 and 50 %:
#              a learned run on a real trace has nothing random, one run each)
# FS_TRACES (../shared/data/route-traces): the traces; absent: the real-trace rows are skipped.
set -euo pipefail
R=${1:-build/tools/replay/fs-replay}
MODE=${2:-main}
T=${FS_TRACES:-../shared/data/route-traces}
export R T MODE
python3 - <<'PY'
import json, os, subprocess, sys

R, T, MODE = os.environ["R"], os.environ["T"], os.environ["MODE"]
HAVE = os.path.exists(os.path.join(T, "qwen.route.csv")) and os.path.exists(os.path.join(T, "gemma.route.csv"))


def run(wl, frac, pols, extra=(), seed=None):
    src = ["--synthetic", "--model"] if wl == "model" else [os.path.join(T, wl + ".route.csv")]
    cmd = [R] + src + ["--slots-frac", str(frac), "--no-bound", "--pred-max", "8", "--json"]
    for p in pols:
        cmd += ["--policy", p]
    if seed is not None:
        cmd += ["--gen-seed" if wl == "model" else "--seed", str(seed)]
    cmd += list(extra)
    out = subprocess.run(cmd, capture_output=True, text=True, check=True).stdout
    return {r["policy"]: r for r in json.loads(out)}


def cell(v, fmt="%.3f"):
    if len(v) == 1:
        return fmt % v[0]
    return (fmt + " (" + fmt + ".." + fmt + ")") % (sum(v) / len(v), min(v), max(v))


def lw(r):
    return r["distinct_misses_per_layer_window"]


WLS = [("model", 0.259), ("model", 0.52)]
if HAVE:
    WLS += [(t, f) for t in ("qwen", "gemma") for f in (0.10, 0.25, 0.50, 0.75)]
else:
    print("(%s absent: the real traces' rows are left out)\n" % T)

if MODE == "main":
    print("| workload | static | lru | static+recency | default tiers, no predictor | all (oracle) |"
          " learned | learned vs lru | learned, --learn-past | learned vs the oracle |"
          " unseen misses vs lru: no routing-only predictor names them |")
    print("|---|---|---|---|---|---|---|---|---|---|---|")
    for wl, f in WLS:
        seeds = [1, 2, 3, 4, 5]
        col = {k: [] for k in ("static", "lru", "sr", "nopred", "all", "learned", "past", "vslru", "vsall", "unseen")}
        for s in seeds:
            model = wl == "model"
            base = run(wl, f, ["static", "lru", "static+recency", "all"], seed=s)
            if model or s == 1:
                le = run(wl, f, ["learned"], seed=s)["learned"]
                nop = run(wl, f, ["learned"], ["--learn-min-p", "1"], seed=s)["learned"]
                past = run(wl, f, ["learned"], ["--learn-past"], seed=s)["learned"]
                col["learned"].append(lw(le))
                col["nopred"].append(lw(nop))
                col["past"].append(lw(past))
                col["static"].append(lw(base["static"]))
                col["lru"].append(lw(base["lru"]))
                col["sr"].append(lw(base["static+recency"]))
                col["vslru"].append(le["distinct_misses"] / base["lru"]["distinct_misses"])
                col["unseen"].append(le["why_info"]["unseen"] / base["lru"]["distinct_misses"])
            col["all"].append(lw(base["all"]))
        col["vsall"] = [sum(col["learned"]) / len(col["learned"]) / (sum(col["all"]) / len(col["all"]))]
        print("| %s %g %% | %s | %s | %s | %s | %s | **%s** | %s | %s | %s | %s |" % (
            wl, 100 * f, cell(col["static"]), cell(col["lru"]), cell(col["sr"]), cell(col["nopred"]),
            cell(col["all"]), cell(col["learned"]), cell(col["vslru"], "%.2fx"), cell(col["past"]),
            cell(col["vsall"], "%.2fx"), cell(col["unseen"], "%.2fx")))
elif MODE == "horizons":
    print("| workload | horizon | recall at k | at 2k | posted | posted and used |")
    print("|---|---:|---:|---:|---:|---:|")
    rel = []
    for wl, f in WLS:
        if f not in (0.259, 0.25, 0.50):
            continue
        le = run(wl, f, ["learned"], seed=1)["learned"]["learn"]
        for h in le["horizons"]:
            print("| %s %g %% | %d | %.3f | %.3f | %d | %.1f %% |" % (
                wl, 100 * f, h["horizon"], h["recall_at_k"], h["recall_at_2k"], h["posted"], 100 * h["precision"]))
        rel.append(("%s %g %%" % (wl, 100 * f), le["reliability"]))
    print("\nCalibration: per decile of the probability the learner gave, candidates judged, their mean "
          "probability -> the share used.\n")
    print("| workload | " + " | ".join("%.1f-%.1f" % (d / 10, (d + 1) / 10) for d in range(10)) + " |")
    print("|---|" + "---|" * 10)
    for name, r in rel:
        by = {round(x["p_from"] * 10): x for x in r}
        print("| %s | " % name + " | ".join(
            ("%.2f -> %.2f (%d)" % (by[d]["mean_p"], by[d]["used"], by[d]["n"])) if d in by else "" for d in range(10)) + " |")
elif MODE == "sense":
    knobs = [("defaults", []), ("learn_min_p 0.001", ["--learn-min-p", "0.001"]),
             ("learn_min_p 0.05", ["--learn-min-p", "0.05"]), ("learn_min_p 0.2", ["--learn-min-p", "0.2"]),
             ("learn_min_p 0.5", ["--learn-min-p", "0.5"]), ("learn_decay 0.99", ["--learn-decay", "0.99"]),
             ("learn_decay 1 (no decay)", ["--learn-decay", "1"]), ("pred_value on", ["--pred-value", "on"]),
             ("--learn-past", ["--learn-past"])]
    wls = [w for w in WLS if w[1] in (0.25, 0.50)]  # the traces: nothing random in a learned run
    print("| learned, one knob | " + " | ".join("%s %g %%" % (w, 100 * f) for w, f in wls) + " |")
    print("|---|" + "---|" * len(wls))
    base = {}
    for name, extra in knobs:
        cells = []
        for w, f in wls:
            seeds = [1, 2, 3, 4, 5] if w == "model" else [1]
            v = [lw(run(w, f, ["learned"], extra, seed=s)["learned"]) for s in seeds]
            if name == "defaults":
                base[(w, f)] = v
                cells.append(cell(v))
            else:
                d = [100 * (x / y - 1) for x, y in zip(v, base[(w, f)])]
                cells.append(cell(d, "%+.1f %%"))
        print("| %s | %s |" % (name, " | ".join(cells)))
else:
    sys.exit("MODE: main, horizons or sense")
PY
