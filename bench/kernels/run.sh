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
#    GEMM + top-M baseline, measured side by side;
# 4. fs-bench-ra e2e against foresightd --backend cuda, the hot thread
#    sleeping when idle (the default) and spinning.
# Output: OUTDIR/kernels-run.log and OUTDIR/kernels-results.md.
set -euo pipefail
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
cd "$ROOT"
OUTDIR=${1:-${OUT:-/tmp/fs-kernels}}
mkdir -p "$OUTDIR"
exec > >(tee "$OUTDIR/kernels-run.log") 2>&1

echo "== machine"
date -u +%Y-%m-%dT%H:%MZ
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv || true

echo "== build"
# shellcheck disable=SC1091
source tools/device-setup.sh /tmp/fsdeps >/dev/null
B=build-gpu
cmake -S . -B $B -DCMAKE_BUILD_TYPE=Release >/dev/null
cmake --build $B -j"$(nproc)" --target foresightd fsctl fs-bench-ra router_ahead_ref_test \
	router_ahead_gpu_test router_ahead_e2e_test 2>&1 | grep -E "error|warning" || true

echo "== tests"
rc=0
for t in kernels/router_ahead_ref_test kernels/router_ahead_gpu_test bench/kernels/router_ahead_e2e_test; do
	"$B/$t" --jobs 1 2>&1 | grep -vE "^\[----\] *$" || rc=1
done

RES=$OUTDIR/kernels-results.md
{
	echo "# router-ahead kernel: $(date -u +%Y-%m-%d), $(nvidia-smi --query-gpu=name --format=csv,noheader | head -1)"
	echo
	# shellcheck disable=SC2016 # backquotes are markdown
	echo '## Time per launch (`fs-bench-ra kernel 20`)'
	echo
	"$B/bench/kernels/fs-bench-ra" kernel 20
} | tee "$RES" || rc=1

RUN=$(mktemp -d /tmp/fsk-XXXXXX)
e2e() # label, daemon args...
{
	local label=$1
	shift
	"$B/daemon/foresightd" --backend cuda --socket "$RUN/s.sock" --slots 512 --layers 16 --experts 64 \
		--expert-bytes 262144 --predicted-slots 16 "$@" 2>>"$RUN/d.log" &
	local dpid=$!
	for _ in $(seq 300); do
		"$B/tools/fsctl/fsctl" --socket "$RUN/s.sock" ping >/dev/null 2>&1 && break
		sleep 0.1
	done
	{
		echo
		echo "## End to end, hot thread $label (\`fs-bench-ra e2e SOCK 200\`)"
		echo
		"$B/bench/kernels/fs-bench-ra" e2e "$RUN/s.sock" 200
	} | tee -a "$RES" || rc=1
	kill "$dpid"
	wait "$dpid" || true
}
e2e "sleeping when idle (default: spin 50 us, dev_poll_us 50)"
e2e "spinning (--spin-us 10000000)" --spin-us 10000000
tail -20 "$RUN/d.log"
echo "== done (rc $rc)"
exit $rc
