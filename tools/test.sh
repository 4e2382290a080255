#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
#
# tools/test.sh: THE test command of foresight (CI runs it via .ci/run).
#
#   bash tools/test.sh [--quick] [--no-lint] [--no-deps] [--keep-going]
#
# Stages, in order (each prints a header; a summary line per stage at the end):
#   deps   tools/install-deps.sh (silent when everything is installed)
#   build  cmake -S . -B build + build (normal RelWithDebInfo, -Werror)
#   test   ctest --test-dir build: every test (the fuzzers only with --quick:
#          otherwise they run in the asan stage), one at a time, except
#          iso_test (2 rounds) and bench_llama_run_test, which run beside
#          them (with_beside)
#   mutate tools/mutate.sh --no-baseline: breaks each guarded invariant in
#          turn, rebuilds the guarding tests' targets in build/ and expects
#          them to fail (a mutant that survives, or a pattern that no longer
#          matches the code, fails the stage); the sources are mutated in
#          place and restored before the next stage
#   asan   build-asan (-DFS_SANITIZE=address: ASan+UBSan), ctest without the
#          labels "gpu" and "bench-smoke"; iso_test there
#          one 1 s round per attack (FS_ISO_ROUNDS, FS_ISO_SECONDS), beside
#   tsan   build-tsan (-DFS_SANITIZE=thread): ctest -L ring there (the ring
#          tests bring their own runner: Criterion cannot start under
#          TSan); then the integration and fault tests of the normal build
#          with FS_TEST_DAEMON pointing at the TSan foresightd, so the
#          daemon's hot, loop and copy threads run under TSan
#          (halt_on_error: a race kills the daemon and fails the test).
#          Not demo_test and gguf_e2e_test (long; replay and GGUF paths),
#          nor fault_test and iso_test (CI's 30 minutes: 105 s for iso_test
#          at one 1 s round per attack; run them by hand:
#          FS_ISO_ROUNDS=1 FS_ISO_SECONDS=1 FS_TEST_DAEMON=... ctest -R 'fault|iso').
#   release  build-release: a Release (-O3) build of every target, -Werror,
#          no tests: what bench/device.sh builds on the GPU machine; -O3's
#          inlining finds warnings RelWithDebInfo (-O2) does not (an
#          -Warray-bounds false positive stopped a device run in session 7)
#   lint   tools/lint.sh (clang-format + cppcheck)
#
# Options:
#   --quick       deps + build + test only (no mutate)
#   --no-lint     skip the lint stage
#   --no-deps     skip install-deps.sh (machines without a package registry:
#                 source tools/device-setup.sh first)
#   --keep-going  run the remaining stages after a failure (exit status is
#                 still non-zero)
#
# Environment: JOBS (build parallelism, default nproc), CTEST_PARALLEL_LEVEL
# (ctest's own; default serial, timing-sensitive tests prefer that),
# FS_CMAKE_ARGS (extra arguments for every cmake configure), FS_BUILD_DIR
# (default build; the sanitizer builds go to $FS_BUILD_DIR-asan and -tsan).
#
# Sanitizers on kernels with high-entropy ASLR (vm.mmap_rnd_bits > 28):
# older sanitizer runtimes die with "unexpected memory mapping" (TSan) or
# loop on DEADLYSIGNAL (ASan).  Before each sanitizer ctest run a tiny probe
# built with the same compiler and flags is run; if it fails and passes
# under `setarch $(uname -m) -R` (ASLR off), ctest runs under setarch too.
#
# Skips: a test that cannot run here says so and is reported skipped, never
# passed: criterion binaries whose tests all skip exit 77 (tests/
# fs_skip_report.c), scripts exit 77 (SKIP_RETURN_CODE), and partly skipped
# tests print "SKIP: ..." lines.  After each ctest stage the skipped tests
# and the skipped parts of tests that ran are listed by name
# (tools/test-skips.py on the stage's JUnit report), and the summary counts
# them per stage.  A GPU test skips only where no CUDA device or no driver
# exists and fails on any other CUDA error (tests/fs_gpu_need.h);
# FS_REQUIRE_GPU=N (the GPU machine's scripts) promises N devices and turns
# a skip of a test needing <= N devices into a failure.
#
# Exits non-zero on any failure.  Works from any directory.
# shellcheck disable=SC2317 # stage functions are called indirectly via stage()
set -euo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$ROOT"

