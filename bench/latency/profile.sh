#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
#
# bench/latency/profile.sh: where post -> copy issued goes, stage by stage
# (perf is not available on the lent machines: the daemon stamps each stage
# itself in a bench-only build).
#
#   bash bench/latency/profile.sh [OUTDIR]   (OUTDIR default $OUT or /tmp/fs-latprof)
#   PROF_BACKEND=cuda bash bench/latency/profile.sh "$OUT/prof"   (on a GPU machine)
#
# Builds build-stamps with -DFS_BENCH_STAMPS=ON (daemon/fsd_stamps.h), then
# per policy (PROF_POLICIES, default "spin default norhythm": spin =
# --spin-us 10000000; default = the defaults, spin 50 us then the engines'
# rhythm; norhythm = --rhythm-us 0, spin 50 us then sleep until woken) a
# fresh foresightd --backend PROF_BACKEND (host, default: the
# bench/latency/run.sh configuration, 64 KiB experts; cuda: the bench/gpu
# latency rows' configuration, 1.8 MiB experts, engine fs-gpu-check) and the
# engine (PROF_RUNS runs of PROF_N samples, one every 200 us), both writing
# their stamps; joined on the slot's issued_ns:
#   post call      the engine's fs_post_predict (its kick when the daemon sleeps)
#   post -> wake   the hot thread back from its idle sleep (samples that found it asleep)
#   -> pass        the start of the hot pass that took the copy
#   pass -> submit drain + policy + eviction in that pass
#   submit -> issued  the backend: host, the copy thread waking up; cuda, the
#                  hot thread's cudaSetDevice + cudaMemcpyAsync (issued_ns is stamped at its
#                  return, before the ready word's cuStreamWriteValue32)
#   post -> issued the row bench/latency/run.sh and bench/gpu/run.sh report
# Output: OUTDIR/latprof.md (table) and OUTDIR/latprof.log.  Exits non-zero
# when a policy's stamps are missing or do not join.
set -euo pipefail
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
cd "$ROOT"
OUTDIR=${1:-${OUT:-/tmp/fs-latprof}}
mkdir -p "$OUTDIR"
exec > >(tee "$OUTDIR/latprof.log") 2>&1
# shellcheck source=bench/lib.sh
source bench/lib.sh
B=${PROF_BUILD:-build-stamps}
BENCH_CMAKE_ARGS=(-DFS_BENCH_STAMPS=ON -DFS_BUILD_TESTS=OFF -DCMAKE_BUILD_TYPE=Release)
# gpu: the deps from .debs/ where it is carried (the lent machines); Release.
BACKEND=${PROF_BACKEND:-host}
if [ "$BACKEND" = cuda ]; then
	FS_BENCH_PREBUILT=0 bench_build "$B" gpu foresightd fsctl fs-gpu-check
	L=$B/bench/gpu/fs-gpu-check
	XB=1887436
else
	FS_BENCH_PREBUILT=0 bench_build "$B" gpu foresightd fsctl fs-post-latency
	L=$B/bench/latency/fs-post-latency
	XB=65536
