#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
#
# bench/latency/run.sh: post -> copy issued under the hot thread's idle
# policies, on the HOST backend (no GPU: the daemon's part of the path; the
# CUDA figures come from bench/gpu/run.sh), with the daemon's CPU beside it.
#
#   bash bench/latency/run.sh [OUTDIR]      (OUTDIR default $OUT or /tmp/fs-latency)
#
# Policies, each a fresh foresightd --backend host (1 card, 8 layers x 128
# experts of 64 KiB, 256 slots, --tiers 0: every sample evicts, as on the GPU
# rows) and fs-post-latency (LAT_RUNS runs, default 5, of LAT_N samples,
# default 1000, one every 200 us; the p99 row is the runs' median p99, their
# min-max beside it):
#   spin      --spin-us 10000000 (a core spinning all the time)
#   default   the defaults: spin 50 us, then follow the engines' rhythm
#             (rhythm_us 2000: sleep until just before the next post is due,
#             spin through it; daemon/fsd_idle.h)
#   norhythm  --rhythm-us 0: spin 50 us, then sleep until woken (the
#             default before issue 20's session 6)
#   adapt     --spin-adapt-us 1000 --rhythm-us 0: spin through twice the
#             mean gap, yielding (opt-in)
# Rows: post -> copy issued p99 per policy (goals: spin <= 5 us, default
# <= 20 us), the daemon's CPU while the engine posts and while it is idle.
# Figures from a loaded machine say little: the header prints the load.
# LAT_N samples per run (1000), LAT_RUNS runs (5), LAT_IDLE_S seconds of idle CPU (1),
# LAT_POLICIES the policies (spin default norhythm adapt).
# ctest bench_latency_smoke runs the default policy, 2 runs of LAT_N=100: every
# row measured, no figure asserted (a spinning daemon and a spinning engine
# on a loaded 2-CPU machine starve each other: 2000 samples took > 120 s).
# FS_BENCH_PREBUILT=1: FS_BENCH_BUILD (default build) is built, skip the build.
set -euo pipefail
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
cd "$ROOT"
OUTDIR=${1:-${OUT:-/tmp/fs-latency}}
mkdir -p "$OUTDIR"
exec > >(tee "$OUTDIR/latency-run.log") 2>&1
# shellcheck source=bench/rows.sh
source bench/rows.sh
rows_init "$OUTDIR/latency-rows.tsv"
declare -A GOAL=([spin]="<= 5 us" [default]="<= 20 us" [adapt]="<= 20 us" [norhythm]=info)
declare -A ARGS=([spin]="--spin-us 10000000" [default]="" [adapt]="--spin-adapt-us 1000 --rhythm-us 0" [norhythm]="--rhythm-us 0")
# shellcheck disable=SC2206 # a word list on purpose
POLICIES=(${LAT_POLICIES:-spin default norhythm adapt})
for pol in "${POLICIES[@]}"; do
	row_promise "host-issue-$pol" "${GOAL[$pol]}" "host backend: post -> copy issued p99, $pol (${ARGS[$pol]:-defaults})"
	row_promise "host-cpu-busy-$pol" info "host backend: daemon CPU while the engine posts, $pol"
	row_promise "host-cpu-idle-$pol" info "host backend: daemon CPU, an idle engine attached, $pol"
done

B=${FS_BENCH_BUILD:-build}
# shellcheck source=bench/lib.sh
source bench/lib.sh
bench_build "$B" host foresightd fsctl fs-post-latency
D=$B/daemon/foresightd
L=$B/bench/latency/fs-post-latency
F=$B/tools/fsctl/fsctl
N=${LAT_N:-1000}
RUNS=${LAT_RUNS:-5}
IDLE_S=${LAT_IDLE_S:-1}
echo "== $(date -u +%Y-%m-%dT%H:%MZ), $(nproc) CPUs, load $(cut -d' ' -f1-3 /proc/loadavg)"

RUN=$(mktemp -d /tmp/fsl-XXXXXX)
DPID=
stop_daemon() { [ -z "$DPID" ] || { kill "$DPID" 2>/dev/null || true; wait "$DPID" || true; DPID=; }; }
trap 'stop_daemon; rm -rf "$RUN"' EXIT
ticks() { awk '{ print $14 + $15 }' "/proc/$DPID/stat"; }
pct() { awk -v d="$1" -v hz="$(getconf CLK_TCK)" -v ns="$2" 'BEGIN { printf "%.0f %% of a core", 100 * d / hz / (ns / 1e9) }'; }
now() { date +%s%N; }

for pol in "${POLICIES[@]}"; do
	# shellcheck disable=SC2086 # the policy's arguments are a word list
	"$D" --backend host --cards 1 --socket "$RUN/s.sock" --layers 8 --experts 128 --expert-bytes 65536 \
		--slots 256 --tiers 0 --publish-us 0 ${ARGS[$pol]} 2>>"$RUN/d.log" &
	DPID=$!
	up=0
	for _ in $(seq 300); do
		"$F" --socket "$RUN/s.sock" ping >/dev/null 2>&1 && { up=1; break; }
		sleep 0.1
	done
	if [ $up = 0 ]; then
		for r in issue cpu-busy cpu-idle; do row_fail "host-$r-$pol" "daemon did not start"; done
		stop_daemon
		continue
	fi
	t0=$(ticks) n0=$(now)
	rc=0
	out=$(timeout 120 "$L" latency "$RUN/s.sock" "$N" 200 "$RUNS" 2>&1) || rc=$?
	t1=$(ticks) n1=$(now)
	echo "$pol: $out"
	# The summary line (fs_post_lat.h): p99 = the runs' median, min/max their spread.
	p=$(sed -n 's/^samples .*post_to_issue_us p50 \([0-9.]*\) p99 \([0-9.]*\) min \([0-9.]*\) max \([0-9.]*\).*/\2|\1|\3-\4/p' <<<"$out")
	if [ $rc = 0 ] && [ -n "$p" ]; then
		IFS='|' read -r p99 p50 spr <<<"$p"
		row_ok "host-issue-$pol" "$p99 us" "p50 $p50 us; p99 over $RUNS runs of $N: $spr us"
		row_ok "host-cpu-busy-$pol" "$(pct $((t1 - t0)) $((n1 - n0)))"
	else
		row_fail "host-issue-$pol" "fs-post-latency exit $rc: $(head -c 120 <<<"$out")"
		row_fail "host-cpu-busy-$pol" "latency run failed"
	fi
	"$L" idle "$RUN/s.sock" $((IDLE_S + 2)) &
	ipid=$!
	sleep 1
	t0=$(ticks) n0=$(now)
	sleep "$IDLE_S"
	t1=$(ticks) n1=$(now)
	wait "$ipid" || true
	row_ok "host-cpu-idle-$pol" "$(pct $((t1 - t0)) $((n1 - n0)))"
	stop_daemon
done
{
	echo "# post -> copy issued, host backend: $(date -u +%Y-%m-%dT%H:%MZ), $(nproc) CPUs, load $(cut -d' ' -f1-3 /proc/loadavg)"
	echo
	rows_summary "$ROWS_FILE" || true
} | tee "$OUTDIR/latency-results.md"
rows_summary "$ROWS_FILE" >/dev/null
