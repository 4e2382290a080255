#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
#
# bench/gpu/run.sh: everything the CUDA backend claims, in one go, on a GPU
# machine with no package registry.
#
#   bash bench/gpu/run.sh [OUTDIR]        (OUTDIR default $OUT or /tmp/fs-gpu)
#
# 1. unpacks the .debs brought along in .debs/ (tools/device-debs.sh made
#    them here) with tools/device-setup.sh, builds Release in build-gpu;
# 2. runs the GPU tests (ctest -L gpu): integrity under churn, an engine
#    killed mid-run, the daemon stopped under engines;
# 3. runs the benchmarks: prefetch bandwidth through the daemon against raw
#    cudaMemcpyAsync of the same blobs from the same pinned pages, at expert
#    sizes 256 KiB, 1.8 MiB and 16 MiB; latency post -> copy issued and
#    post -> ready word seen by the engine (hot thread with the default
#    idle policy, the engines' rhythm; spinning; with --rhythm-us 0, the old
#    default; the opt-in adaptive spin), LAT_RUNS runs (5) of LAT_N samples (1000):
#    the p99 row is the runs' median p99, their min-max beside it;
# 4. prints a table and writes it to OUTDIR/gpu-results.md, and the rows
#    it promised (bench/rows.sh) to OUTDIR/gpu-rows.tsv with their summary
#    (goal / measured / met / status).
# Exits non-zero when any promised row is missing or failed (a test, a run
# that did not complete, a figure that is not there).  A goal that is
# measured and missed is "met: no", not a failure (--strict in rows_summary).
#
# Every daemon start names the policy the row measures: the bandwidth rows
# and the latency rows use the untiered LRU policy (--tiers 0): the check
# predicts a whole pool of experts, which only an untiered pool takes (the
# tiered default reserves a few predicted slots per layer, so most of them
# would never land).
#
# Environment: FS_BENCH_PREBUILT=1 (bench/device.sh): the deps are set up and
# FS_BENCH_BUILD (default build-gpu) is built, skip both.  FS_BENCH_BREAK=pool:
# start the bandwidth rows' daemons with the tiered default, a pool too small
# for a whole pool's prediction: those rows must fail (bench/device.sh --broken).
set -euo pipefail
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
cd "$ROOT"
OUTDIR=${1:-${OUT:-/tmp/fs-gpu}}
mkdir -p "$OUTDIR"
LOG=$OUTDIR/gpu-run.log
exec > >(tee "$LOG") 2>&1
# shellcheck source=bench/rows.sh
source bench/rows.sh
rows_init "$OUTDIR/gpu-rows.tsv"
row_promise gpu-tests pass "GPU tests (ctest -L gpu)"
declare -A SZNAME=([256k]="256 KiB" [1.8m]="1.8 MiB" [16m]="16 MiB")
for sz in 256k 1.8m 16m; do
	row_promise "bw-$sz" ">= 0.95" "prefetch / raw cudaMemcpyAsync, ${SZNAME[$sz]} experts, best of 5 (--tiers 0)"
done
row_promise lat-issue-spin "<= 5 us" "post -> copy issued p99, hot thread spinning (--tiers 0)"
row_promise lat-issue-idle "<= 20 us" "post -> copy issued p99, default idle policy (the engines' rhythm, rhythm_us 2000; --tiers 0)"
row_promise lat-ready-spin "<= 10 us" "post -> ready seen p99 over the transfer, spinning"
row_promise lat-ready-idle info "post -> ready seen p99 over the transfer, default idle policy"
row_promise lat-issue-norhythm info "post -> copy issued p99, no rhythm (--rhythm-us 0: spin 50 us, then sleep until woken; the old default)"
row_promise lat-issue-adapt "<= 20 us" "post -> copy issued p99, adaptive spin (--spin-adapt-us 1000 --rhythm-us 0, opt-in)"
row_promise cpu-busy-idle info "daemon CPU during the latency run, default idle policy"
row_promise cpu-busy-spin info "daemon CPU during the latency run, spinning"
row_promise cpu-busy-norhythm info "daemon CPU during the latency run, --rhythm-us 0"
row_promise cpu-busy-adapt info "daemon CPU during the latency run, --spin-adapt-us 1000"
row_promise cpu-idle-default info "hot thread CPU with an idle engine attached, default idle policy"
row_promise cpu-idle-spin info "hot thread CPU with an idle engine attached, spinning"

echo "== machine"
date -u +%Y-%m-%dT%H:%MZ
nvidia-smi --query-gpu=name,driver_version,memory.total,pcie.link.gen.current,pcie.link.width.current --format=csv || true
nproc

B=${FS_BENCH_BUILD:-build-gpu}
# shellcheck source=bench/lib.sh
source bench/lib.sh
bench_build "$B" gpu
D=$B/daemon/foresightd
C=$B/bench/gpu/fs-gpu-check
test -x "$D" && test -x "$C"

