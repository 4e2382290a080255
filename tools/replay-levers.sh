#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# tools/replay-levers.sh [FS_REPLAY]: issue 18's lever table (docs/results/replay.md, "Levers").
# Every lever alone against the tiers as they were (static + a 16th recency + predicted,
# no lever), then combined, against static, lru and the clairvoyant bound; distinct misses
# per layer-window on the calibrated model (26 / 39.5 / 52 %) and the real traces
# (qwen, gemma: 10 / 25 / 50 / 75 %, bus on, default expert sizes).  Then the tier check:
# the default with one tier's slots left to the other.  Prints Markdown.  Deterministic.
# tools/replay-levers.sh FS_REPLAY seeds: the model's draw (--gen-seed 1-5) at 26 and 52 %
# for static, the tiers as they were and the default.
set -euo pipefail
R=${1:-build/tools/replay/fs-replay}
MODE=${2:-levers}
T=${FS_TRACES:-../shared/data/route-traces}
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
		"$R" "${src[@]}" --slots-frac "$f" --no-bound --policy "$p" --json "$@" |
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
row "(c) + admit-value (value per byte on the bus)" all $OLD --admit-value on
row "(b') static tier's slots to recency (--recency all)" all $OLD --recency all
row "(b) + (c): ghost-list sizing with admit-value" all $OLD --tier-adapt on --admit-value on
row "(c) + (b') once predictions arrive: the new default, all" all
row "new default + (a) cross-window" all --cross-window on
row "tier check: default, predicted tier's slots to recency" all --predicted 0
row "tier check: default, recency's slots to a static tier" all --recency 0
row "clairvoyant bound" bound