quick=0
lint=1
deps=1
keep_going=0
for arg in "$@"; do
	case "$arg" in
	--quick) quick=1 ;;
	--no-lint) lint=0 ;;
	--no-deps) deps=0 ;;
	--keep-going) keep_going=1 ;;
	-h | --help)
		sed -n '4,52p' "${BASH_SOURCE[0]}" | sed 's/^# \{0,1\}//'
		exit 0
		;;
	*)
		echo "test.sh: unknown argument '$arg' (try --help)" >&2
		exit 2
		;;
	esac
done

JOBS=${JOBS:-$(nproc 2>/dev/null || echo 2)}
B=${FS_BUILD_DIR:-build}
export FS_BUILD_DIR=$B # tools/lint.sh reads $FS_BUILD_DIR/compile_commands.json
# shellcheck disable=SC2206 # word splitting of FS_CMAKE_ARGS is intended
EXTRA_CMAKE=(${FS_CMAKE_ARGS:-})
CTEST=(ctest --output-on-failure --no-tests=error)
SKIPS=$(mktemp "${TMPDIR:-/tmp}/fs-test-skips.XXXXXX")
trap 'rm -f "$SKIPS"' EXIT

# ---- stage bookkeeping -------------------------------------------------

STAGE_NAMES=()
STAGE_RESULTS=()
STAGE_TIMES=()
failed=0
T0=$(date +%s)

header()
{
	echo
	echo "================================================================"
	echo "== test.sh: $*"
	echo "================================================================"
}

record()
{
	STAGE_NAMES+=("$1")
	STAGE_RESULTS+=("$2")
	STAGE_TIMES+=("$3")
}

summary()
{
	echo
	echo "================================================================"
	echo "== test.sh summary ($(($(date +%s) - T0))s total)"
	local i
	for i in "${!STAGE_NAMES[@]}"; do
		printf '  %-6s %-5s %5ss\n' "${STAGE_NAMES[$i]}" "${STAGE_RESULTS[$i]}" "${STAGE_TIMES[$i]}"
	done
	if [[ -s $SKIPS ]]; then
		echo "== not run (details under each stage's 'skipped' list above):"
		sed 's/^== /  /' "$SKIPS"
	fi
	if [[ $failed -ne 0 ]]; then
		echo "== RESULT: FAIL"
	else
		echo "== RESULT: PASS"
	fi
	echo "================================================================"
}

# stage NAME DESCRIPTION FUNCTION [ARGS...]: runs FUNCTION in a subshell with
# errexit active (not in a conditional context, so set -e really applies).
stage()
{
	local name=$1 desc=$2 t rc
	shift 2
	if [[ $failed -ne 0 && $keep_going -eq 0 ]]; then
		record "$name" "-" 0
		return 0
	fi
	header "$name: $desc"
	t=$(date +%s)
	set +e
	(
		set -euo pipefail
		"$@"
	)
	rc=$?
	set -e
	t=$(($(date +%s) - t))
	if [[ $rc -eq 0 ]]; then
		record "$name" PASS "$t"
	else
		record "$name" FAIL "$t"
		failed=1
		echo "test.sh: stage '$name' FAILED (exit $rc)" >&2
	fi
}

skip()
{
	record "$1" skip 0
}

# ---- helpers -------------------------------------------------------------

configure_build()
{
	local dir=$1
	shift
	cmake -S . -B "$dir" "$@" "${EXTRA_CMAKE[@]}"
	cmake --build "$dir" -j "$JOBS"
}

