#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
#
# tools/mutate.sh: break each guarded invariant on purpose and check that the
# tests go red every time (issue #24).  A test suite that passes with a
# check removed does not test that check.
#
#   bash tools/mutate.sh [--list] [--check] [--full] [--no-baseline] [NAME...]
#
# For each mutant (all, or the NAMEs given): apply it to the source (one
# perl substitution that must match exactly once in the files it names),
# build, run the tests that guard it, restore the source.  A mutant is
# "killed" when those tests fail, "SURVIVED" when they pass.  Before the
# first mutant the same tests run on the unmutated tree and must pass (a red
# baseline would make every kill meaningless).  Exits 0 only when every
# mutant was killed; 1 when one survived; 2 when a mutant's pattern no
# longer matches exactly once (the code moved: update the mutant below, do
# not delete it), or the baseline or a build failed.
#
#   --list   print the mutants and exit
#   --check  only check that every mutant's pattern matches exactly once
#            (seconds, no build: run it after a rebase)
#   --full   run the whole ctest for each mutant instead of its own tests
#   --no-baseline  skip the baseline's test run (tools/test.sh: its test
#            stage ran every test on this build just before)
#
# Environment: FS_BUILD_DIR (default build, configured and built already),
# JOBS (build parallelism, default nproc).  The working tree's files are
# mutated in place and always restored (also on Ctrl-C), then the targets
# the guarding tests need are rebuilt from the unmutated sources (a
# restored file gets a new mtime, so a later full build recompiles what
# includes it).  Each mutant rebuilds only the targets of its tests (and
# what they depend on: foresightd for validation_test).  tools/test.sh runs
# it after its test stage (stage "mutate", --no-baseline): 9 mutants in
# about 4 min on 2 cores at a load average of 10.
set -euo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$ROOT"
B=${FS_BUILD_DIR:-build}
JOBS=${JOBS:-$(nproc 2>/dev/null || echo 2)}

# ---- the mutants ------------------------------------------------------------
# mutant NAME "FILES" REGEX REPLACEMENT CTEST_REGEX WHAT
#   FILES: globs searched together; REGEX (perl, multi-line, /s off) must
#   match exactly once in all of them; REPLACEMENT is literal text.
NAMES=() FILES=() RES=() REPS=() TESTS=() WHATS=()
mutant()
{
	NAMES+=("$1")
	FILES+=("$2")
	RES+=("$3")
	REPS+=("$4")
	TESTS+=("$5")
	WHATS+=("$6")
}

# Unchecked before issue #24 (validation_test now guards them).
mutant hold-timeout "daemon/engine/fse_pass.c" \
	'fse_finish\(\s*e\s*,\s*c\s*,\s*FS_DETACH_HOLD_TIMEOUT\s*\)\s*;(\s*break\s*;)' \
	'/* MUTANT hold-timeout: no revocation */ break;' \
	'^validation_test$' \
	"an epoch held past hold_timeout_ms is not revoked"
mutant record-layer-expert-bounds "proto/fs_rec.h" \
	'(\w+)->layer\s*>=\s*[\w.>-]*layers\s*\|\|\s*\g1->expert\s*>=\s*[\w.>-]*experts' \
	'0 /* MUTANT record-layer-expert-bounds */' \
	'^validation_test$' \
	"records with layer >= layers or expert >= experts reach the core (bad_records not counted)"
mutant record-card-bound "proto/fs_rec.h" \
	'(\w+)->card\s*!=\s*FS_CARD_NONE\s*&&\s*\g1->card\s*>=\s*[\w.>-]*cards' \
	'0 /* MUTANT record-card-bound */' \
	'^validation_test$' \
	"records naming card >= cards reach the core (bad_records not counted)"
mutant record-score "proto/fs_rec.h" \
	'fs_rec_score_ok\(uint32_t bits\)\s*\{[^}]*\}' \
	'fs_rec_score_ok(uint32_t bits)
{
	(void)bits;
	return 1; /* MUTANT record-score */
}' \
	'^validation_test$' \
	"predictions with a NaN, negative or infinite score reach the core"