echo "== GPU tests"
NGPU=$(nvidia-smi -L 2>/dev/null | grep -c '^GPU' || true)
# FS_REQUIRE_GPU (tests/fs_gpu_need.h): every GPU test that needs no more
# cards than this machine has must run; a skip of one of them fails it.
tout=$(FS_REQUIRE_GPU=$NGPU ctest --test-dir "$B" -L gpu -V 2>&1) && trc=0 || trc=$?
grep -E "Test +#|tests passed|SKIP|FAIL|Assert" <<<"$tout" || true
summ=$(grep -E "tests passed" <<<"$tout" | head -1)
# A GPU test that finds no GPU skips and passes: here that is a failure,
# except the two-card ones on a one-card machine.
skips=$(grep -E "^[0-9]+: SKIP" <<<"$tout" | sort -u || true)
bad=$skips
[ "$NGPU" -lt 2 ] && bad=$(grep -v "needs 2 CUDA devices" <<<"$skips" || true)
nskip=$(grep -c . <<<"$skips" || true)
if [ "$trc" = 0 ] && [ -n "$summ" ] && [ -z "$bad" ] && ! grep -q "No tests were found" <<<"$tout"; then
	row_ok gpu-tests "passed" "$summ; $nskip skip(s): two-card tests, $NGPU GPU(s) here"
elif [ -n "$bad" ]; then
	row_fail gpu-tests "a GPU test skipped: $(head -1 <<<"$bad")"
else
	row_fail gpu-tests "ctest -L gpu exit $trc: ${summ:-no summary}"
fi

RUN=$(mktemp -d /tmp/fsg-XXXXXX)
DPID=
start_daemon() # args...
{
	"$D" --backend cuda --socket "$RUN/s.sock" "$@" 2>>"$RUN/d.log" &
	DPID=$!
	for _ in $(seq 600); do
		"$B/tools/fsctl/fsctl" --socket "$RUN/s.sock" ping >/dev/null 2>&1 && return 0
		kill -0 "$DPID" 2>/dev/null || break
		sleep 0.1
	done
	echo "daemon did not start"
	tail "$RUN/d.log"
	return 1
}
stop_daemon() { [ -z "$DPID" ] || { kill "$DPID" 2>/dev/null || true; wait "$DPID" || true; DPID=; }; }
trap 'stop_daemon; rm -rf "$RUN"' EXIT
# A field is a whole word: "transfer_us" must not match the tail of
# "ready_over_transfer_us" (sed's greedy .* found that one, and no figure).
field() { sed -n "s/\(.* \|^\)$1 \([-0-9.]*\).*/\2/p" <<<"$2"; }
p99() { sed -n "s/.*$1 p50 [-0-9.]* p99 \([-0-9.]*\).*/\1/p" <<<"$2"; }
# "min-max" of the runs' p99 (fs_post_lat.h's summary line)
spread() { sed -n "s/.*$1 p50 [-0-9.]* p99 [-0-9.]* min \([-0-9.]*\) max \([-0-9.]*\).*/\1-\2/p" <<<"$2"; }
# Latency: LAT_RUNS runs of LAT_N samples per policy (a p99 with its spread).
LAT_N=${LAT_N:-1000}
LAT_RUNS=${LAT_RUNS:-5}

echo "== bandwidth"
POLICY=(--tiers 0)
if [ "${FS_BENCH_BREAK:-}" = pool ]; then
	echo "FS_BENCH_BREAK=pool: the bandwidth daemons run the tiered default (these rows must fail)"
	POLICY=()
fi
declare -A BW
for spec in "256k 262144 4 256 512" "1.8m 1887436 4 128 256" "16m 16777216 4 32 48"; do
	read -r sz bytes layers experts slots <<<"$spec"
	BW[$sz]="bandwidth run FAILED (daemon did not start)"
	if start_daemon --layers "$layers" --experts "$experts" --expert-bytes "$bytes" --slots "$slots" \
		--publish-us 0 --max-inflight 64 "${POLICY[@]}"; then
		BW[$sz]=$(timeout 90 "$C" bandwidth "$RUN/s.sock" 5 2>&1) || BW[$sz]="${BW[$sz]} bandwidth run FAILED"
	fi
	echo "${BW[$sz]}"
	stop_daemon
	r=${BW[$sz]}
	if grep -q FAILED <<<"$r" || [ -z "$(field ratio "$r")" ]; then
		row_fail "bw-$sz" "$(tr '\n' ' ' <<<"$r" | cut -c1-160)"
	else
		row_ok "bw-$sz" "$(field ratio "$r")" "$(field daemon_gbps "$r") / $(field raw_gbps "$r") GB/s"
	fi
done

# Hot thread CPU over one second with an engine attached and idle: utime +
# stime of the daemon process (its other threads sleep) in % of one core.
idle_cpu() # row id
{
	"$C" idle "$RUN/s.sock" 3 >/dev/null &
	local ipid=$!
	sleep 1
	local t0 t1
	t0=$(awk '{print $14 + $15}' "/proc/$DPID/stat")
	sleep 1
	t1=$(awk '{print $14 + $15}' "/proc/$DPID/stat")
	wait "$ipid" || true
	row_ok "$1" "$(awk -v d=$((t1 - t0)) -v hz="$(getconf CLK_TCK)" 'BEGIN { printf "%.0f %% of a core", 100 * d / hz }')"
}

