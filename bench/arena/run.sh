#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
#
# bench/arena/run.sh: the arena load against cat and the bounds on a GPU
# machine (no package registry there), at 2 GiB and at 16 GiB, in one go.
#
#   bash bench/arena/run.sh [OUTDIR]     (OUTDIR default $OUT or /tmp/fs-arena)
#
# 1. unpacks .debs/ with tools/device-setup.sh, builds fs-bench-arena
#    (Release, build-arena/);
# 2. fs-bench-arena --lock --drop-caches at ${ARENA_SMALL:-2G} and ${ARENA_BIG:-16G}
#    (files in ${ARENA_DIR:-the repository}/, on the machine's disk, not
#    /tmp, which may be RAM), then the big file again with 32 MiB jobs
#    (cold and warm), and warm only (--warm-only) with 8 and 4 threads and
#    unlocked: where the warm load's time goes (the page population rows,
#    the thread count, the lock);
# 3. writes every table to OUTDIR/arena-results.md (and the log to
#    OUTDIR/arena-run.log) and fails when a run fails or a row is missing
#    (fs-bench-arena exits 1 then).  ARENA_TRY_SHMEM_THP=1 adds a warm run
#    with shmem huge pages (shmem_enabled set to advise and put back; only
#    where /sys is writable).  The warm-only runs are skipped (and
#    say so) once ${ARENA_BUDGET_S:-420} s have passed, so the whole stays
#    under 10 minutes.
# About 6-7 minutes on 16 cores / 128 GiB / NVMe.
set -euo pipefail
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
cd "$ROOT"
OUTDIR=${1:-${OUT:-/tmp/fs-arena}}
DIR=${ARENA_DIR:-$ROOT/.arena-bench}
BIG=${ARENA_BIG:-16G}
SMALL=${ARENA_SMALL:-2G}
mkdir -p "$OUTDIR" "$DIR"
RES=$OUTDIR/arena-results.md
exec > >(tee "$OUTDIR/arena-run.log") 2>&1

echo "== machine"
date -u +%Y-%m-%dT%H:%MZ
nproc
free -g | head -2
df -hT "$DIR" | tail -1
cat /sys/kernel/mm/transparent_hugepage/shmem_enabled || true
grep -E "HugePages_(Total|Free)" /proc/meminfo || true
ulimit -l || true

# shellcheck source=bench/lib.sh
source bench/lib.sh
FS_BENCH_PREBUILT=0 bench_build build-arena gpu fs-bench-arena
B=build-arena/bench/arena/fs-bench-arena
test -x "$B"

rc=0
run() # title, args...
{
	local title=$1
	shift
	echo "== $title: fs-bench-arena $*"
	{
		echo
		echo "### $title"
		echo
		echo '```'
		echo "fs-bench-arena $*"
		"$B" "$@" || { echo "FAILED: exit $?"; rc=1; }
		echo '```'
	} | tee -a "$RES"
}
: >"$RES"
run "$SMALL" --bytes "$SMALL" --lock --drop-caches --dir "$DIR"
run "$BIG" --bytes "$BIG" --lock --drop-caches --dir "$DIR" --keep
KEPT=("$DIR"/fs-bench-arena-*.gguf) # the 2 GiB file was deleted after its run
BIGF=${KEPT[0]}
BUDGET=${ARENA_BUDGET_S:-420}
if [ -f "$BIGF" ]; then
	run "$BIG, 32 MiB jobs" --file "$BIGF" --lock --drop-caches --chunk 32M
	for v in "8 threads:--threads 8 --lock" "4 threads:--threads 4 --lock" "not locked:"; do
		if ((SECONDS > BUDGET)); then
			echo "== $BIG warm, ${v%%:*}: SKIPPED (${SECONDS} s > ${BUDGET} s)" | tee -a "$RES"
			continue
		fi
		# shellcheck disable=SC2086
		run "$BIG warm, ${v%%:*}" --file "$BIGF" --warm-only ${v#*:}
	done
	# Opt-in (ARENA_TRY_SHMEM_THP=1): the warm load with huge pages for
	# shmem (shmem_enabled = advise: the arena asks with MADV_HUGEPAGE),
	# where /sys is writable; the setting is put back right after.
	THP=/sys/kernel/mm/transparent_hugepage/shmem_enabled
	if [ "${ARENA_TRY_SHMEM_THP:-0}" = 1 ]; then
		old=$(sed -n 's/.*\[\(.*\)\].*/\1/p' "$THP" 2>/dev/null || true)
		if [ -n "$old" ] && ((SECONDS <= BUDGET)) && echo advise >"$THP" 2>/dev/null; then
			run "$BIG warm, shmem huge pages (advise)" --file "$BIGF" --warm-only --lock
			echo "$old" >"$THP" || echo "FAILED to put shmem_enabled back to $old"
		else
			echo "== $BIG warm, shmem huge pages: SKIPPED ($THP not writable, or over budget)" | tee -a "$RES"
		fi
	fi
	rm -f "$BIGF"
else
	echo "FAILED: the $BIG file was not kept"
	rc=1
fi
echo "== done (rc $rc): $RES"
exit $rc