# Caught before issue #24 (kept so they stay caught).
mutant ring-resync "proto/fs_ring.h" \
	'if \(fs_unlikely\(avail > c->entries\)\)' \
	'if (0 /* MUTANT ring-resync */)' \
	'^fs_ring_test$' \
	"an impossible ring tail is consumed instead of resynchronised"
mutant ring-wake "common/fs_ring.c" \
	'__atomic_fetch_add\(&hdr->wake_seq, 1u, __ATOMIC_SEQ_CST\);\s*fs_futex_wake\(&hdr->wake_seq, 1\);' \
	'/* MUTANT ring-wake: NEED cleared, no wake-up */' \
	'^fs_ring_test$' \
	"a post to a consumer that asked to be woken does not wake it (lost wake-up)"
mutant grace-reclaim "daemon/residency/fsr_slots.c" \
	'slot\[cd->ret_head\]\.retire\s*<=\s*upto' \
	'slot[cd->ret_head].retire <= (upto | UINT64_MAX) /* MUTANT grace-reclaim */' \
	'^fsr_(test|card_test|place_test|tier_test|sched_test)$' \
	"retiring slots are freed while a held epoch still maps them (no grace period)"
mutant hold-epoch-check "daemon/residency/fsr_clients.c" \
	'if \((\w+) > r->published\) \{' \
	'if (0 /* MUTANT hold-epoch-check */) {' \
	'^fsr_(test|card_test|place_test|tier_test|sched_test)$' \
	"a hold naming an epoch never published is trusted"
# Issue 33 (one tier shared safely).
mutant hold-not-acquired "daemon/engine/fse_holds.c" \
	'if \(h < e->hold_floor\)' \
	'if (0 /* MUTANT hold-not-acquired */)' \
	'^fse_test$' \
	"a hold word naming an epoch superseded before the word took it (never acquired) is honoured"
mutant hold-refusal-sticky "daemon/engine/fse_holds.c" \
	'if \(h == c->hold_bad\[k\]\)' \
	'if (0 /* MUTANT hold-refusal-sticky */)' \
	'^fse_test$' \
	"a refused hold word (a future epoch) counts once its epoch is published"
mutant reach-ignored "daemon/residency/fsr_clients.c" \
	'if \(cl->reach == 0\)\s*return 1;' \
	'/* MUTANT reach-ignored: an undeclared reach reads as none */' \
	'^fsr_test$' \
	"a client that says nothing of its reach (an older library's fs_lookup_live) pins only its own tables"
mutant reach-pins-all "daemon/residency/fsr_clients.c" \
	'return sl->pub <= vis;' \
	'return (sl->pub <= vis) | 1; /* MUTANT reach-pins-all */' \
	'^fsr_test$' \
	"a hold pins every slot retired after it, whatever tables its client reads"
mutant pin-budget "daemon/engine/fse_holds.c" \
	'if \(pinned <= budget \|\| !worst\)' \
	'if (1 /* MUTANT pin-budget */)' \
	'^fse_test$' \
	"a user's holds pinning past its budget are never revoked"
mutant arena-keep-checksum "daemon/fsd_arena_keep.c" \
	'if \(fs_fnv1a64\(\(const char \*\)h \+ e\[i\]\.offset, \(size_t\)e\[i\]\.bytes\) != e\[i\]\.checksum\)' \
	'if (0 /* MUTANT arena-keep-checksum */)' \
	'^fault_test$' \
	"a kept arena whose sampled blob changed is reused"
mutant gguf-cursor-bound "daemon/gguf/fsg_cursor.c" \
	'if \(n <= c->len - c->pos\)\s*return 0;' \
	'return 0; /* MUTANT gguf-cursor-bound */' \
	'^fsg_(corrupt|reader)_test$' \
	"the GGUF reader reads past the bytes it has"

# ---- driver -------------------------------------------------------------------