echo "== latency"
declare -A LAT
ticks() { awk '{ print $14 + $15 }' "/proc/$DPID/stat"; }
for pol in idle spin norhythm adapt; do
	extra=()
	[ $pol = spin ] && extra=(--spin-us 10000000)
	[ $pol = norhythm ] && extra=(--rhythm-us 0)
	[ $pol = adapt ] && extra=(--spin-adapt-us 1000 --rhythm-us 0)
	LAT[$pol]="latency run FAILED (daemon did not start)"
	l0=$(wc -l <"$RUN/d.log" 2>/dev/null || echo 0)
	if start_daemon --layers 8 --experts 128 --expert-bytes 1887436 --slots 256 --publish-us 0 --tiers 0 "${extra[@]}"; then
		t0=$(ticks) n0=$(date +%s%N)
		LAT[$pol]=$(timeout 120 "$C" latency "$RUN/s.sock" "$LAT_N" 200 "$LAT_RUNS" 2>&1) || LAT[$pol]="${LAT[$pol]} latency run FAILED"
		t1=$(ticks) n1=$(date +%s%N)
		row_ok "cpu-busy-$pol" "$(awk -v d=$((t1 - t0)) -v hz="$(getconf CLK_TCK)" -v ns=$((n1 - n0)) \
			'BEGIN { printf "%.0f %% of a core", 100 * d / hz / (ns / 1e9) }')"
		if [ $pol = idle ]; then idle_cpu cpu-idle-default; elif [ $pol = spin ]; then idle_cpu cpu-idle-spin; fi
	fi
	echo "hot thread $pol: ${LAT[$pol]}"
	stop_daemon
	# The rhythm's own account, logged as the daemon stops (daemon/fsd_hot.c).
	rh=$(tail -n +$((l0 + 1)) "$RUN/d.log" | grep -o "posts found it awake after a planned wake [0-9]*, asleep in one [0-9]*, asleep after the window [0-9]*" | tail -1 || true)
	if [ -n "$rh" ]; then echo "hot thread $pol: $rh"; fi
	# The summary line (fs_post_lat.h): p99 = the runs' median, min/max their spread.
	r=$(grep -E '^samples|FAILED' <<<"${LAT[$pol]}" || true)
	if grep -q FAILED <<<"$r" || [ -z "$(p99 post_to_issue_us "$r")" ]; then
		row_fail "lat-issue-$pol" "$(tr '\n' ' ' <<<"$r" | cut -c1-160)"
		[ $pol = adapt ] || [ $pol = norhythm ] || row_fail "lat-ready-$pol" "latency run failed"
	else
		row_ok "lat-issue-$pol" "$(p99 post_to_issue_us "$r") us" "p50 $(sed -n 's/.*post_to_issue_us p50 \([0-9.]*\).*/\1/p' <<<"$r"); p99 over $LAT_RUNS runs of $LAT_N: $(spread post_to_issue_us "$r") us${rh:+; $rh}"
		[ $pol = adapt ] || [ $pol = norhythm ] || row_ok "lat-ready-$pol" "$(p99 ready_over_transfer_us "$r") us" \
			"post -> ready p99 $(p99 post_to_ready_us "$r") us ($(spread post_to_ready_us "$r")), transfer $(field transfer_us "$r") us"
	fi
done

{
	echo "| expert size | daemon prefetch GB/s | raw cudaMemcpyAsync GB/s | daemon / raw |"
	echo "|---|---|---|---|"
	for sz in 256k 1.8m 16m; do
		r=${BW[$sz]}
		echo "| ${SZNAME[$sz]} | $(field daemon_gbps "$r") | $(field raw_gbps "$r") | $(field ratio "$r") |"
	done
	echo
	echo "| latency (1.8 MiB expert, --tiers 0) | post -> copy issued p50 / p99 (us) | post -> ready seen p50 / p99 (us) | transfer (us) |"
	echo "|---|---|---|---|"
	for pol in idle spin norhythm adapt; do
		r=$(grep -E '^samples' <<<"${LAT[$pol]}" || true)
		i50=$(sed -n 's/.*post_to_issue_us p50 \([0-9.]*\) p99 \([0-9.]*\).*/\1 \/ \2/p' <<<"$r")
		s50=$(sed -n 's/.*post_to_ready_us p50 \([0-9.]*\) p99 \([0-9.]*\).*/\1 \/ \2/p' <<<"$r")
		echo "| hot thread $pol (idle: the default policy; norhythm: --rhythm-us 0; adapt: --spin-adapt-us 1000 --rhythm-us 0) | $i50 | $s50 | $(field transfer_us "$r") |"
	done
	echo
	rows_summary "$ROWS_FILE" || true
} | tee "$OUTDIR/gpu-results.md"
echo "daemon log tail:"
tail -n 5 "$RUN/d.log"
rows_summary "$ROWS_FILE" >/dev/null
