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
#    post -> ready word seen by the engine (hot thread sleeping when idle,
#    the default, and spinning);
# 4. prints a table and writes it to OUTDIR/gpu-results.md.
set -euo pipefail
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
cd "$ROOT"
OUTDIR=${1:-${OUT:-/tmp/fs-gpu}}
mkdir -p "$OUTDIR"
LOG=$OUTDIR/gpu-run.log
exec > >(tee "$LOG") 2>&1

echo "== machine"
date -u +%Y-%m-%dT%H:%MZ
nvidia-smi --query-gpu=name,driver_version,memory.total,pcie.link.gen.current,pcie.link.width.current --format=csv || true
nproc

echo "== dependencies and build"
# shellcheck disable=SC1091
source tools/device-setup.sh /tmp/fsdeps >/dev/null
cmake -S . -B build-gpu -DCMAKE_BUILD_TYPE=Release >/dev/null
cmake --build build-gpu -j"$(nproc)" 2>&1 | grep -E "error|warning" || true
B=build-gpu
D=$B/daemon/foresightd
C=$B/bench/gpu/fs-gpu-check
test -x "$D" && test -x "$C"

echo "== GPU tests"
tests_rc=0
ctest --test-dir "$B" -L gpu --output-on-failure -V 2>&1 | grep -E "gpu integrity|SKIP|Passed|Failed|tests passed|FAIL|Assert" || tests_rc=$?
ctest --test-dir "$B" -L gpu >/dev/null 2>&1 || tests_rc=1

RUN=$(mktemp -d /tmp/fsg-XXXXXX)
start_daemon() # args...
{
	"$D" --backend cuda --socket "$RUN/s.sock" "$@" 2>>"$RUN/d.log" &
	DPID=$!
	for _ in $(seq 600); do
		"$B/tools/fsctl/fsctl" --socket "$RUN/s.sock" ping >/dev/null 2>&1 && return 0
		sleep 0.1
	done
	echo "daemon did not start"; tail "$RUN/d.log"; return 1
}
stop_daemon() { kill "$DPID"; wait "$DPID" || true; }

echo "== bandwidth"
declare -A BW
for spec in "262144 4 256 512" "1887436 4 128 256" "16777216 4 32 48"; do
	read -r bytes layers experts slots <<<"$spec"
	start_daemon --layers "$layers" --experts "$experts" --expert-bytes "$bytes" --slots "$slots" \
		--publish-us 0 --max-inflight 64
	BW[$bytes]=$(timeout 90 "$C" bandwidth "$RUN/s.sock" 5 || echo "bandwidth run FAILED")
	echo "${BW[$bytes]}"
	stop_daemon
done

echo "== latency"
start_daemon --layers 8 --experts 128 --expert-bytes 1887436 --slots 256 --publish-us 0
LAT_SLEEP=$(timeout 60 "$C" latency "$RUN/s.sock" 2000 200 || echo "latency run FAILED")
echo "hot thread sleeping when idle (spin 50 us): $LAT_SLEEP"
stop_daemon
start_daemon --layers 8 --experts 128 --expert-bytes 1887436 --slots 256 --publish-us 0 --spin-us 10000000
LAT_SPIN=$(timeout 60 "$C" latency "$RUN/s.sock" 2000 200 || echo "latency run FAILED")
echo "hot thread spinning: $LAT_SPIN"
stop_daemon

field() { sed -n "s/.*$1 \([0-9.]*\).*/\1/p" <<<"$2"; }
{
	echo "| expert size | daemon prefetch GB/s | raw cudaMemcpyAsync GB/s | daemon / raw |"
	echo "|---|---|---|---|"
	for bytes in 262144 1887436 16777216; do
		r=${BW[$bytes]}
		echo "| $bytes B | $(field daemon_gbps "$r") | $(field raw_gbps "$r") | $(field ratio "$r") |"
	done
	echo
	echo "| latency (1.8 MiB expert) | post -> copy issued p50 / p99 (us) | post -> ready seen p50 / p99 (us) |"
	echo "|---|---|---|"
	for name in sleeping spinning; do
		if [ $name = sleeping ]; then r=$LAT_SLEEP; else r=$LAT_SPIN; fi
		i50=$(sed -n 's/.*post_to_issue_us p50 \([0-9.]*\) p99 \([0-9.]*\).*/\1 \/ \2/p' <<<"$r")
		s50=$(sed -n 's/.*post_to_ready_us p50 \([0-9.]*\) p99 \([0-9.]*\).*/\1 \/ \2/p' <<<"$r")
		echo "| hot thread $name | $i50 | $s50 |"
	done
} | tee "$OUTDIR/gpu-results.md"
echo "daemon log tail:"; tail -n 5 "$RUN/d.log"
rm -rf "$RUN"
echo "gpu tests: $([ $tests_rc = 0 ] && echo passed || echo FAILED)"
exit $tests_rc
