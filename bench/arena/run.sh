#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
#
# bench/arena/run.sh: the arena load against cat and the bounds on a GPU
# machine (no package registry there), at 16 GiB (and 2 GiB), in one go.
#
#   bash bench/arena/run.sh [OUTDIR]     (OUTDIR default $OUT or /tmp/fs-arena)
#
# 1. prints the machine's page settings (kernel, shmem_enabled, THP,
#    the hugetlb pool), unpacks .debs/ with tools/device-setup.sh and builds
#    fs-bench-arena (Release, build-arena/);
# 2. writes the ${ARENA_BIG:-16G} file (in ${ARENA_DIR:-the repository}/, on
#    the machine's disk, not /tmp, which may be RAM) and measures it warm as
#    the machine is lent (4 KiB shmem pages where shmem_enabled is never):
#    the default rows and the bounds (--warm-only --lean);
# 3. the chosen configuration, shmem huge pages: as root, shmem_enabled set
#    to advise (what foresightd.service's ExecStartPre does where it is
#    never), fs-bench-arena --rounds ${ARENA_ROUNDS:-2}: the goal's rows (cat
#    cold, the daemon's default load cold, cat warm, the default load warm,
#    the bounds) ARENA_ROUNDS times in turn, then once the comparison (cold
#    O_DIRECT and buffered without readahead, the fills, the population's
#    other ways; ARENA_LEAN=1: not), the setting put back (ARENA_SHMEM_THP=0:
#    not run; =asis: run without touching the setting, to test this script);
# 4. while under ${ARENA_BUDGET_S:-400} s: warm with hugetlb pages
#    (vm.nr_hugepages raised by what the arena needs, put back;
#    ARENA_HUGETLB=0: not), then ${ARENA_SMALL:-2G} as lent (ARENA_SMALL=0:
#    not); skipped (and said so) past the budget;
# 5. writes every table to OUTDIR/arena-results.md (and the log to
#    OUTDIR/arena-run.log), ends with the goal's verdict lines of step 3
#    (MET / NOT MET: the daemon's default in every round), and exits 1 when a
#    run fails, a row is missing or step 3 printed no verdict.
# About 4 minutes on 16 cores / 128 GiB / NVMe (the device limit is 10).
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
LAST=$OUTDIR/arena-last.txt
run() # title, args...: the bench's output appended to $RES; $LAST: a copy
{
	local title=$1 out st=0
	shift
	echo "== $title: fs-bench-arena $* (${SECONDS} s elapsed)"
	out=$(mktemp /tmp/fs-arena-run-XXXXXX)
	"$B" "$@" >"$out" 2>&1 || st=$?
	{
		echo
		echo "### $title"
		echo
		echo '```'
		echo "fs-bench-arena $*"
		cat "$out"
		[ "$st" = 0 ] || echo "FAILED: exit $st"
		echo '```'
	} | tee -a "$RES"
	[ "$st" = 0 ] || rc=1 # here, not in the pipeline's subshell
	cp "$out" "$LAST"
	rm -f "$out"
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
run "$BIG warm, as lent (writes the file)" --bytes "$BIG" --lock --dir "$DIR" --keep --warm-only --lean
BIGF=$(sed -n 's/^wrote \(.*\): [0-9]* layers.*/\1/p' "$LAST" | head -1)
if [ -z "$BIGF" ] || [ ! -f "$BIGF" ]; then
	echo "FAILED: the $BIG file was not kept"
	exit 1
fi
CHOSEN=$OUTDIR/arena-chosen.txt
: >"$CHOSEN"

# The chosen configuration, shmem huge pages: shmem_enabled = advise (what
# the unit's ExecStartPre sets where it is never; the arena asks with
# MADV_HUGEPAGE and is filled through the mapping), the goal's rows in
# ARENA_ROUNDS rounds; put back right after (ARENA_SHMEM_THP=0: not run).
LEAN=()
[ "${ARENA_LEAN:-0}" = 1 ] && LEAN=(--lean)
THP_MODE=${ARENA_SHMEM_THP:-${ARENA_TRY_SHMEM_THP:-1}}
if [ "$THP_MODE" = asis ]; then # a test of this script on a shared machine: the setting left alone
	run "$BIG, the goal's rounds as lent (ARENA_SHMEM_THP=asis)" \
		--file "$BIGF" --lock --drop-caches --rounds "${ARENA_ROUNDS:-2}" "${LEAN[@]}"
	cp "$LAST" "$CHOSEN"
elif [ "$THP_MODE" = 1 ]; then
	old=$(sed -n 's/.*\[\(.*\)\].*/\1/p' $THP/shmem_enabled 2>/dev/null || true)
	if [ -n "$old" ] && echo advise >$THP/shmem_enabled 2>/dev/null; then
		run "$BIG, shmem huge pages (shmem_enabled advise): the chosen configuration" \
			--file "$BIGF" --lock --drop-caches --pages shmem --rounds "${ARENA_ROUNDS:-2}" "${LEAN[@]}"
		cp "$LAST" "$CHOSEN"
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
				--file "$BIGF" --warm-only --lock --lean
		else
			skip "$BIG, hugetlb pages" "asked for $want pages, the pool has ${free_hp:-0} free"
		fi
		echo "$old" >$NRHP || { echo "FAILED to put vm.nr_hugepages back to $old"; rc=1; }
	else
		skip "$BIG, hugetlb pages" "$NRHP not writable"
	fi
fi
rm -f "$BIGF" "$LAST"
if [ "$SMALL" = 0 ]; then
	skip "$SMALL" "ARENA_SMALL=0"
elif ((SECONDS > BUDGET)); then
	skip "$SMALL, as lent" "${SECONDS} s > ${BUDGET} s"
else
	run "$SMALL, as lent" --bytes "$SMALL" --lock --drop-caches --dir "$DIR" --lean
fi

# The verdict of the chosen configuration, last (the goal is judged on it).
if ! grep -q '^GOAL ' "$CHOSEN"; then
	echo "FAILED: no verdict (the chosen configuration's run failed or did not run)" >>"$CHOSEN"
	rc=1
fi
{
	echo
	echo "## verdict ($BIG, the chosen configuration, the daemon's default in every round)"
	echo
	grep -E '^(round [0-9]+:|GOAL |FAILED)' "$CHOSEN"
} | tee -a "$RES"
rm -f "$LAST"
echo "== done (rc $rc, ${SECONDS} s): $RES"
exit $rc
