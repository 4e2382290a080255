#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
#
# bench/engine/run.sh: the headline benchmark (issues #10, #17) on a GPU
# machine with no package registry (the lent nvidia-h200: 1 x H200, 16 cores;
# the legacy set's multi-card configs need nvidia-h200-x2).
#
#   bash bench/engine/run.sh [OUTDIR]     (OUTDIR default $OUT or /tmp/fs-engine)
#
# 1. unpacks the .debs carried in .debs/ (tools/device-setup.sh), builds
#    Release in build-engine (foresightd and fs-engine-bench only);
# 2. runs the set EB_SET names:
#    - protocol (default, issue #17): one card, one engine, slots at 26 % and
#      52 % of the experts (EB_BUDGETS, default "0.26,0.52": one config each,
#      on one arena), EB_REPS (5) repetitions of every mode interleaved
#      within each (static strata-adapt lru zero recency predict both perfect),
#      EB_WINDOWS (300) decode windows per run, on the calibrated routing
#      model (tools/trace/fs_trace_model.h; EB_ARGS="--trace FILE" for a real
#      trace, "--routing zipf" for the old generator); the predictor is the trace
#      oracle at the discussion's recall table (router-ahead, 61/82/90 % ...),
#      `perfect` the same daemon fed by an oracle never wrong (a bound).
#      16 layers, --scale 4.  Expected per budget: ~40 runs of ~5.5 s (CUDA
#      context, routing, pools, 300 windows) and 20 daemon starts on the kept
#      arena: ~4 min, plus ~1.5 min build: EB_BUDGETS=0.26 and EB_BUDGETS=0.52
#      in two calls of ~5.5 min each; both in one call (~9.5 min) does not fit.
#    - fullsize (issue #17's confirmation): the same at full size, 48 layers,
#      --scale 1 (1.8 MiB experts over 13.5 GB/s, a 44 GB arena built once
#      and handed to every daemon start through the fd store), EB_REPS (1)
#      repetition of EB_WINDOWS (200) windows: figures, no intervals.
#      Expected: ~1.5 min build, ~2.5 min arena (generated, checksummed,
#      mlocked, registered with CUDA), ~4 min for 16 runs and 7 daemon starts
#      on the kept arena (each mlocks and registers 44 GB again): ~8 min.
#    - legacy: issue #10's matrix (below), one repetition per config.
#    A set is not started once EB_DEADLINE_S (default 330) seconds have
#    passed since the start (legacy: per config); whatever is skipped or
#    fails makes the script exit non-zero.
# 3. writes OUTDIR/engine-results.csv (one row per config, repetition and
#    mode), OUTDIR/engine-results.md (`fs-engine-bench report` of it: the
#    tables docs/results/engine.md takes through bench/engine/results.sh),
#    OUTDIR/engine-run.log, OUTDIR/out-SET.txt and OUTDIR/engine-rows.tsv
#    (bench/rows.sh: one promised row per config); the daemon logs and the
#    per-window checksums stay in /tmp/fs-engine-work (at most 8 files come
#    back from the device).
# Exits non-zero when a config fails (a mode or engine whose window
# checksums differ from the others, a promised row missing or failed).
#
# Legacy matrix (label: cards, engines, slot budget as a share of all experts,
# then the config's own fs-engine-bench arguments):
#   1c1e-26 1c1e-52 1c2e-26 2c1e-26 2c2e-26 1c2e-52 2c1e-52 2c2e-52: layers
#     split over the cards, the trace-oracle predictor;
#   1c1e-26-ra 1c1e-52-ra 2c1e-26-ra: the router-ahead kernel as the
#     predictor (--predictor kernel);
#   2c2e-26-dp: data parallel, one engine per card, one tier read across
#     the cards (issue #12: compare with 1c2e-26, one card with the same
#     slots); 2c2e-26-dp-own: the same with --peer off (each card its own
#     tier);
#   1c1e-26-perfect: the oracle never wrong (every routed expert in its
#     top 10, one to three layers ahead);
#   2c2e-26-dp-down 2c1e-26-down: card 1 taken down (the control verb
#     `card`, standing in for a lost card) before engine 0's window 150:
#     the checksums must still agree with the baseline's and no expert may
#     be read from card 1 once an engine has seen it down.
# Bus budget: PCIe Gen4 x8 per card, scaled with the experts (--scale 4:
# 0.45 MiB experts over 3.375 GB/s = one 1.8 MiB expert over 13.5 GB/s).
# Extra arguments for every config: EB_ARGS (e.g. EB_ARGS="--trace FILE"; an
# A/B of a daemon option in one run: EB_ARGS="--modes static,both,alt
# --alt-arg --demand-late --alt-arg on", mode alt = both with that option);
# legacy, only some configs: EB_CONFIGS (labels, e.g. EB_CONFIGS="2c1e-52 2c2e-52"; it
# implies EB_SET=legacy).  FS_BENCH_PREBUILT=1 (bench/device.sh): FS_BENCH_BUILD
# is built, skip the build.
set -euo pipefail
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
cd "$ROOT"
OUTDIR=${1:-${OUT:-/tmp/fs-engine}}
mkdir -p "$OUTDIR"
exec > >(tee "$OUTDIR/engine-run.log") 2>&1
T0=$(date +%s)
DEADLINE=${EB_DEADLINE_S:-330}
THREADS=${EB_CPU_THREADS:-8}

