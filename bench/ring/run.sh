#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
#
# bench/ring/run.sh: the ring's goals as rows (bench/rows.sh), from
# fs-bench-ring run RING_RUNS times (default 2); each row reports the worst
# of the runs (each run is already the best of 3 interleaved repetitions).
# CPU only: runs here and, through bench/device.sh, on the quiet GPU machine.
#
#   bash bench/ring/run.sh [OUTDIR]      (OUTDIR default $OUT or /tmp/fs-ring)
#
# Rows: one record per post >= 90 M records/s and >= 10 x the mutex+condvar
# queue measured in the same run; the sleeping consumer's post -> observed
# p99 with the asymmetric handshake within 1.2 x the seq_cst one's, measured
# side by side; the consumer's cost of going to sleep and the speed-up of
# the asymmetric post (info), and what a kick per 32 posts instead of per
# post would add with a consumer that takes groups (info: the case for
# io_uring's submit model, not adopted).  Exits non-zero when a row is
# missing or failed.
# FS_BENCH_PREBUILT=1: FS_BENCH_BUILD (default build) is built, skip the build.
# RING_ARGS: fs-bench-ring's arguments (default: shorter runs than its own).
set -euo pipefail
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
cd "$ROOT"
OUTDIR=${1:-${OUT:-/tmp/fs-ring}}
mkdir -p "$OUTDIR"
exec > >(tee "$OUTDIR/ring-run.log") 2>&1
# shellcheck source=bench/rows.sh
source bench/rows.sh
rows_init "$OUTDIR/ring-rows.tsv"
RUNS=${RING_RUNS:-2}
row_promise ring-one ">= 90 M/s" "one record per post, best consumer, worst of $RUNS runs"
row_promise ring-ratio ">= 10 x" "one record per post: ring / mutex+condvar queue, same run, worst of $RUNS"
row_promise ring-wake "<= 1.2 x" "sleeping consumer, post -> observed p99: asymmetric / seq_cst handshake, worst of $RUNS"
row_promise ring-asym info "one record per post: asymmetric / seq_cst post, consumer polls lines"
row_promise ring-sleep-entry info "consumer going to sleep: asymmetric (membarrier) / seq_cst"
row_promise ring-defer info "one record per post: kick per 32 posts / kick per post, consumer takes groups (io_uring's model, not adopted)"
row_promise ring-gain info "one record per post, consumer takes groups: this code / session 6's (write prefetch ahead, bulk copy out)"

B=${FS_BENCH_BUILD:-build}
# shellcheck source=bench/lib.sh
source bench/lib.sh
bench_build "$B" host fs-bench-ring
R=$B/bench/ring/fs-bench-ring
# shellcheck disable=SC2206 # a word list on purpose
ARGS=(${RING_ARGS:---max-run-ms 600 --samples 50000})

pin=
one=() ratio=() wake=() asym=() entry=() defer=() gain=()
fail=
for i in $(seq "$RUNS"); do
	echo "== fs-bench-ring ${ARGS[*]} (run $i of $RUNS)"
	rc=0
	out=$("$R" "${ARGS[@]}" 2>&1) || rc=$?
	echo "$out"
	if [ $rc != 0 ]; then
		fail="fs-bench-ring exit $rc (run $i)"
		continue
	fi
	one+=("$(sed -n 's/^ring records\/s: \([0-9]*\)$/\1/p' <<<"$out")")
	ratio+=("$(sed -n 's/^ring\/baseline throughput ratio: \([0-9.]*\)$/\1/p' <<<"$out")")
	asym+=("$(sed -n 's/^one-at-a-time, asymmetric \/ seq_cst post (consumer polls lines): \([0-9.]*\)$/\1/p' <<<"$out")")
	w=$(sed -n 's/^sleeping consumer, post -> observed p50 \/ p99 ns: asymmetric \([0-9]*\) \/ \([0-9]*\), seq_cst \([0-9]*\) \/ \([0-9]*\)$/\1 \2 \3 \4/p' <<<"$out")
	wake+=("$w")
	entry+=("$(sed -n 's/^consumer going to sleep (fs_ring_sleep_prepare, mean of 2000): asymmetric \([0-9]*\) ns, seq_cst \([0-9]*\) ns$/\1 \/ \2 ns/p' <<<"$out")")
	defer+=("$(sed -n 's/^one-at-a-time, kick per 32 posts \/ kick per post (consumer takes groups): \([0-9.]*\)$/\1/p' <<<"$out")")
	gain+=("$(sed -n 's/^one-at-a-time, this code \/ session 6.s ([^)]*): \([0-9.]*\)$/\1/p' <<<"$out")")
	pin=$(grep -m1 '^pinning' <<<"$out" || true)
	grep -q "^ring wake-up: asymmetric" <<<"$out" || fail="the asymmetric handshake is not available here (membarrier)"
done
worst() { printf '%s\n' "$@" | awk 'NF { v = $1 + 0; if (n++ == 0 || v < m) m = v } END { if (n) print m }'; }
worst_max() { printf '%s\n' "$@" | awk 'NF { v = $1 + 0; if (n++ == 0 || v > m) m = v } END { if (n) print m }'; }
if [ -n "$fail" ] || [ ${#one[@]} != "$RUNS" ]; then
	for r in ring-one ring-ratio ring-wake ring-asym ring-sleep-entry ring-defer ring-gain; do row_fail "$r" "${fail:-a run printed no figures}"; done
else
	row_ok ring-one "$(worst "${one[@]}" | awk '{ printf "%.1f M/s", $1 / 1e6 }')" \
		"runs: $(printf '%s\n' "${one[@]}" | awk '{ printf "%s%.1f", (NR > 1 ? " / " : ""), $1 / 1e6 }')"
	row_ok ring-ratio "$(worst "${ratio[@]}") x" "runs: $(printf '%s\n' "${ratio[@]}" | paste -sd/)"
	# p99 asymmetric / p99 seq_cst per run, the worst (largest) of them.
	wr=()
	for w in "${wake[@]}"; do wr+=("$(awk '{ if ($4 > 0) printf "%.2f", $2 / $4 }' <<<"$w")"); done
	row_ok ring-wake "$(worst_max "${wr[@]}") x" \
		"p50/p99 us asym vs seq_cst: $(printf '%s\n' "${wake[@]}" | awk '{ printf "%s%.1f/%.1f vs %.1f/%.1f", (NR > 1 ? "; " : ""), $1 / 1e3, $2 / 1e3, $3 / 1e3, $4 / 1e3 }')"
	row_ok ring-asym "$(worst "${asym[@]}") x" "runs: $(printf '%s\n' "${asym[@]}" | paste -sd/)"
	row_ok ring-sleep-entry "${entry[0]}" "runs: $(printf '%s\n' "${entry[@]}" | paste -sd';')"
	# The largest gain a deferred kick would give (the case for adopting it).
	row_ok ring-defer "$(worst_max "${defer[@]}") x" "runs: $(printf '%s\n' "${defer[@]}" | paste -sd/)"
	row_ok ring-gain "$(worst "${gain[@]}") x" "runs: $(printf '%s\n' "${gain[@]}" | paste -sd/)"
fi
{
	echo "# fs-bench-ring, $RUNS runs: $(date -u +%Y-%m-%dT%H:%MZ), $(nproc) CPUs, load $(cut -d' ' -f1 /proc/loadavg)"
	echo
	echo "${pin:-pinning: (no run printed it)}"
	echo
	rows_summary "$ROWS_FILE" || true
} | tee "$OUTDIR/ring-results.md"
rows_summary "$ROWS_FILE" >/dev/null