# Prints the command prefix sanitizer tests need on this machine ("" or
# "setarch <arch> -R"); fails when the sanitizer runtime cannot work at all.
# $1: build dir (its CMakeCache.txt names the compiler), $2..: sanitizer flags.
sanitizer_wrapper()
{
	local dir=$1
	shift
	local cc probe log ok i
	cc=$(sed -n 's/^CMAKE_C_COMPILER:[A-Z]*=//p' "$dir/CMakeCache.txt")
	probe="$dir/fs-san-probe"
	log="$dir/fs-san-probe.log"
	cat >"$probe.c" <<'EOF'
#include <pthread.h>
#include <stdlib.h>
static int counter;
static void *work(void *arg)
{
	(void)arg;
	__atomic_fetch_add(&counter, 1, __ATOMIC_SEQ_CST);
	return NULL;
}
int main(void)
{
	pthread_t t;
	int *p = malloc(sizeof(*p));
	if (!p || pthread_create(&t, NULL, work, NULL))
		return 1;
	pthread_join(t, NULL);
	*p = __atomic_load_n(&counter, __ATOMIC_SEQ_CST);
	int ret = *p == 1 ? 0 : 1;
	free(p);
	return ret;
}
EOF
	"${cc:-cc}" -g -pthread "$@" "$probe.c" -o "$probe" >&2
	# High-entropy ASLR failures are probabilistic: try a few times.
	ok=1
	for i in 1 2 3 4 5; do
		if ! timeout 20 "$probe" >"$log" 2>&1; then
			ok=0
			break
		fi
	done
	if [[ $ok -eq 1 ]]; then
		echo ""
		return 0
	fi
	echo "test.sh: sanitizer probe failed ($*):" >&2
	head -5 "$log" >&2
	local arch
	arch=$(uname -m)
	if setarch "$arch" -R true 2>/dev/null; then
		ok=1
		for i in 1 2 3; do
			if ! timeout 20 setarch "$arch" -R "$probe" >"$log" 2>&1; then
				ok=0
				break
			fi
		done
		if [[ $ok -eq 1 ]]; then
			echo "test.sh: the probe passes with ASLR off: running tests under 'setarch $arch -R'" >&2
			echo "setarch $arch -R"
			return 0
		fi
	fi
	echo "test.sh: the sanitizer runtime does not work on this machine (kernel $(uname -r)," \
		"vm.mmap_rnd_bits=$(cat /proc/sys/vm/mmap_rnd_bits 2>/dev/null || echo '?'))." >&2
	echo "test.sh: try 'sysctl vm.mmap_rnd_bits=28' as root, or allow personality(ADDR_NO_RANDOMIZE)." >&2
	return 1
}

