#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# tools/replay-levers.sh [FS_REPLAY]: issue 18's lever table (docs/results/replay.md, "Levers").
# Every lever alone against the tiers as they were (static + a 16th recency + predicted,
# no lever), then combined, against static, lru and the clairvoyant bound; distinct misses
# per layer-window on the calibrated model (26 / 39.5 / 52 %) and the real traces
# (qwen, gemma: 10 / 25 / 50 / 75 %, bus on, default expert sizes).  Then the tier check:
# the default with one tier's slots left to the other.  Prints Markdown.  Deterministic.
# tools/replay-levers.sh FS_REPLAY alone: each lever alone against the default, 5 draws per
# workload, the paired change with its range (its last run: docs/results/HISTORY.md, replay.md, session 7).
# tools/replay-levers.sh FS_REPLAY seeds: the model's draw (--gen-seed 1-5) at 26 and 52 %
# for static, the tiers as they were and the default.
# tools/replay-levers.sh FS_REPLAY why: where the misses come from (fs-replay's classes,
# tools/replay/replay_why.h), the default, lru and static, 5 draws per workload, with the
# predictor's ceiling ((a) never predicted against lru's misses) (docs/results/replay.md,
# "Where the misses go").  FS_WHY_ARGS: extra fs-replay flags for every run (e.g. --bus-gbps 1000).
# tools/replay-levers.sh FS_REPLAY gpu: fs-engine-bench's protocol config in the replay, the
# bench's modes side by side (its last run: docs/results/HISTORY.md, replay.md, issue 18).
# The engine posts as fs-engine-bench's does: the best 8 candidates it does not hold, per
# target layer and horizon (--pred-max 8; FS_PRED_MAX=0: every candidate, the replay's
# own default, which refreshes resident experts and flatters an LRU: docs/results/HISTORY.md).
set -euo pipefail
R=${1:-build/tools/replay/fs-replay}
MODE=${2:-levers}
T=${FS_TRACES:-../shared/data/route-traces}
PM=${FS_PRED_MAX:-8}
OLD="--recency auto --admit-value off --tier-adapt off --cross-window off"
WL=("model 0.259" "model 0.395" "model 0.52")
for tr in qwen gemma; do for f in 0.10 0.25 0.50 0.75; do WL+=("$tr $f"); done; done
run() { # WORKLOAD FRAC POLICY ARGS... -> misses per layer-window (or bound with POLICY=bound)
	local w=$1 f=$2 p=$3
	shift 3
	local src=(--synthetic --model)
	[ "$w" = model ] || src=("$T/$w.route.csv")
	if [ "$p" = bound ]; then
		"$R" "${src[@]}" --slots-frac "$f" --policy static --json |
			python3 -c 'import json,sys; print("%.3f" % [r for r in json.load(sys.stdin) if r["policy"]=="clairvoyant"][0]["distinct_misses_per_layer_window"])'
	else
		"$R" "${src[@]}" --slots-frac "$f" --no-bound --pred-max "$PM" --policy "$p" --json "$@" |
			python3 -c 'import json,sys; print("%.3f" % json.load(sys.stdin)[0]["distinct_misses_per_layer_window"])'
	fi
}
row() { # NAME POLICY ARGS...
	local name=$1 p=$2 line
	shift 2
	line="| $name |"
	for wl in "${WL[@]}"; do
		line+=" $(run $wl "$p" "$@") |"
	done
	echo "$line"
}
if [ "$MODE" = gpu ]; then
	# fs-engine-bench's protocol config (16 layers, windows of 2 and of 3 tokens for its mean of
	# 2.5, 0.45 MiB experts over 3.375 GB/s, 4.4 ms per window + 60 us per miss as measured
	# on the H200, foresightd's publish_us): tok/s of the bench's modes (recency =
	# static+recency, predict = static+predicted, both = all) under the tiers of session 5
	# (--recency pred) and the default, with the engine's posting (--pred-max 8) and with the
	# replay's own (every candidate).
	G=(--synthetic --model --layers 16 --expert-bytes 442368 --bus-gbps 3.375 --intercept-ms 4.4
		--miss-ms 0.96 --publish-us 200 --windows 400 --no-bound)
	P=(--recall 1:100,100,100 --recall 2:100,100,100 --recall 3:100,100,100)
	tps() { "$R" "${G[@]}" --json "$@" | python3 -c 'import json,sys; r=json.load(sys.stdin)[0]; print("%.1f (%.2f %%)" % (r["tokens_per_s"], 100*r["hit_rate"]))'; }
	echo "| slots, tokens/window | posting | tiers | static | recency | predict | both | perfect (both) |"
	echo "|---|---|---|---:|---:|---:|---:|---:|"
	for f in 0.26 0.52; do for t in 2 3; do for pm in 8 0; do for tiers in pred auto; do
		a=(--slots-frac "$f" --tokens-per-window "$t" --pred-max "$pm" --recency "$tiers")
		post=$([ "$pm" = 8 ] && echo "engine's (best 8 not held)" || echo "every candidate")
		lab=$([ "$tiers" = pred ] && echo "session 5 (--recency pred)" || echo "default (split)")
		echo "| $f, $t | $post | $lab | $(tps "${a[@]}" --policy static) | $(tps "${a[@]}" --policy static+recency) |" \
			"$(tps "${a[@]}" --policy static+predicted) | $(tps "${a[@]}" --policy all) | $(tps "${a[@]}" --policy all "${P[@]}") |"
	done; done; done; done
	exit 0
