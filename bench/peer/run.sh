#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
#
# bench/peer/run.sh: the peer path on a 2-GPU machine (nvidia-h200-x2), in
# under 5 minutes, with no package registry.
#
#   bash bench/peer/run.sh [OUTDIR]        (OUTDIR default $OUT or /tmp/fs-peer)
#
# 1. unpacks .debs/ (tools/device-setup.sh) and builds Release in build-gpu
#    (shared with bench/gpu/run.sh: a second script only rebuilds what changed);
# 2. raw: fs-peer-bench raw: a kernel on card A reading expert-sized blobs in
#    A's memory, in B's memory through peer access, against pinned host -> A
#    copies and B -> A peer copies (256 KiB, 1.8 MiB, 16 MiB), with ratios;
# 3. the GPU test of the peer path (ctest peer_gpu_test: a quick raw run that
#    checks a peer read returns the bytes written);
# 4. daemon: foresightd --backend cuda on both cards, two engines (one per
#    card, each running every layer: data parallel) reading through the peer
#    path (one tier across the cards), then the same with --peer off
#    (each card its own tier), both with the LRU policy, then one tier with
#    the tiers: hit rate, distinct experts held, duplicates, verified peer
#    reads; fsctl stats shows the peer reach;
# 5. writes OUTDIR/peer-results.md (the lead turns it into docs/results/peer.md)
#    and the rows it promised (bench/rows.sh) to OUTDIR/peer-rows.tsv.
# Exits non-zero when any promised row is missing or failed; on a machine
# with fewer than two GPUs every row is skipped with a line that says so.
# Every daemon start names its policy (--tiers, --peer).
# FS_BENCH_PREBUILT=1 (bench/device.sh): FS_BENCH_BUILD is built, skip the build.
set -euo pipefail
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
cd "$ROOT"
OUTDIR=${1:-${OUT:-/tmp/fs-peer}}
mkdir -p "$OUTDIR"
LOG=$OUTDIR/peer-run.log
exec > >(tee "$LOG") 2>&1
# shellcheck source=bench/rows.sh
source bench/rows.sh
rows_init "$OUTDIR/peer-rows.tsv"
# 16 layers x 128 experts of 1.8 MiB (3.8 GB arena), top-8; 320 slots per
# card: one card holds 16 % of the experts, both together 31 %.
# Runs: the untiered LRU policy with one tier across the cards (peer path)
# and with each card its own tier (--peer off): the same policy, so
# the difference is the sharing; then the default tiered policy, one tier.
# (With tiers and no peer reach, a layer's reserved slots follow the last
# card that used it, which two data-parallel engines turn into a tug of
# war: not a fair "own tier" baseline, so it is not run.)
# "single": the ceiling the issue compares against, ONE card holding the
# combined slots (640) with both engines on it.  PEER_RUNS picks runs.
RUNS=("peer 0" "own 0" "peer 1" "single 0" "single 1")
if [ -n "${PEER_RUNS:-}" ]; then IFS=',' read -r -a RUNS <<<"$PEER_RUNS"; fi
row_promise peer-raw pass "fs-peer-bench raw: peer read vs local read vs host copy"
row_promise peer-check pass "peer read returns the bytes written (raw --quick)"
for run in "${RUNS[@]}"; do
	read -r mode tiers <<<"$run"
	row_promise "peer-$mode-tiers$tiers" "== 0" "two engines, $mode, --tiers $tiers: verified-read mismatches"
done
NGPU=$(nvidia-smi -L 2>/dev/null | grep -c '^GPU' || true)
if [ "$NGPU" -lt 2 ]; then
	echo "== peer path: SKIPPED (needs 2 GPUs, $NGPU here)"
	while IFS=$'\t' read -r kind id _; do
		[ "$kind" = promise ] && row_skip "$id" "needs 2 GPUs, $NGPU here"
	done <"$ROWS_FILE"
	rows_summary "$ROWS_FILE"
	exit $?
fi

echo "== machine"
date -u +%Y-%m-%dT%H:%MZ
nvidia-smi --query-gpu=index,name,driver_version,memory.total --format=csv || true
nvidia-smi topo -m || true

B=${FS_BENCH_BUILD:-build-gpu}
# shellcheck source=bench/lib.sh
source bench/lib.sh
bench_build "$B" gpu foresightd fsctl fs-peer-bench
D=$B/daemon/foresightd
P=$B/bench/peer/fs-peer-bench
F=$B/tools/fsctl/fsctl
test -x "$D" && test -x "$P" && test -x "$F"

echo "== raw: peer read vs local read vs host copy"
rrc=0
RAW=$(timeout 120 "$P" raw 2>&1) || rrc=$?
echo "$RAW"
if [ $rrc = 0 ] && grep -q "^|" <<<"$RAW"; then
	row_ok peer-raw passed
else
	row_fail peer-raw "fs-peer-bench raw exit $rrc"
fi