list=0 full=0 check=0 baseline=1 want=()
for a in "$@"; do
	case "$a" in
	--list) list=1 ;;
	--full) full=1 ;;
	--check) check=1 ;;
	--no-baseline) baseline=0 ;;
	-h | --help)
		sed -n '4,35p' "${BASH_SOURCE[0]}" | sed 's/^# \{0,1\}//'
		exit 0
		;;
	-*)
		echo "mutate.sh: unknown option $a" >&2
		exit 2
		;;
	*) want+=("$a") ;;
	esac
done
if [[ $list -eq 1 ]]; then
	for i in "${!NAMES[@]}"; do
		printf '%-28s %-22s %s\n' "${NAMES[$i]}" "${TESTS[$i]}" "${WHATS[$i]}"
	done
	exit 0
fi
sel=()
for i in "${!NAMES[@]}"; do
	if [[ ${#want[@]} -eq 0 ]] || printf '%s\n' "${want[@]}" | grep -qx "${NAMES[$i]}"; then
		sel+=("$i")
	fi
done
for w in "${want[@]}"; do
	printf '%s\n' "${NAMES[@]}" | grep -qx "$w" || {
		echo "mutate.sh: no mutant '$w' (--list)" >&2
		exit 2
	}
done
[[ -f $B/CMakeCache.txt ]] || {
	echo "mutate.sh: $B is not a configured build (cmake -S . -B $B first)" >&2
	exit 2
}

command -v perl >/dev/null || {
	echo "mutate.sh: needs perl" >&2
	exit 2
}

SAVE=$(mktemp -d "${TMPDIR:-/tmp}/fs-mutate.XXXXXX")
MUTATED=()
restore()
{
	local f
	for f in "${MUTATED[@]}"; do
		# a new mtime, so that make rebuilds what the mutant built
		cp "$SAVE/$(echo "$f" | tr / %)" "$f"
		touch "$f"
	done
	MUTATED=()
}
cleanup()
{
	restore
	rm -rf "$SAVE"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

# The files of mutant i that exist, one per line (globs expanded, deduplicated).
files_of()
{
	local g f
	for g in ${FILES[$1]}; do
		for f in $g; do
			[[ -f $f ]] && echo "$f"
		done
	done | sort -u
}

# Matches of mutant i's regex in file $2.
count_in()
{
	MRE=${RES[$1]} perl -0777 -ne '$n = () = /$ENV{MRE}/g; print $n' "$2"
}

# The build targets of the tests matching a ctest regex, one line: each
# test's own target (a criterion test's name is its target, whose
# dependencies bring foresightd where the test needs it), or "all" when a
# test is no target (a script) or --full.  Building only these keeps a
# mutant in a header most files include (proto/fs_rec.h) from rebuilding
# the whole tree.
targets_of()
{
	local t out=()
	if [[ $full -eq 1 ]]; then
		echo all
		return
	fi
	while read -r t; do
		[[ -n $t ]] || continue
		if ! grep -qxF "... $t" "$SAVE/targets"; then
			echo all
			return
		fi
		out+=("$t")
	done < <(ctest --test-dir "$B" -N -R "$1" | sed -n 's/^ *Test *#[0-9]*: *//p')
	[[ ${#out[@]} -gt 0 ]] || {
		echo "mutate.sh: no test matches '$1'" >&2
		return 1
	}
	echo "${out[*]}"
}

build() # TARGETS (as targets_of prints them)
{
	# shellcheck disable=SC2086 # one word per target
	cmake --build "$B" -j "$JOBS" --target $1 >"$SAVE/build.log" 2>&1 || {
		tail -30 "$SAVE/build.log" >&2
		return 1
	}
}

run_tests() # CTEST_REGEX LOG
{
	if [[ $full -eq 1 ]]; then
		ctest --test-dir "$B" --output-on-failure >"$2" 2>&1
	else
		ctest --test-dir "$B" --no-tests=error -R "$1" --output-on-failure >"$2" 2>&1
	fi
}

# Every pattern first: a stale one fails before anything is built.  Stale:
# a file (glob) that names no file, or a pattern that matches other than
# exactly once in the files named.
stale=0
for i in "${sel[@]}"; do
	for g in ${FILES[$i]}; do
		# shellcheck disable=SC2086 # the glob is meant to expand
		if ! compgen -G "$g" >/dev/null; then
			echo "mutate.sh: mutant ${NAMES[$i]}: '$g' names no file (the code moved: update the mutant)" >&2
			stale=1
		fi
	done
	total=0
	while read -r f; do
		[[ -n $f ]] || continue
		total=$((total + $(count_in "$i" "$f")))
	done < <(files_of "$i")
	if [[ $total -ne 1 ]]; then
		echo "mutate.sh: mutant ${NAMES[$i]}: its pattern matches $total times (want exactly 1) in: $(files_of "$i" | tr '\n' ' ')" >&2
		echo "mutate.sh:   pattern: ${RES[$i]}" >&2
		echo "mutate.sh:   the code it breaks moved or changed: update the mutant in tools/mutate.sh" >&2
		stale=1
	fi
done
[[ $stale -eq 0 ]] || exit 2
if [[ $check -eq 1 ]]; then
	echo "mutate.sh: every pattern of ${#sel[@]} mutant(s) matches exactly once"
	exit 0
fi

cmake --build "$B" --target help >"$SAVE/targets" 2>/dev/null || true
union=$(for i in "${sel[@]}"; do echo "${TESTS[$i]}"; done | sort -u | paste -sd'|')
union_targets=$(targets_of "$union")
echo "mutate.sh: baseline: build ($union_targets), then the guarding tests on the unmutated tree ($union)"
build "$union_targets" || {
	echo "mutate.sh: the unmutated tree does not build" >&2
	exit 2
}
if [[ $baseline -eq 0 ]]; then
	echo "mutate.sh: baseline tests not run (--no-baseline: the caller ran them on this build)"
elif ! run_tests "$union" "$SAVE/baseline.log"; then
	tail -40 "$SAVE/baseline.log" >&2
	echo "mutate.sh: the baseline is red: fix that first" >&2
	exit 2
fi

survived=0 broken=0
results=()
for i in "${sel[@]}"; do
	name=${NAMES[$i]}
	t0=$(date +%s)
	while read -r f; do
		[[ -n $f ]] || continue
		if [[ $(count_in "$i" "$f") -eq 1 ]]; then
			cp -p "$f" "$SAVE/$(echo "$f" | tr / %)"
			MUTATED+=("$f")
			MRE=${RES[$i]} MREP=${REPS[$i]} perl -0777 -pi -e 's/$ENV{MRE}/$ENV{MREP}/' "$f"
			echo "mutate.sh: $name: $f: ${WHATS[$i]}"
		fi
	done < <(files_of "$i")
	if ! build "$(targets_of "${TESTS[$i]}")"; then
		echo "mutate.sh: $name: the mutant does not build (fix the mutant)" >&2
		results+=("$(printf '%-28s %s' "$name" "BUILD FAILED")")
		broken=1
		restore
		continue
	fi
	log=$B/mutate-$name.log
	if run_tests "${TESTS[$i]}" "$log"; then
		verdict=SURVIVED
		survived=1
	else
		verdict="killed ($(grep -cE '\(Failed\)|\(Timeout\)|\(SEGFAULT\)|Exception' "$log" || true) failing)"
	fi
	restore
	results+=("$(printf '%-28s %-22s %4ss  %s' "$name" "$verdict" "$(($(date +%s) - t0))" "${TESTS[$i]}")")
	echo "mutate.sh: $name: $verdict (log $log)"
done

echo "mutate.sh: restoring the build to the unmutated sources ($union_targets)"
build "$union_targets" || broken=1
echo
echo "== mutate.sh: ${#sel[@]} mutant(s)"
printf '  %s\n' "${results[@]}"
if [[ $broken -ne 0 ]]; then
	echo "== RESULT: BROKEN (a build failed)"
	exit 2
fi
if [[ $survived -ne 0 ]]; then
	echo "== RESULT: FAIL (a mutant survived: the tests do not guard that invariant)"
	exit 1
fi
echo "== RESULT: PASS (every mutant killed)"
