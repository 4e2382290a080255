#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
#
# bench/kernels/run.sh: everything the router-ahead kernel claims, on a GPU
# machine with no package registry (the .debs carried in .debs/).
#
#   bash bench/kernels/run.sh [OUTDIR]     (OUTDIR default $OUT or /tmp/fs-kernels)
#
# 1. builds Release in build-gpu (tools/device-setup.sh for the deps);
# 2. the kernel against its CPU reference at model and odd shapes, posting
#    into a device ring, graph replay, and end to end with a daemon
#    (router_ahead_*_test);
# 3. fs-bench-ra kernel: time per launch vs the memory floor and a cuBLAS
#    GEMM + top-M baseline, measured side by side, then the stage table
#    (each stage alone at the same shapes: where a launch's time goes);
#    where nsys exists, a short run of it under nsys profile --stats=true
#    (per-kernel GPU times: the other view of the stage table; skipped with
#    a line where nsys is absent, FS_BENCH_NSYS=0 skips it; off under
#    bench/device.sh unless FS_BENCH_NSYS=1);
# 4. fs-bench-ra e2e against foresightd --backend cuda, the hot thread
#    sleeping when idle (the default) and spinning.
# Output: OUTDIR/kernels-run.log, OUTDIR/kernels-results.md and the rows it
# promised (bench/rows.sh) in OUTDIR/kernels-rows.tsv, summarised at the
# end. Exits non-zero when any promised row is missing or failed.
# The e2e daemons name their policy: the tiered default with 16 predicted
# slots per layer (the router-ahead kernel posts into the predicted tier).
# FS_BENCH_PREBUILT=1 (bench/device.sh): FS_BENCH_BUILD is built, skip the build.
# FS_BENCH_KERNEL_TESTS=0: leave the tests out (device.sh: ctest -L gpu ran them).
set -euo pipefail
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
cd "$ROOT"
OUTDIR=${1:-${OUT:-/tmp/fs-kernels}}
mkdir -p "$OUTDIR"
exec > >(tee "$OUTDIR/kernels-run.log") 2>&1
# shellcheck source=bench/rows.sh
source bench/rows.sh
rows_init "$OUTDIR/kernels-rows.tsv"
TESTS=(kernels/router_ahead_ref_test kernels/router_ahead_gpu_test bench/kernels/router_ahead_e2e_test)
# bench/device.sh runs them once, in bench/gpu/run.sh's ctest -L gpu.
[ "${FS_BENCH_KERNEL_TESTS:-1}" = 0 ] && TESTS=()
for t in "${TESTS[@]}"; do
	row_promise "${t##*/}" pass "kernel test"
done
row_promise ra-floor "<= 2 x" "router-ahead launch / (memory floor + one launch), worst at T <= 8"
row_promise ra-vs-cublas ">= 1 x" "cuBLAS GEMM + top-M time / kernel time, worst shape"
row_promise ra-stages pass "stage table: every stage timed at every shape, every posted record consumed"
row_promise ra-e2e-idle info "kernel launch -> daemon consumed p99, default idle policy"
row_promise ra-e2e-spin info "kernel launch -> daemon consumed p99, hot thread spinning"

echo "== machine"
date -u +%Y-%m-%dT%H:%MZ
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv || true

B=${FS_BENCH_BUILD:-build-gpu}
# shellcheck source=bench/lib.sh
source bench/lib.sh
bench_build "$B" gpu foresightd fsctl fs-bench-ra router_ahead_ref_test router_ahead_gpu_test \
	router_ahead_e2e_test

echo "== tests"
for t in "${TESTS[@]}"; do
	trc=0
	tout=$("$B/$t" --jobs 1 2>&1) || trc=$?
	grep -vE "^\[----\] *$" <<<"$tout" || true
	synth=$(grep -E "Synthesis:" <<<"$tout" | tail -1)
	# A test that skips (no GPU) passes under criterion: not here.
	if grep -q "SKIP" <<<"$tout" || grep -q "Tested: 0 " <<<"$synth"; then
		row_fail "${t##*/}" "skipped: $(grep -m1 SKIP <<<"$tout")"
	elif [ "$trc" = 0 ] && [ -n "$synth" ]; then
		row_ok "${t##*/}" passed "${synth#*Synthesis: }"
	else
		row_fail "${t##*/}" "exit $trc: ${synth:-no criterion summary}"
	fi
done

RES=$OUTDIR/kernels-results.md
{
	echo "# router-ahead kernel: $(date -u +%Y-%m-%d), $(nvidia-smi --query-gpu=name --format=csv,noheader | head -1)"
	echo
	# shellcheck disable=SC2016 # backquotes are markdown
	echo '## Time per launch (`fs-bench-ra kernel 20`)'
	echo
} >"$RES"
krc=0
KOUT=$("$B/bench/kernels/fs-bench-ra" kernel 20 2>&1) || krc=$?
echo "$KOUT" | tee -a "$RES"
fl=$(sed -n 's/^worst_floor_launch_ratio_t8 \([0-9.]*\) at \(.*\)/\1 x|\2/p' <<<"$KOUT")
bk=$(sed -n 's/^worst_baseline_over_kernel \([0-9.]*\) at \(.*\)/\1 x|\2/p' <<<"$KOUT")
# The goal lines come after the whole launch table (the stage table, which
# alone can fail after them, has its own row).
if [ -n "$fl" ] && [ -n "$bk" ]; then
	row_ok ra-floor "${fl%%|*}" "at ${fl#*|}"
	row_ok ra-vs-cublas "${bk%%|*}" "at ${bk#*|}"
