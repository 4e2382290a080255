#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
#
# tools/doc-block.sh DOC NAME [FILE]: replace the generated block NAME of a
# Markdown document, everything between the lines "<!-- NAME:begin -->" and
# "<!-- NAME:end -->", with FILE's lines (default: standard input).  The
# marker lines stay.  Exits 1, leaving DOC as it was, when either marker is
# missing.  Used by the scripts that write results pages' tables
# (bench/engine/results.sh, tools/replay-head.sh, tools/replay-results.sh).
set -euo pipefail
if [ $# -lt 2 ]; then
	sed -n '4,9p' "${BASH_SOURCE[0]}" | sed 's/^# \{0,1\}//'
	exit 2
fi
doc=$1 name=$2 src=${3:-/dev/stdin}
begin="<!-- $name:begin -->" end="<!-- $name:end -->"
if ! grep -qxF "$begin" "$doc" || ! grep -qxF "$end" "$doc"; then
	echo "doc-block.sh: $doc has no block $name ($begin ... $end)" >&2
	exit 1
fi
tmp=$(mktemp)
trap 'rm -f "$tmp" "$tmp.doc"' EXIT
cat "$src" >"$tmp"
awk -v b="$begin" -v e="$end" -v f="$tmp" '
	$0 == b { print; while ((getline l < f) > 0) print l; skip = 1; next }
	$0 == e { skip = 0 }
	!skip { print }' "$doc" >"$tmp.doc"
cat "$tmp.doc" >"$doc"