echo "== machine"
date -u +%Y-%m-%dT%H:%MZ
nvidia-smi --query-gpu=name,driver_version,memory.total,pcie.link.gen.current,pcie.link.width.current --format=csv || true
nvidia-smi topo -m 2>/dev/null | head -n 4 || true
nproc
NGPU=$(nvidia-smi -L 2>/dev/null | grep -c '^GPU' || true)

DEVICE=${EB_DEVICE:-cuda} # host: a smoke test of this script without a GPU
BD=${FS_BENCH_BUILD:-build-engine}
# shellcheck source=bench/lib.sh
source bench/lib.sh
BENCH_CMAKE_ARGS=(-DFS_BUILD_TESTS=OFF)
bench_build "$BD" gpu foresightd fs-engine-bench
B=$BD/bench/engine/fs-engine-bench
D=$BD/daemon/foresightd
test -x "$B" && test -x "$D"
echo "built in $(($(date +%s) - T0)) s"

CSV=$OUTDIR/engine-results.csv
MD=$OUTDIR/engine-results.md
WORK=/tmp/fs-engine-work
rm -rf "$CSV" "$MD" "$WORK"
mkdir -p "$WORK"
fail=0
# shellcheck disable=SC2206 # EB_ARGS is a word list on purpose
EXTRA=(${EB_ARGS:-})
# EB_CONFIGS picks legacy labels (bench/device.sh does): legacy then.
SET=${EB_SET:-$([ -n "${EB_CONFIGS:-}" ] && echo legacy || echo protocol)}
# shellcheck source=bench/rows.sh
source bench/rows.sh
rows_init "$OUTDIR/engine-rows.tsv"
ALL="static,strata-adapt,lru,recency,predict,both,learned,perfect,zero"

# Seconds left of the call's EB_CALL_S (530: a device call must end within
# 9 minutes; the report and the copy-back need the rest).
left() {
	local l=$((${EB_CALL_S:-530} - ($(date +%s) - T0)))
	echo $((l > 30 ? l : 30))
}