# run_ctest STAGE DIR [PREFIX...] -- [CTEST ARGS...]: ctest in DIR with a
# JUnit report, then the tests it skipped and the skipped parts of tests
# that ran, by name (tools/test-skips.py); the counts go to the summary.
run_ctest()
{
	local stage=$1 dir=$2 rc=0 prefix=()
	shift 2
	while [[ $# -gt 0 && $1 != -- ]]; do
		prefix+=("$1")
		shift
	done
	shift
	local junit="$ROOT/$dir/ctest-junit-$stage.xml"
	rm -f "$junit"
	"${prefix[@]}" "${CTEST[@]}" --test-dir "$dir" --output-junit "$junit" "$@" || rc=$?
	if command -v python3 >/dev/null; then
		python3 tools/test-skips.py "$stage" "$junit"
		python3 tools/test-skips.py --summary "$stage" "$junit" >>"$SKIPS"
	else
		echo "test.sh: no python3: the skipped tests are listed by ctest above ('did not run')"
	fi
	return "$rc"
}

# with_beside STAGE DIR TESTS [PREFIX...] -- [CTEST ARGS...]: run_ctest of
# everything but TESTS (names separated by '|'), one test at a time, while
# TESTS (long tests that start their own daemons in their own directories:
# iso_test, bench_llama_run_test) run beside them in a second ctest (stage
# STAGE-beside; its output printed after).  CI's two cores: iso_test's
# 216 s would otherwise be 216 s of the stage.  What iso_test asserts is
# measured alone and beside the attack in alternate rounds, so the load of
# the other stream falls on both (a test must pass loaded).
with_beside()
{
	local stage=$1 dir=$2 tests=$3 rc=0 rc1=0 pid
	shift 3 # the rest: run_ctest's PREFIX... -- CTEST ARGS..., to which -R / -E are added
	local log="$ROOT/$dir/ctest-$stage-beside.log"
	run_ctest "$stage-beside" "$dir" "$@" -R "^($tests)\$" >"$log" 2>&1 &
	pid=$!
	run_ctest "$stage" "$dir" "$@" -E "^($tests)\$" || rc=$?
	wait "$pid" || rc1=$?
	echo "---- $tests, run beside the tests above (ctest stage $stage-beside):"
	cat "$log"
	[[ $rc -eq 0 ]] || return "$rc"
	return "$rc1"
}

# ---- stages --------------------------------------------------------------

do_deps()
{
	bash tools/install-deps.sh
}

do_build()
{
	configure_build "$B" -DFS_WERROR=ON
}

do_test()
{
	# CI time (30 min on 2 cores): the fuzzers run in the asan stage, under
	# the sanitizers that make them worth running, and not here too unless
	# that stage is skipped (--quick); iso_test runs 2 rounds of its
	# alone/beside phases per attack, not 4 (its 60 % bar against attacks
	# that keep 96-100 %: docs/results/reliability.md).
	local skip=()
	[[ $quick -eq 1 ]] || skip=(-LE '^fuzz$')
	FS_ISO_ROUNDS=2 with_beside test "$B" 'iso_test|bench_llama_run_test' -- "${skip[@]}"
}

do_mutate()
{
	JOBS=$JOBS FS_BUILD_DIR=$B bash tools/mutate.sh --no-baseline
}

do_asan()
{
	configure_build "$B-asan" -DFS_SANITIZE=address -DFS_WERROR=ON
	local wrap
	export ASAN_OPTIONS=detect_leaks=1:abort_on_error=1
	export UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1
	wrap=$(sanitizer_wrapper "$B-asan" -fsanitize=address,undefined -fno-omit-frame-pointer)
	# iso_test's attacks, one 1 s round each: a sanitized run asserts no
	# hit-rate share (too noisy), it looks for memory and UB errors on the
	# attacks' paths, and the plain stage's 4 rounds took 200 s here.
	# shellcheck disable=SC2086 # $wrap is a command prefix or empty
	FS_ISO_ROUNDS=1 FS_ISO_SECONDS=1 with_beside asan "$B-asan" iso_test $wrap -- -LE '^(gpu|bench-smoke)$'
}

do_tsan()
{
	configure_build "$B-tsan" -DFS_SANITIZE=thread -DFS_WERROR=ON
	local wrap
	export TSAN_OPTIONS=halt_on_error=1
	wrap=$(sanitizer_wrapper "$B-tsan" -fsanitize=thread -fno-omit-frame-pointer)
	# shellcheck disable=SC2086 # $wrap is a command prefix or empty
	run_ctest tsan "$B-tsan" $wrap -- -L '^ring$'
	# The daemon under TSan, driven by the normal build's tests.
	# shellcheck disable=SC2086
	FS_TEST_DAEMON="$ROOT/$B-tsan/daemon/foresightd" run_ctest tsan-daemon "$B" $wrap -- \
		-L '^(integration|fault)$' -E '^(demo_test|gguf_e2e_test|fault_test|iso_test)$'
}

do_release()
{
	configure_build "$B-release" -DCMAKE_BUILD_TYPE=Release -DFS_WERROR=ON
}

do_lint()
{
	bash tools/lint.sh
}

echo "test.sh: repo $ROOT, $JOBS build jobs, $(uname -srm)"

if [[ $deps -eq 1 ]]; then
	stage deps "install missing packages (tools/install-deps.sh)" do_deps
else
	skip deps
fi
stage build "normal build ($B/)" do_build
stage test "ctest: all tests ($B/)" do_test
if [[ $quick -eq 0 ]]; then
	stage mutate "every mutant of tools/mutate.sh killed by its tests ($B/)" do_mutate
	stage asan "ASan+UBSan build and tests, without gpu/bench-smoke ($B-asan/)" do_asan
	stage tsan "TSan build: the ring tests, the daemon under the integration and fault tests ($B-tsan/)" do_tsan
else
	skip mutate
	skip asan
	skip tsan
fi
if [[ $quick -eq 0 ]]; then
	stage release "Release (-O3) build of every target, -Werror, no tests ($B-release/)" do_release
else
	skip release
fi
if [[ $quick -eq 0 && $lint -eq 1 ]]; then
	stage lint "clang-format + cppcheck (tools/lint.sh)" do_lint
else
	skip lint
fi

summary
exit "$failed"
