#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
#
# bench/device.sh: every GPU benchmark and GPU test in one call, on whatever
# cards the machine has, with one summary table (goal / measured / met /
# status per row) and an exit status that cannot pass broken.
#
#   bash bench/device.sh [--broken] [--only gpu,kernels,ring,latency,engine,peer,llama] OUTDIR
#
# 1. unpacks .debs/ (tools/device-setup.sh) and builds Release once, in
#    build-gpu (every target: the scripts below and the GPU tests);
# 2. runs bench/gpu/run.sh (GPU tests, prefetch bandwidth against raw copies,
#    latency and the hot thread's idle CPU), bench/kernels/run.sh (the
#    router-ahead kernel), bench/ring/run.sh (the record ring against a
#    mutex+condvar queue: CPU only, measured here because this host is
#    quiet), bench/latency/run.sh (post -> copy issued on the host
#    backend under each idle policy), bench/engine/run.sh (the headline benchmark: the
#    configs in DEVICE_ENGINE_CONFIGS, default "1c1e-26 2c2e-26-dp": one
#    card, and two cards data parallel) and bench/peer/run.sh, each with FS_BENCH_PREBUILT=1; rows
#    that need two cards are skipped with a line that says so; with
#    --only llama (not in the default set: it builds or unpacks llama.cpp
#    and writes 16-18 GiB models; run it in a call of its own),
#    bench/llama/run.sh: llama.cpp served by foresightd against stock
#    llama.cpp, its goals as rows (LB_* in its header pick the workloads);
# 3. prints the summary of every script's rows (bench/rows.sh) and writes
#    OUTDIR/device-summary.md.  Exits non-zero when any promised row is
#    missing or failed, or a script exited non-zero.  A goal measured and
#    missed is "met: no" in the table, not a failure.
#
# --broken: purpose-broken input, to show the summary cannot pass broken:
#   the bandwidth rows' daemons are started with the tiered default policy,
#   whose predicted tier is too small for the whole pool the bandwidth check
#   predicts (FS_BENCH_BREAK=pool: what broke those rows in issue 20).  This
#   run must exit non-zero.  Implies --only gpu unless --only is given.
# The run stays inside DEVICE_BUDGET_S seconds (default 510: one 10-minute
# device call with room to spare): the engine configs get what is left
# after the others, and a script not started in time fails its row.
#
# OUTDIR gets 8 files at most (the device call's limit): device-summary.md,
# device-run.log and each script's results table (gpu, kernels, ring,
# latency, engine, peer); each script's own files (and the rows) stay under
# ${DEVICE_WORK:-/tmp/fs-device}.
# DEVICE_BUILD (default build-gpu): the build folder; DEVICE_SKIP_BUILD=1
# uses it as it is (its row says "skipped"), for trying the script.
set -uo pipefail
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$ROOT" || exit 2
BROKEN=0
ONLY=
while [ $# -gt 1 ]; do
	case $1 in
	--broken) BROKEN=1 ;;
	--only)
		ONLY=$2
		shift
		;;
	*) break ;;
	esac
	shift
done
if [ $# != 1 ] || [[ $1 == -* ]]; then
	echo "usage: bash bench/device.sh [--broken] [--only gpu,kernels,ring,latency,engine,peer] OUTDIR" >&2
	exit 2
fi
OUTDIR=$1
mkdir -p "$OUTDIR"
OUTDIR=$(cd "$OUTDIR" && pwd)
[ $BROKEN = 1 ] && [ -z "$ONLY" ] && ONLY=gpu
SCRIPTS=(gpu kernels ring latency engine peer)
if [ -n "$ONLY" ]; then IFS=',' read -r -a SCRIPTS <<<"$ONLY"; fi
WORK=${DEVICE_WORK:-/tmp/fs-device}
rm -rf "$WORK"
mkdir -p "$WORK"
exec > >(tee "$OUTDIR/device-run.log") 2>&1
T0=$(date +%s)
BUDGET=${DEVICE_BUDGET_S:-510}
elapsed() { echo $(($(date +%s) - T0)); }

# shellcheck source=bench/rows.sh
source bench/rows.sh
rows_init "$WORK/device-rows.tsv"
row_promise build pass "Release build of every target (build-gpu)"
for s in "${SCRIPTS[@]}"; do
	case $s in
	gpu | kernels | ring | latency | engine | peer | llama) row_promise "script-$s" "== 0" "bench/$s/run.sh exit status" ;;
	*)
		echo "unknown script '$s' (gpu, kernels, ring, latency, engine, peer, llama)"
		exit 2
		;;
	esac
done

