#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
#
# bench/arena/run.sh: the arena load against cat and the bounds on a GPU
# machine (no package registry there), at 2 GiB and at 16 GiB, in one go.
#
#   bash bench/arena/run.sh [OUTDIR]     (OUTDIR default $OUT or /tmp/fs-arena)
#
# 1. prints the machine's page settings (kernel, shmem_enabled, THP,
#    the hugetlb pool), unpacks .debs/ with tools/device-setup.sh and builds
#    fs-bench-arena (Release, build-arena/);
# 2. fs-bench-arena --lock --drop-caches at ${ARENA_SMALL:-2G} and
#    ${ARENA_BIG:-16G} as the machine is lent (files in ${ARENA_DIR:-the
#    repository}/, on the machine's disk, not /tmp, which may be RAM):
#    shmem arena, the daemon's fill, the map and write fills side by side;
# 3. the chosen configuration, shmem huge pages: as root, shmem_enabled set
#    to advise (what foresightd.service's ExecStartPre does where it is
#    never), the big file cold and warm, the setting put back
#    (ARENA_SHMEM_THP=0: not run);
# 4. while under ${ARENA_BUDGET_S:-400} s: warm with hugetlb pages
#    (vm.nr_hugepages raised by what the arena needs, put back;
#    ARENA_HUGETLB=0: not) and warm with 32 MiB jobs; skipped (and said
#    so) past the budget;
# 5. writes every table to OUTDIR/arena-results.md (and the log to
#    OUTDIR/arena-run.log) and fails when a run fails or a row is missing
#    (fs-bench-arena exits 1 then).
# About 6 minutes on 16 cores / 128 GiB / NVMe (the device limit is 10).
set -euo pipefail
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
cd "$ROOT"
OUTDIR=${1:-${OUT:-/tmp/fs-arena}}
DIR=${ARENA_DIR:-$ROOT/.arena-bench}
BIG=${ARENA_BIG:-16G}
SMALL=${ARENA_SMALL:-2G}
BUDGET=${ARENA_BUDGET_S:-400}
mkdir -p "$OUTDIR" "$DIR"
RES=$OUTDIR/arena-results.md
exec > >(tee "$OUTDIR/arena-run.log") 2>&1

THP=/sys/kernel/mm/transparent_hugepage
NRHP=/proc/sys/vm/nr_hugepages
pages() # the page settings the load depends on
{
	echo "kernel $(uname -r)"
	echo "shmem_enabled: $(cat $THP/shmem_enabled 2>/dev/null || echo absent)"
	echo "shmem_enabled 2048kB: $(cat $THP/hugepages-2048kB/shmem_enabled 2>/dev/null || echo absent)"
	echo "THP enabled: $(cat $THP/enabled 2>/dev/null || echo absent); defrag: $(cat $THP/defrag 2>/dev/null || echo absent)"
	echo "vm.nr_hugepages: $(cat $NRHP 2>/dev/null || echo absent)"
	grep -E "HugePages_(Total|Free)|Hugepagesize" /proc/meminfo | tr -s ' ' | paste -sd ' ' || true
}
echo "== machine"
date -u +%Y-%m-%dT%H:%MZ
nproc
free -g | head -2
df -hT "$DIR" | tail -1
ulimit -l || true
pages

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
	echo "== $title: fs-bench-arena $* (${SECONDS} s elapsed)"
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
skip() { echo "== $1: SKIPPED ($2)" | tee -a "$RES"; }
: >"$RES"
{
	echo "## machine"
	echo
	echo '```'
	pages
	echo '```'
} >>"$RES"
run "$SMALL, as lent" --bytes "$SMALL" --lock --drop-caches --dir "$DIR"
run "$BIG, as lent" --bytes "$BIG" --lock --drop-caches --dir "$DIR" --keep
KEPT=("$DIR"/fs-bench-arena-*.gguf) # the small file was deleted after its run
BIGF=${KEPT[0]}
if [ ! -f "$BIGF" ]; then
	echo "FAILED: the $BIG file was not kept"
	exit 1
fi

# The chosen configuration, shmem huge pages: shmem_enabled = advise (what
# the unit's ExecStartPre sets where it is never; the arena asks with
# MADV_HUGEPAGE and is filled through the mapping), the big file cold and
# warm; put back right after (ARENA_SHMEM_THP=0: not run).
if [ "${ARENA_SHMEM_THP:-${ARENA_TRY_SHMEM_THP:-1}}" = 1 ]; then
	old=$(sed -n 's/.*\[\(.*\)\].*/\1/p' $THP/shmem_enabled 2>/dev/null || true)
	if [ -n "$old" ] && echo advise >$THP/shmem_enabled 2>/dev/null; then
		run "$BIG, shmem huge pages (shmem_enabled advise): the chosen configuration" \
			--file "$BIGF" --lock --drop-caches --pages shmem
		echo "$old" >$THP/shmem_enabled || { echo "FAILED to put shmem_enabled back to $old"; rc=1; }
	else
		skip "$BIG, shmem huge pages" "$THP/shmem_enabled not writable"
	fi
fi

# hugetlb pages (the pool raised by the arena's pages and a margin, put
# back after; ARENA_HUGETLB=0: not run): what an administrator's
# vm.nr_hugepages gives; foresightd takes the pool when it holds the arena.
if [ "${ARENA_HUGETLB:-1}" = 1 ]; then
	old=$(cat $NRHP 2>/dev/null || echo)
	hp_kb=$(sed -n 's/^Hugepagesize: *\([0-9]*\) kB/\1/p' /proc/meminfo)
	if ((SECONDS > BUDGET)); then
		skip "$BIG, hugetlb pages" "${SECONDS} s > ${BUDGET} s"
	elif [ -n "$old" ] && [ -n "$hp_kb" ] && [ -w $NRHP ]; then
		want=$(($(stat -c %s "$BIGF") / (hp_kb * 1024) + 64))
		echo $((old + want)) >$NRHP || true
		free_hp=$(sed -n 's/^HugePages_Free: *\([0-9]*\)/\1/p' /proc/meminfo)
		if [ "${free_hp:-0}" -ge "$want" ]; then
			run "$BIG warm, hugetlb pages (vm.nr_hugepages $old -> $((old + want)))" \
				--file "$BIGF" --warm-only --lock
		else
			skip "$BIG, hugetlb pages" "asked for $want pages, the pool has ${free_hp:-0} free"
		fi
		echo "$old" >$NRHP || { echo "FAILED to put vm.nr_hugepages back to $old"; rc=1; }
	else
		skip "$BIG, hugetlb pages" "$NRHP not writable"
	fi
fi
if ((SECONDS > BUDGET)); then
	skip "$BIG warm, 32 MiB jobs" "${SECONDS} s > ${BUDGET} s"
else
	run "$BIG warm, 32 MiB jobs" --file "$BIGF" --warm-only --lock --chunk 32M
fi
rm -f "$BIGF"
echo "== done (rc $rc, ${SECONDS} s): $RES"
exit $rc
