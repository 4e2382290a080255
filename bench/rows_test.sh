#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
#
# bench/rows_test.sh: the logic that turns a GPU run's rows into its summary
# table and exit status (bench/rows.sh, bench/rows-summary.awk), on fake
# rows, without a GPU.  ctest: bench_rows_test.
set -uo pipefail
# shellcheck source=bench/rows.sh
source "$(dirname "${BASH_SOURCE[0]}")/rows.sh"
T=$(mktemp -d)
trap 'rm -rf "$T"' EXIT
fails=0
check() # name, expected rc, expected text (grep -E), rows files...
{
	local name=$1 want=$2 pat=$3
	shift 3
	local out rc=0
	out=$(rows_summary "$@" 2>&1) || rc=$?
	if [ "$rc" != "$want" ] || ! grep -qE -- "$pat" <<<"$out"; then
		echo "FAIL $name: rc $rc (want $want), output:"
		echo "$out"
		fails=$((fails + 1))
	else
		echo "ok   $name"
	fi
}

# A run where everything promised was measured: exit 0, goals judged.
rows_init "$T/good"
row_promise bw-1.8m ">= 0.95" "prefetch / raw cudaMemcpyAsync, 1.8 MiB"
row_promise lat-spin "<= 5 us" "post -> copy issued p99, spinning"
row_promise tests "pass" "GPU tests"
row_promise two-card "pass" "two engines on two cards"
row_ok bw-1.8m 0.993 "49.6 / 50.0 GB/s"
row_ok lat-spin "13.8 us"
row_ok tests "3/3 passed"
row_skip two-card "needs 2 GPUs, 1 here"
check "all measured: exit 0" 0 "verdict: passed" "$T/good"
check "goal met" 0 '\| bw-1.8m: .* \| >= 0.95 \| 0.993 \(49.6 / 50.0 GB/s\) \| yes \| ok \|' "$T/good"
check "goal missed is not a failure" 0 '\| lat-spin: .* \| 13.8 us \| no \| ok \|' "$T/good"
check "skipped row says why" 0 'skipped: needs 2 GPUs, 1 here' "$T/good"
check "count line" 0 'rows: 4 promised, 3 ok, 0 failed, 0 missing, 1 skipped; goals met: 1 of 2' "$T/good"
check "--strict fails a missed goal" 1 "verdict: FAILED" "$T/good" --strict

# The issue's broken run: rows promised, the bandwidth check died.
rows_init "$T/broken"
row_promise bw-256k ">= 0.95" "prefetch / raw, 256 KiB"
row_promise bw-16m ">= 0.95" "prefetch / raw, 16 MiB"
row_promise lat-spin "<= 5 us" "post -> copy issued p99"
row_fail bw-256k "fs-gpu-check: expert 0/1 never landed"
row_ok bw-16m ""
check "failed row: exit 1" 1 '\| bw-256k: .* never landed \| - \| FAILED \|' "$T/broken"
check "empty figure is a failure" 1 '\| bw-16m: .*FAILED \(no figure\)' "$T/broken"
check "never-measured row is MISSING" 1 '\| lat-spin: .* \| MISSING \|' "$T/broken"
check "broken count line" 1 'rows: 3 promised, 0 ok, 2 failed, 1 missing' "$T/broken"

# Several files (device.sh), a result nobody promised, a garbage line, a
# later result overriding an earlier one, no rows at all.
rows_init "$T/a"
row_promise k1 "<= 2 x" "kernel / floor"
row_fail k1 "launch failed"
row_ok k1 "1.5 x"
rows_init "$T/b"
row_ok typo "3"
check "last result counts, files merge" 1 '\| k1: kernel / floor \| <= 2 x \| 1.5 x \| yes \| ok \|' "$T/a" "$T/b"
check "unpromised result fails" 1 '\| typo \| \(never promised\) \| 3 \| - \| FAILED \|' "$T/a" "$T/b"
check "one file alone passes" 0 "verdict: passed" "$T/a"
printf 'garbage\n' >"$T/c"
check "unreadable line fails" 1 'unreadable line' "$T/a" "$T/c"
: >"$T/empty"
check "no rows at all fails" 1 '\(no rows\)' "$T/empty"

# Goal operators and numbers.
rows_init "$T/ops"
row_promise lt "< 10" ""
row_promise gt "> 1" ""
row_promise eq "== 0" "mismatches"
row_promise exp "<= 1e-3" ""
row_promise neg ">= -1" ""
row_ok lt 10
row_ok gt 1.01
row_ok eq 0
row_ok exp 2.0e-4
row_ok neg -0.5
check "strict < at the edge is not met" 0 '\| lt \| < 10 \| 10 \| no \| ok \|' "$T/ops"
check "operators" 0 'goals met: 4 of 5' "$T/ops"
check "tabs in a field are flattened" 0 "verdict" "$T/ops"
rows_init "$T/tab"
row_promise t "pass" "a	b"
row_ok t "x
y"
check "tab and newline in fields" 0 '\| t: a b \| pass \| x y \| - \| ok \|' "$T/tab"

echo "rows_test: $fails failure(s)"
[ "$fails" = 0 ]