else
	row_fail ra-floor "fs-bench-ra kernel exit $krc"
	row_fail ra-vs-cublas "fs-bench-ra kernel exit $krc"
fi
sr=$(sed -n 's/^stage_rows \([0-9]*\) of \([0-9]*\)$/\1 \2/p' <<<"$KOUT")
if [ $krc = 0 ] && [ -n "$sr" ] && [ "${sr% *}" = "${sr#* }" ]; then
	row_ok ra-stages passed "${sr% *} of ${sr#* } shapes"
else
	row_fail ra-stages "fs-bench-ra kernel exit $krc, stage rows: ${sr:-none}"
fi

# nsys, where the machine has it: per-kernel GPU time of a short run
# (every graph node traced), the kernel summary only.
NSYS=$(command -v nsys || true)
for n in /usr/local/cuda/bin/nsys /opt/nvidia/nsight-systems/*/bin/nsys; do
	[ -z "$NSYS" ] && [ -x "$n" ] && NSYS=$n
done
# Default on when run alone, off under bench/device.sh (FS_BENCH_PREBUILT=1:
# its budget is shared by every script).
NSYS_ON=${FS_BENCH_NSYS:-1}
[ "${FS_BENCH_PREBUILT:-0}" = 1 ] && NSYS_ON=${FS_BENCH_NSYS:-0}
if [ "$NSYS_ON" = 0 ]; then
	echo "== nsys: skipped (FS_BENCH_NSYS=0, or under bench/device.sh)"
elif [ -z "$NSYS" ]; then
	echo "== nsys: not on this machine, skipped (the stage table above is the profile)" | tee -a "$RES"
else
	NSD=$(mktemp -d /tmp/fsk-nsys-XXXXXX)
	nrc=0
	NOUT=$(FS_BENCH_RA_QUICK=1 timeout 90 "$NSYS" profile --stats=true --cuda-graph-trace=node --force-overwrite=true \
		-o "$NSD/ra" "$B/bench/kernels/fs-bench-ra" kernel 2 2>&1) || nrc=$?
	{
		echo
		echo "## nsys profile --stats=true --cuda-graph-trace=node fs-bench-ra kernel 2, FS_BENCH_RA_QUICK=1 (exit $nrc)"
		echo
		echo '```'
		awk '/cuda_gpu_kern_sum/{p=1} p&&/cuda_gpu_mem_time_sum|cuda_gpu_mem_size_sum|osrt_sum|cuda_api_sum/&&!/cuda_gpu_kern_sum/{p=0} p' \
			<<<"$NOUT" | head -40
		echo '```'
	} | tee -a "$RES"
	rm -rf "$NSD"
fi

RUN=$(mktemp -d /tmp/fsk-XXXXXX)
e2e() # row, label, daemon args...
{
	local row=$1 label=$2
	shift 2
	"$B/daemon/foresightd" --backend cuda --socket "$RUN/s.sock" --slots 512 --layers 16 --experts 64 \
		--expert-bytes 262144 --tiers 1 --predicted-slots 16 "$@" 2>>"$RUN/d.log" &
	local dpid=$!
	for _ in $(seq 300); do
		"$B/tools/fsctl/fsctl" --socket "$RUN/s.sock" ping >/dev/null 2>&1 && break
		sleep 0.1
	done
	local erc=0 eout
	eout=$("$B/bench/kernels/fs-bench-ra" e2e "$RUN/s.sock" 200 2>&1) || erc=$?
	{
		echo
		echo "## End to end, hot thread $label (\`fs-bench-ra e2e SOCK 200\`)"
		echo
		echo "$eout"
	} | tee -a "$RES"
	kill "$dpid" 2>/dev/null || true
	wait "$dpid" || true
	local p
	p=$(sed -n 's/^| kernel launch -> daemon consumed the records | \([0-9.]*\) | \([0-9.]*\) |.*/\2|\1/p' <<<"$eout")
	if [ $erc = 0 ] && [ -n "$p" ]; then
		row_ok "$row" "${p%%|*} us" "p50 ${p#*|} us"
	else
		row_fail "$row" "fs-bench-ra e2e exit $erc"
	fi
}
e2e ra-e2e-idle "sleeping when idle (default: spin 50 us, dev_poll_us 50)"
e2e ra-e2e-spin "spinning (--spin-us 10000000)" --spin-us 10000000
tail -20 "$RUN/d.log"
rm -rf "$RUN"
{
	echo
	rows_summary "$ROWS_FILE" || true
} | tee -a "$RES"
rows_summary "$ROWS_FILE" >/dev/null
