# SPDX-License-Identifier: Apache-2.0
# shellcheck shell=bash
#
# bench/rows.sh: the rows every GPU benchmark script promises and fills, so
# that a script cannot print "passed" over an empty table.  Sourced by
# bench/{gpu,kernels,engine,peer}/run.sh and bench/device.sh.
#
#   rows_init FILE              start a rows file (truncates it)
#   row_promise ID GOAL WHAT    before measuring: the row this run owes.
#                               GOAL: "<= 5 us", ">= 0.95", ">= 10 x", or
#                               "pass" (the row has no figure, only a verdict)
#                               or "info" (a figure stated beside another)
#   row_ok ID MEASURED [NOTE]   the row was measured (MEASURED: a number first,
#                               then its unit, e.g. "13.8 us"; or a word for
#                               "pass" rows)
#   row_fail ID WHY             the measurement failed or its check failed
#   row_skip ID WHY             not measurable here (e.g. "needs 2 GPUs, 1 here")
#   rows_summary FILE... [--strict]   the table; exit 1 when a promised row is
#                               missing or failed (--strict: or misses its goal)
#
# One line per call, tab-separated (see bench/rows-summary.awk for the
# format); a row's last result counts.
ROWS_LIB_DIR=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)

rows_init()
{
	ROWS_FILE=$1
	: >"$ROWS_FILE"
}

# Tabs and newlines inside a field would break the format: flatten them.
rows__clean() { tr '\t\n' '  ' <<<"$1" | sed 's/ *$//'; }

rows__put() # kind id a b
{
	printf '%s\t%s\t%s\t%s\n' "$1" "$(rows__clean "$2")" "$(rows__clean "$3")" "$(rows__clean "${4:-}")" \
		>>"${ROWS_FILE:?rows_init first}"
}

row_promise() { rows__put promise "$1" "$2" "$3"; }
row_ok() { rows__put ok "$1" "$2" "${3:-}"; }
row_fail() { rows__put fail "$1" "${2:-failed}" ""; }
row_skip() { rows__put skip "$1" "$2" ""; }

rows_summary()
{
	local strict=0 files=()
	for a in "$@"; do
		if [ "$a" = --strict ]; then strict=1; else files+=("$a"); fi
	done
	awk -v strict="$strict" -F '\t' -f "$ROWS_LIB_DIR/rows-summary.awk" "${files[@]}"
}