fi
D=$B/daemon/foresightd
F=$B/tools/fsctl/fsctl
# shellcheck disable=SC2206 # a word list on purpose
POLS=(${PROF_POLICIES:-spin default norhythm})
N=${PROF_N:-1000}
RUNS=${PROF_RUNS:-3}
RUN=$(mktemp -d /tmp/fsp-XXXXXX)
DPID=
stop_daemon() { [ -z "$DPID" ] || { kill "$DPID" 2>/dev/null || true; wait "$DPID" || true; DPID=; }; }
trap 'stop_daemon; rm -rf "$RUN"' EXIT
declare -A ARGS=([spin]="--spin-us 10000000" [default]="" [norhythm]="--rhythm-us 0" [adapt]="--spin-adapt-us 1000 --rhythm-us 0")
fail=0
# p50 and p99 (us) of the numbers (ns) on stdin: "p50 / p99 (n)".
pct() { sort -n | awk '{ v[NR] = $1 } END { if (NR == 0) { print "- (0)"; exit }
	i50 = int(NR / 2) + 1; i99 = int(NR * 99 / 100) + 1; if (i99 > NR) i99 = NR
	printf "%.1f / %.1f (%d)", v[i50] / 1e3, v[i99] / 1e3, NR }'; }
{
	echo "# post -> copy issued by stage, $BACKEND backend ($(date -u +%Y-%m-%dT%H:%MZ), $(nproc) CPUs, load $(cut -d' ' -f1-3 /proc/loadavg))"
	echo
	echo "$RUNS runs of $N samples per policy; p50 / p99 in us (samples)."
	echo
	printf '| stage |'
	printf ' %s |' "${POLS[@]}"
	echo
	printf '|---|'; printf -- '---|%.0s' "${POLS[@]}"; echo
} >"$RUN/head.md"
declare -A COL
for pol in "${POLS[@]}"; do
	rm -f "$RUN/s.sock"
	# shellcheck disable=SC2086 # the policy's arguments are a word list
	FS_BENCH_STAMPS="$RUN/d-$pol.txt" "$D" --backend "$BACKEND" --cards 1 --socket "$RUN/s.sock" --layers 8 \
		--experts 128 --expert-bytes $XB --slots 256 --tiers 0 --publish-us 0 ${ARGS[$pol]} 2>>"$RUN/d.log" &
	DPID=$!
	for _ in $(seq 300); do "$F" --socket "$RUN/s.sock" ping >/dev/null 2>&1 && break; sleep 0.1; done
	l0=$(wc -l <"$RUN/d.log")
	t0=$(awk '{ print $14 + $15 }' "/proc/$DPID/stat") n0=$(date +%s%N)
	FS_POST_LAT_STAMPS="$RUN/c-$pol.txt" timeout 120 "$L" latency "$RUN/s.sock" "$N" 200 "$RUNS" | tail -1 || fail=1
	t1=$(awk '{ print $14 + $15 }' "/proc/$DPID/stat" 2>/dev/null || echo "$t0") n1=$(date +%s%N)
	COL[$pol,cpu]=$(awk -v d=$((t1 - t0)) -v hz="$(getconf CLK_TCK)" -v ns=$((n1 - n0)) \
		'BEGIN { printf "%.0f %%", 100 * d / hz / (ns / 1e9) }')
	stop_daemon
	# The idle policy's own account, logged as the daemon stops (fsd_hot.c).
	rh=$(tail -n +$((l0 + 1)) "$RUN/d.log" | grep -o "posts found it awake.*" | tail -1 || true)
	[ -z "$rh" ] || echo "$pol: $rh"
	if [ ! -s "$RUN/d-$pol.txt" ] || [ ! -s "$RUN/c-$pol.txt" ]; then
		echo "profile: $pol: no stamps (daemon $(wc -l <"$RUN/d-$pol.txt" 2>/dev/null || echo 0), engine $(wc -l <"$RUN/c-$pol.txt" 2>/dev/null || echo 0))"
		fail=1
		continue
	fi
	# Join: engine "post posted issued seen" with daemon "issued wake pass submit".
	awk 'NR == FNR { d[$1] = $2 " " $3 " " $4; next }
		($3 in d) { split(d[$3], x, " "); print $1, $2, $3, $4, x[1], x[2], x[3] }' \
		"$RUN/d-$pol.txt" "$RUN/c-$pol.txt" >"$RUN/j-$pol.txt"
	j=$(wc -l <"$RUN/j-$pol.txt")
	echo "$pol: $j of $(wc -l <"$RUN/c-$pol.txt") samples joined"
	[ "$j" -gt 0 ] || { fail=1; continue; }
	J=$RUN/j-$pol.txt # post posted issued seen wake pass submit
	COL[$pol,call]=$(awk '{ print $2 - $1 }' "$J" | pct)
	COL[$pol,wake]=$(awk '$5 > $1 && $5 <= $6 { print $5 - $1 }' "$J" | pct)
	COL[$pol,towp]=$(awk '$5 > $1 && $5 <= $6 { print $6 - $5 }' "$J" | pct)
	COL[$pol,topass]=$(awk '{ print ($6 > $1 ? $6 - $1 : 0) }' "$J" | pct)
	COL[$pol,submit]=$(awk '{ print $7 - $6 }' "$J" | pct)
	COL[$pol,issued]=$(awk '{ print $3 - $7 }' "$J" | pct)
	COL[$pol,total]=$(awk '{ print $3 - $1 }' "$J" | pct)
done
{
	cat "$RUN/head.md"
	row() {
		printf '| %s |' "$1"
		for p in "${POLS[@]}"; do printf ' %s |' "${COL[$p,$2]:--}"; done
		echo
	}
	row "post call (engine: fs_post_predict, its kick)" call
	row "post -> hot thread back from sleep (samples that slept)" wake
	row "  then -> pass start (samples that slept)" towp
	row "post -> start of the pass that took the copy" topass
	row "pass start -> submit (drain + policy + eviction)" submit
	if [ "$BACKEND" = cuda ]; then
		row "submit -> issued (cuda: cudaSetDevice + cudaMemcpyAsync; the ready word's cuStreamWriteValue32 comes after the stamp)" issued
	else
		row "submit -> issued (host backend: copy thread wake-up)" issued
	fi
	row "**post -> issued**" total
	row "daemon CPU while the engine posts (% of a core)" cpu
} | tee "$OUTDIR/latprof.md"
[ $fail = 0 ] || { echo "profile: FAILED (missing stamps)"; exit 1; }