echo "== machine"
date -u +%Y-%m-%dT%H:%MZ
NGPU=$(nvidia-smi -L 2>/dev/null | grep -c '^GPU' || true)
nvidia-smi --query-gpu=index,name,driver_version,memory.total,pcie.link.gen.current,pcie.link.width.current \
	--format=csv 2>/dev/null || echo "nvidia-smi: no GPU here"
echo "$NGPU GPU(s), $(nproc) cores; scripts: ${SCRIPTS[*]}$([ $BROKEN = 1 ] && echo ", BROKEN INPUT (--broken)")"

echo "== dependencies and build"
# shellcheck disable=SC1091
source tools/device-setup.sh /tmp/fsdeps >/dev/null || echo "device-setup failed: building with this machine's own packages"
export FS_BENCH_BUILD=${DEVICE_BUILD:-build-gpu} FS_BENCH_PREBUILT=1
brc=0
if [ "${DEVICE_SKIP_BUILD:-0}" = 1 ]; then
	# For trying this script where the tree is already built (DEVICE_BUILD).
	row_skip build "DEVICE_SKIP_BUILD=1: $FS_BENCH_BUILD used as it is"
else
	{ cmake -S . -B "$FS_BENCH_BUILD" -DCMAKE_BUILD_TYPE=Release >"$WORK/cmake.log" 2>&1 &&
		cmake --build "$FS_BENCH_BUILD" -j"$(nproc)" >>"$WORK/cmake.log" 2>&1; } || brc=$?
	grep -E "error|warning:" "$WORK/cmake.log" | head -20
	if [ $brc = 0 ]; then
		row_ok build passed "$(elapsed) s"
	else
		row_fail build "exit $brc (see $WORK/cmake.log)"
		tail -20 "$WORK/cmake.log"
	fi
fi
echo "built in $(elapsed) s"

[ $BROKEN = 1 ] && export FS_BENCH_BREAK=pool
ROWFILES=("$WORK/device-rows.tsv")
for s in "${SCRIPTS[@]}"; do
	out=$WORK/$s
	mkdir -p "$out"
	now=$(elapsed)
	if [ $brc != 0 ]; then
		row_fail "script-$s" "not run: the build failed"
		continue
	fi
	# The engine configs take what the budget leaves (each about a minute
	# on one H200, arena included): no config starts later than 75 s
	# before the end.
	# The kernel tests are GPU tests: bench/gpu/run.sh's ctest -L gpu runs them.
	[ "$s" = kernels ] && [[ " ${SCRIPTS[*]} " == *" gpu "* ]] && export FS_BENCH_KERNEL_TESTS=0
	if [ "$s" = engine ]; then
		export EB_CONFIGS=${DEVICE_ENGINE_CONFIGS:-1c1e-26 2c2e-26-dp}
		export EB_DEADLINE_S=$((BUDGET - 75 - now))
	fi
	if [ "$now" -ge $((BUDGET - 30)) ]; then
		echo "== bench/$s/run.sh: NOT RUN (${now} s elapsed, budget ${BUDGET} s)"
		row_fail "script-$s" "not run: ${now} s elapsed, budget ${BUDGET} s"
		continue
	fi
	echo "== bench/$s/run.sh ($now s elapsed)"
	rc=0
	timeout $((BUDGET + 30 - now)) bash "bench/$s/run.sh" "$out" || rc=$?
	if [ ! -f "$out/$s-rows.tsv" ]; then
		row_fail "script-$s" "exit $rc, wrote no rows ($out/$s-rows.tsv)"
	elif [ $rc != 0 ]; then
		row_fail "script-$s" "exit $rc after $(($(elapsed) - now)) s"
	else
		row_ok "script-$s" 0 "$(($(elapsed) - now)) s"
	fi
	ROWFILES+=("$out/$s-rows.tsv")
	[ -f "$out/$s-results.md" ] && cp "$out/$s-results.md" "$OUTDIR/"
done

echo "== summary ($(elapsed) s)"
{
	echo "# bench/device.sh: $(date -u +%Y-%m-%dT%H:%MZ), $NGPU GPU(s): $(nvidia-smi --query-gpu=name --format=csv,noheader 2>/dev/null | head -1)"
	[ $BROKEN = 1 ] && echo "BROKEN INPUT (--broken: bandwidth daemons with the tiered default): this run must fail"
	echo
	# A script's rows file that is missing leaves its promises... nowhere:
	# its script-NAME row (exit status) fails instead.
	existing=()
	for f in "${ROWFILES[@]}"; do [ -f "$f" ] && existing+=("$f"); done
	rows_summary "${existing[@]}"
} >"$OUTDIR/device-summary.md"
rc=$?
cat "$OUTDIR/device-summary.md"
echo "device.sh: $([ $rc = 0 ] && echo passed || echo FAILED) in $(elapsed) s"
exit $rc