fi
if [ "$MODE" = alone ]; then
	# Each lever alone against the default, repeated: 5 draws per workload (the model:
	# --gen-seed 1-5, a new routing draw each; the real traces: --seed 1-5, the
	# predictor's noise), distinct misses per layer-window, the change against the
	# default paired per draw: mean and range.  FS_ALONE_WL overrides the workloads.
	AW=${FS_ALONE_WL:-"model:0.259 model:0.52 qwen:0.25 qwen:0.50 gemma:0.25 gemma:0.50"}
	LEV=("default|"
		"admit_value off|--admit-value off"
		"tier_adapt on (ghost-list sizing)|--tier-adapt on"
		"cross_window on|--cross-window on"
		"demand_late on (a miss's copy on the bus only as its deadline nears)|--demand-late on"
		"predicted tier of 4 slots per layer (its size before the bus cap where a 16th of the share is 4 or more)|--predicted-slots 4"
		"whole share to recency once predictions arrive (session 5)|--recency pred"
		"tier check: no recency tier (its slots to static)|--recency-slots 0"
		"tier check: no predicted tier (its slots to recency)|--predicted-slots 0")
	declare -A base=()
	head="| lever (alone, against the default) |"
	sep="|---|"
	for wl in $AW; do
		head+=" ${wl%%:*} $(python3 -c "print('%g %%' % (100 * ${wl##*:}))") |"
		sep+="---|"
	done
	echo "$head"
	echo "$sep"
	for lev in "${LEV[@]}"; do
		name=${lev%%|*}
		args=${lev#*|}
		line="| $name |"
		for wl in $AW; do
			w=${wl%%:*} f=${wl##*:} vals=()
			for g in 1 2 3 4 5; do
				sd=(--seed "$g")
				[ "$w" = model ] && sd=(--gen-seed "$g")
				# shellcheck disable=SC2086
				vals+=("$(run "$w" "$f" all "${sd[@]}" $args)")
			done
			if [ "$name" = default ]; then
				base[$wl]="${vals[*]}"
				line+=" $(python3 -c "import sys; v=[float(x) for x in sys.argv[1:]]; print('%.3f (%.3f..%.3f)' % (sum(v)/len(v), min(v), max(v)))" "${vals[@]}") |"
			else
				# shellcheck disable=SC2086 # base[$wl]: the default's 5 figures, one word each
				line+=" $(python3 -c "
import sys
n = len(sys.argv) // 2
b = [float(x) for x in sys.argv[1:1 + n]]; v = [float(x) for x in sys.argv[1 + n:]]
d = [100 * (x / y - 1) for x, y in zip(v, b)]
print('%+.1f %% (%+.1f..%+.1f)' % (sum(d) / len(d), min(d), max(d)))" ${base[$wl]} "${vals[@]}") |"
			fi
		done
		echo "$line"
	done
	exit 0
fi
if [ "$MODE" = why ]; then
	AW=${FS_ALONE_WL:-"model:0.259 model:0.52 qwen:0.25 qwen:0.50 gemma:0.25 gemma:0.50"}
	for wl in $AW; do
		w=${wl%%:*} f=${wl##*:}
		src=(--synthetic --model)
		[ "$w" = model ] || src=("$T/$w.route.csv")
		for g in 1 2 3 4 5; do
			sd=(--seed "$g")
			[ "$w" = model ] && sd=(--gen-seed "$g")
			# shellcheck disable=SC2086 # FS_WHY_ARGS: flags, one word each
			"$R" "${src[@]}" --slots-frac "$f" --no-bound --pred-max "$PM" "${sd[@]}" --policy all \
				--policy lru --policy static --json ${FS_WHY_ARGS:-} |
				python3 -c 'import json,sys; print(json.dumps({"wl": sys.argv[1], "rows": json.load(sys.stdin)}))' "$wl"
		done
	done | python3 -c '
import json, sys
runs = [json.loads(l) for l in sys.stdin]
def cell(v, fmt="%.1f"):
    return (fmt + " (" + fmt + ".." + fmt + ")") % (sum(v) / len(v), min(v), max(v))
def pct(v):
    return cell([100 * x for x in v])
print("| workload | policy | misses / layer-window | (a) never predicted | (b) predicted, not copied |"
      " b: too_late | b: wait_slot | b: other | (c) evicted before use | (d) landed after use |"
      " (a) vs lru misses: the ceiling | posted predictions used | predicted copies used |"
      " history: cold / evicted / in flight (means) |")
print("|---|---|---|---|---|---|---|---|---|---|---|---|---|---|")
wls = []
for r in runs:
    if r["wl"] not in wls:
        wls.append(r["wl"])
for wl in wls:
    draws = [r["rows"] for r in runs if r["wl"] == wl]
    for pol in ("all", "lru", "static"):
        col = {k: [] for k in ("lw", "a", "b", "bt", "bs", "bo", "c", "d", "ceil", "pu", "cu", "hc", "he", "hf")}
        for rows in draws:
            x = [r for r in rows if r["policy"] == pol][0]
            lru = [r for r in rows if r["policy"] == "lru"][0]
            m, why, info = x["distinct_misses"], x["why"], x["why_info"]
            s = {k: sum(v for n, v in why.items() if n.startswith(k + "_")) for k in "abcd"}
            assert sum(s.values()) == m, (wl, pol, s, m)
            col["lw"].append(x["distinct_misses_per_layer_window"])
            for k in "abcd":
                col[k].append(s[k] / m if m else 0.0)
            col["bt"].append(why["b_too_late"] / m if m else 0.0)
            col["bs"].append(why["b_wait_slot"] / m if m else 0.0)
            col["bo"].append((s["b"] - why["b_too_late"] - why["b_wait_slot"]) / m if m else 0.0)
            col["ceil"].append(s["a"] / lru["distinct_misses"])
            for k, n in (("hc", "cold"), ("he", "evicted"), ("hf", "in_flight")):
                col[k].append(x["why_hist"][n] / m if m else 0.0)
            col["pu"].append(info["posted_used"] / info["posted"] if info["posted"] else 0.0)
            col["cu"].append(info["used_predicted"] / info["copies_predicted"] if info["copies_predicted"] else 0.0)
        name, frac = wl.split(":")
        label = "default (all)" if pol == "all" else pol
        pred = pol == "all"
        hist = " / ".join("%.1f" % (100 * sum(col[k]) / len(col[k])) for k in ("hc", "he", "hf"))
        print("| %s %g %% | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s |" % (
            name, 100 * float(frac), label, cell(col["lw"], "%.3f"), pct(col["a"]), pct(col["b"]),
            pct(col["bt"]), pct(col["bs"]), pct(col["bo"]), pct(col["c"]), pct(col["d"]),
            cell(col["ceil"], "%.3f") + "x", pct(col["pu"]) if pred else "", pct(col["cu"]) if pred else "",
            hist))
'
	exit 0
fi
if [ "$MODE" = seeds ]; then
	echo "| model, slots | policy | gen-seed 1 | 2 | 3 | 4 | 5 | mean | default vs as they were, per seed |"
	echo "|---|---|---:|---:|---:|---:|---:|---:|---|"
	for f in 0.259 0.52; do
		declare -A v=()
		for p in static old new; do
			label=$p
			[ "$p" = old ] && label="as they were"
			[ "$p" = new ] && label=default
			line="| $(python3 -c "print('%g %%' % (100 * $f))") | $label |"
			for g in 1 2 3 4 5; do
				case $p in
				static) x=$(run model "$f" static --gen-seed "$g") ;;
				old) x=$(run model "$f" all $OLD --gen-seed "$g") ;;
				new) x=$(run model "$f" all --gen-seed "$g") ;;
				esac
				v[$p$g]=$x
				line+=" $x |"
			done
			m=$(python3 -c "print('%.3f' % (sum([${v[${p}1]},${v[${p}2]},${v[${p}3]},${v[${p}4]},${v[${p}5]}])/5))")
			if [ "$p" = new ]; then
				r=$(python3 -c "print(' '.join('%+.0f%%' % (100*(n/o-1)) for n,o in zip([${v[new1]},${v[new2]},${v[new3]},${v[new4]},${v[new5]}],[${v[old1]},${v[old2]},${v[old3]},${v[old4]},${v[old5]}])))")
			else
				r=""
			fi
			echo "$line $m | $r |"
		done
		unset v
	done
	exit 0
fi
head="| row |"
sep="|---|"
for wl in "${WL[@]}"; do
	set -- $wl
	head+=" $1 $(python3 -c "print('%g %%' % (100 * $2))") |"
	sep+="---:|"
done
echo "$head"
echo "$sep"
row "static (baseline)" static
row "lru (baseline)" lru
row "tiers as they were: all, no lever" all $OLD
row "(a) + cross-window (layers 0-2 from the last window)" all $OLD --cross-window on
row "(b) + tier-adapt (ghost-list sizing, ARC-like)" all $OLD --tier-adapt on
row "(c) + admit-value (value per byte on the bus): the default" all
row "(b') static tier's slots to recency (--recency all)" all $OLD --recency all
row "(c) + (b') once predictions arrive (--recency pred: session 5's default)" all --recency pred
row "(b) + (c): ghost-list sizing with admit-value" all --tier-adapt on
row "default + (a) cross-window" all --cross-window on
row "tier check: default, predicted tier's slots to recency (static+recency)" static+recency
row "tier check: default, recency's slots to the static tier (static+predicted)" static+predicted
row "clairvoyant bound" bound
