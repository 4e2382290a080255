#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
#
# bench/engine/results.sh: put the tables of a run into docs/results/engine.md,
# from the CSV that bench/engine/run.sh (fs-engine-bench run --csv) wrote, so
# nobody retypes a figure.
#
#   bash bench/engine/results.sh SECTION "COMMAND" FILE.csv [FILE.csv...]
#
# SECTION names a block of docs/results/engine.md, between the lines
# "<!-- engine:SECTION:begin -->" and "<!-- engine:SECTION:end -->" (latest,
# all-modes, fullsize); the block is replaced by: where the rows came from (the
# files, their date, COMMAND: what made them) and `fs-engine-bench report`'s
# tables (medians over the repetitions with 95 % bootstrap intervals, the best
# peer, every mode against it and against zero-miss).  Exits non-zero, leaving
# the document as it was, when the report fails (a promised row missing or
# failed) or the section is not there.
# FS_ENGINE_BENCH: the fs-engine-bench to use (default build/bench/engine/...).
set -euo pipefail
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
if [ $# -lt 3 ]; then
	sed -n '4,18p' "${BASH_SOURCE[0]}" | sed 's/^# \{0,1\}//'
	exit 2
fi
SECTION=$1
COMMAND=$2
shift 2
B=${FS_ENGINE_BENCH:-$ROOT/build/bench/engine/fs-engine-bench}
DOC=${FS_ENGINE_DOC:-$ROOT/docs/results/engine.md}
if ! grep -qxF "<!-- engine:$SECTION:begin -->" "$DOC" || ! grep -qxF "<!-- engine:$SECTION:end -->" "$DOC"; then
	echo "results.sh: $DOC has no section $SECTION" >&2
	exit 1
fi
tmp=$(mktemp)
trap 'rm -f "$tmp" "$tmp.r"' EXIT
if ! "$B" report "$@" >"$tmp.r"; then
	cat "$tmp.r" >&2
	echo "results.sh: fs-engine-bench report failed (a promised row missing or failed): $DOC unchanged" >&2
	exit 1
fi
{
	echo
	printf 'Rows: '
	for f in "$@"; do printf '%s (%s) ' "$(basename "$f")" "$(date -u -r "$f" +%Y-%m-%dT%H:%MZ)"; done
	echo "from:"
	echo
	echo '```sh'
	echo "$COMMAND"
	echo '```'
	cat "$tmp.r"
	echo
} >"$tmp"
bash "$ROOT/tools/doc-block.sh" "$DOC" "engine:$SECTION" "$tmp"
echo "results.sh: section $SECTION of $DOC rewritten from $*"