echo "== GPU test of the peer path"
qrc=0
QUICK=$(timeout 60 "$P" raw --quick 2>&1) || qrc=$?
grep -E "SKIP|check" <<<"$QUICK" || true
if [ $qrc = 0 ] && grep -q "check" <<<"$QUICK" && ! grep -q "SKIP" <<<"$QUICK"; then
	row_ok peer-check passed "$(grep -m1 check <<<"$QUICK")"
else
	row_fail peer-check "fs-peer-bench raw --quick exit $qrc"
fi

RUN=$(mktemp -d /tmp/fsp-XXXXXX)
start_daemon() # args...
{
	"$D" --backend cuda --socket "$RUN/s.sock" "$@" 2>>"$RUN/d.log" &
	DPID=$!
	for _ in $(seq 600); do
		"$F" --socket "$RUN/s.sock" ping >/dev/null 2>&1 && return 0
		sleep 0.1
	done
	echo "daemon did not start"; tail "$RUN/d.log"; return 1
}
stop_daemon() { kill "$DPID"; wait "$DPID" || true; }

MODEL=(--layers 16 --experts 128 --experts-used 8 --expert-bytes 1887436 --slots 320 --publish-us 100)
WINDOWS=600
declare -A RES
for run in "${RUNS[@]}"; do
	read -r mode tiers <<<"$run"
	echo "== daemon: two engines, $mode, --tiers $tiers"
	peer=$([ "$mode" = own ] && echo off || echo on)
	second=1
	if [ "$mode" = single ]; then
		start_daemon "${MODEL[@]}" --tiers "$tiers" --peer "$peer" --cards 1 --slots 640
		second=0
	else
		start_daemon "${MODEL[@]}" --tiers "$tiers" --peer "$peer"
	fi
	use=$([ "$mode" = peer ] && echo 1 || echo 0)
	timeout 120 "$P" engine "$RUN/s.sock" 0 "$use" $WINDOWS 200 >"$RUN/e0.out" 2>&1 &
	E0=$!
	timeout 120 "$P" engine "$RUN/s.sock" $second "$use" $WINDOWS 200 >"$RUN/e1.out" 2>&1 &
	E1=$!
	rc0=0
	rc1=0
	wait $E0 || rc0=$?
	wait $E1 || rc1=$?
	cat "$RUN/e0.out" "$RUN/e1.out"
	mism=$(sed -n 's/.* mismatches \([0-9]*\).*/\1/p' "$RUN/e0.out" "$RUN/e1.out" | awk '{ s += $1; n++ } END { if (n == 2) print s }')
	if [ $rc0 != 0 ] || [ $rc1 != 0 ] || [ -z "$mism" ]; then
		echo "engine FAILED ($rc0, $rc1)"
		row_fail "peer-$mode-tiers$tiers" "engine exit $rc0, $rc1"
	else
		row_ok "peer-$mode-tiers$tiers" "$mism" \
			"hit rate $(sed -n 's/.* hit_rate \([0-9.]*\).*/\1/p' "$RUN/e0.out" "$RUN/e1.out" | paste -sd/)"
	fi
	"$F" --socket "$RUN/s.sock" stats | sed -n '/# Cards/,/# Layers/p' | head -20
	RES[$run]=$(grep -h "hit_rate" "$RUN/e0.out" "$RUN/e1.out" || true)
	stop_daemon
done

field() { sed -n "s/.* $1 \([0-9.]*\).*/\1/p" <<<"$2" | head -1; }
{
	echo "## raw (one run, card A = device 0 reading, card B = device 1)"
	echo
	grep "^|" <<<"$RAW"
	echo
	echo "GB/s back to back over 1 GiB of distinct blobs (us per blob, p50 us of one blob alone)."
	echo
	echo "## two engines on two cards (data parallel), $WINDOWS windows, 16 layers x 128 experts of 1.8 MiB, top-8, 320 slots per card"
	echo
	echo "| mode | card | hit rate | local | peer | unreachable | miss | distinct experts held (of 2048) | duplicates | verified reads / mismatches |"
	echo "|---|---|---|---|---|---|---|---|---|---|"
	for run in "${RUNS[@]}"; do
		read -r mode tiers <<<"$run"
		case $mode in
		peer) label="one tier, peer path" ;;
		own) label="own tier per card" ;;
		*) label="ONE card, 640 slots, both engines" ;;
		esac
		label="$label, $([ "$tiers" = 1 ] && echo tiers || echo "LRU (--tiers 0)")"
		while read -r line; do
			[ -n "$line" ] || continue
			card=$(sed -n 's/^engine card \([0-9]*\).*/\1/p' <<<"$line")
			echo "| $label | $card |" \
				"$(field hit_rate "$line") | $(field local "$line") | $(field peer "$line") |" \
				"$(field unreachable "$line") | $(field miss "$line") | $(field distinct_held "$line") |" \
				"$(field dup_held "$line") | $(field verified "$line") / $(field mismatches "$line") |"
		done <<<"${RES[$run]}"
	done
} | tee "$OUTDIR/peer-results.md"
echo "daemon log tail:"; tail -n 8 "$RUN/d.log"
rm -rf "$RUN"
rows_summary "$ROWS_FILE"
