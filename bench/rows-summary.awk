# SPDX-License-Identifier: Apache-2.0
#
# bench/rows-summary.awk: rows files -> one table (goal / measured / met /
# status per promised row) and the exit status.  bench/rows.sh writes the
# files; bench/rows_test.sh pins this on fake rows.
#
#   awk -F '\t' -v strict=0|1 -f bench/rows-summary.awk ROWS...
#
# Input lines (tab-separated):
#   promise ID GOAL WHAT     GOAL: "OP NUMBER [unit]" with OP one of <= < >= > ==,
#                            or "pass" / "info" (no figure to compare)
#   ok      ID MEASURED NOTE MEASURED: a number first for a figure goal
#   fail    ID WHY
#   skip    ID WHY
# A row's status: ok, FAILED, MISSING (promised, no result: the script died
# or never measured it) or skipped.  A result for a row never promised is an
# error too (a typo would otherwise leave the promise unfilled silently).
# "met": yes / no for figure goals, "-" otherwise.  An "ok" row whose
# figure does not parse is FAILED: a table of blanks is not a result.
# Exit status: 1 when any row is FAILED or MISSING (or, with strict=1, a
# goal is not met), else 0.
function num(s,    m)
{
	if (match(s, /^[-+]?[0-9]*\.?[0-9]+([eE][-+]?[0-9]+)?/))
		return substr(s, RSTART, RLENGTH)
	return ""
}
function met_of(goal, v,    op, g, rest)
{
	if (goal == "pass" || goal == "info")
		return "-"
	op = goal
	sub(/[ ]*[-+0-9.].*$/, "", op)
	rest = goal
	sub(/^[<>=]+[ ]*/, "", rest)
	g = num(rest)
	if (g == "" || v == "")
		return "?"
	g += 0
	v += 0
	if (op == "<=") return v <= g ? "yes" : "no"
	if (op == "<") return v < g ? "yes" : "no"
	if (op == ">=") return v >= g ? "yes" : "no"
	if (op == ">") return v > g ? "yes" : "no"
	if (op == "==") return v == g ? "yes" : "no"
	return "?"
}
$1 == "promise" {
	if (!($2 in goal))
		order[n++] = $2
	goal[$2] = $3
	what[$2] = $4
	next
}
$1 == "ok" || $1 == "fail" || $1 == "skip" {
	kind[$2] = $1
	meas[$2] = $3
	note[$2] = $4
	if (!($2 in goal) && !($2 in stray))
		stray_order[nstray++] = $2
	stray[$2] = 1
	next
}
NF > 0 {
	bad_lines++
}
END {
	failed = missing = skipped = ok = metn = goals = unmet = 0
	print "| row | goal | measured | met | status |"
	print "|---|---|---|---|---|"
	for (i = 0; i < n; i++) {
		id = order[i]
		g = goal[id]
		label = what[id] != "" ? id ": " what[id] : id
		if (!(id in kind)) {
			printf "| %s | %s | - | - | MISSING |\n", label, g
			missing++
			continue
		}
		m = meas[id]
		if (note[id] != "")
			m = m " (" note[id] ")"
		if (kind[id] == "skip") {
			printf "| %s | %s | - | - | skipped: %s |\n", label, g, meas[id]
			skipped++
			continue
		}
		if (kind[id] == "fail") {
			printf "| %s | %s | %s | - | FAILED |\n", label, g, meas[id]
			failed++
			continue
		}
		mt = met_of(g, num(meas[id]))
		if (mt == "?") {
			printf "| %s | %s | %s | - | FAILED (no figure) |\n", label, g, m
			failed++
			continue
		}
		ok++
		if (mt != "-") {
			goals++
			if (mt == "yes") metn++
			else unmet++
		}
		printf "| %s | %s | %s | %s | ok |\n", label, g, m, mt
	}
	for (i = 0; i < nstray; i++) {
		id = stray_order[i]
		if (id in goal)
			continue
		printf "| %s | (never promised) | %s | - | FAILED |\n", id, meas[id]
		failed++
	}
	if (bad_lines) {
		printf "| (rows files) | - | %d unreadable line(s) | - | FAILED |\n", bad_lines
		failed++
	}
	if (n == 0) {
		print "| (no rows) | - | - | - | FAILED |"
		failed++
	}
	printf "\nrows: %d promised, %d ok, %d failed, %d missing, %d skipped; goals met: %d of %d\n",
	       n, ok, failed, missing, skipped, metn, goals
	rc = failed || missing || (strict && unmet)
	printf "verdict: %s\n", rc ? "FAILED" : "passed"
	exit rc
}