# One fs-engine-bench run: LABEL then its arguments.
bench() {
	local label=$1
	shift
	local now=$(($(date +%s) - T0))
	row_promise "engine-$label" pass "fs-engine-bench $label: every promised mode and repetition ran, checksums agree"
	if [ "$now" -ge "$DEADLINE" ]; then
		echo "== $label: NOT RUN (${now} s elapsed, deadline ${DEADLINE} s): FAILED, a promised config did not run"
		row_fail "engine-$label" "not run: ${now} s elapsed, deadline ${DEADLINE} s"
		fail=1
		return
	fi
	echo "== $label (${now} s elapsed): $*"
	local rc=0 from
	touch "$OUTDIR/out-$SET.txt"
	from=$(($(wc -l <"$OUTDIR/out-$SET.txt") + 1))
	"$B" run --daemon "$D" --device "$DEVICE" --cpu-threads "$THREADS" --csv "$CSV" --label "$label" \
		--workdir "$WORK/$label" "$@" "${EXTRA[@]}" >>"$OUTDIR/out-$SET.txt" 2>&1 || rc=$?
	grep -E '^(== |\||[0-9] card|#|dense part|shape|best peer|arena:|checksums|run checksum|  mode |  daemon|fs-engine-bench run: FAILED|\*\*FAILED)' \
		"$OUTDIR/out-$SET.txt" | tail -n 80 || true
	echo "== $label: exit $rc ($(($(date +%s) - T0)) s elapsed)"
	if [ "$rc" = 0 ]; then
		row_ok "engine-$label" "checksums agree" "$(tail -n +"$from" "$OUTDIR/out-$SET.txt" | grep -E '^best peer' | tr '\n' ' ')"
	else
		row_fail "engine-$label" "exit $rc: $(grep -m1 -E 'FAILED' "$OUTDIR/out-$SET.txt" | cut -c1-120)"
		fail=1
	fi
}

case "$SET" in
protocol)
	budgets=${EB_BUDGETS:-0.26,0.52}
	label=1c1e # the driver names a config of a list LABEL-PCT; one budget: name it so here
	[[ $budgets == *,* ]] || label=1c1e-$(awk -v b="$budgets" 'BEGIN { printf "%.0f", b * 100 }')
	bench "$label" --budget "$budgets" --reps "${EB_REPS:-5}" --windows "${EB_WINDOWS:-300}" --modes "$ALL" \
		--timeout "$(left)"
	;;
fullsize)
	bench full --layers 48 --scale 1 --budget "${EB_BUDGETS:-0.26,0.52}" --reps "${EB_REPS:-1}" \
		--windows "${EB_WINDOWS:-200}" --modes "$ALL" --timeout "$(left)"
	;;
legacy)
	for spec in "1c1e-26 1 1 0.26" "1c1e-52 1 1 0.52" "1c2e-26 1 2 0.26" "2c1e-26 2 1 0.26" \
		"2c2e-26 2 2 0.26" "1c2e-52 1 2 0.52" "2c1e-52 2 1 0.52" "2c2e-52 2 2 0.52" \
		"1c1e-26-ra 1 1 0.26 --predictor kernel" "1c1e-52-ra 1 1 0.52 --predictor kernel" \
		"2c1e-26-ra 2 1 0.26 --predictor kernel" "2c2e-26-dp 2 2 0.26 --placement dp" \
		"2c2e-26-dp-own 2 2 0.26 --placement dp --peer off" \
		"1c1e-26-perfect 1 1 0.26 --modes static,zero,predict,both,perfect" \
		"2c2e-26-dp-down 2 2 0.26 --placement dp --card-down 1@150 --modes static,both" \
		"2c1e-26-down 2 1 0.26 --card-down 1@150 --modes static,both"; do
		read -r label cards engines budget own <<<"$spec"
		# shellcheck disable=SC2206 # a config's own arguments are a word list
		OWN=(${own:-})
		if [ -n "${EB_CONFIGS:-}" ] && ! [[ " $EB_CONFIGS " == *" $label "* ]]; then
			continue
		fi
		if [ "$cards" -gt "$NGPU" ] && [ "$DEVICE" = cuda ]; then
			echo "== $label: SKIPPED (needs $cards GPUs, $NGPU here)"
			row_promise "engine-$label" pass "fs-engine-bench $label"
			row_skip "engine-$label" "needs $cards GPUs, $NGPU here"
			continue
		fi
		bench "$label" --cards "$cards" --engines "$engines" --budget "$budget" --timeout 240 "${OWN[@]}"
	done
	;;
*)
	echo "EB_SET=$SET: protocol, fullsize or legacy"
	exit 2
	;;
esac

echo "== tables"
if [ -s "$CSV" ]; then
	"$B" report "$CSV" >"$MD" || fail=1
	cat "$MD"
else
	echo "no rows"
	fail=1
fi
echo "== $MD, rows: $CSV ($(($(date +%s) - T0)) s in all)"
rows_summary "$ROWS_FILE" | tee -a "$MD" || fail=1
echo "engine bench: $([ $fail = 0 ] && echo passed || echo FAILED)"
exit $fail
