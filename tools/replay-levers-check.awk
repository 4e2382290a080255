# SPDX-License-Identifier: Apache-2.0
#
# tools/replay-levers-check.awk: what tools/replay-levers.sh's lever table
# says about the tier check and issue 18's fs-replay goals, as two Markdown
# paragraphs (tools/replay-results.sh prints them under the table, so they
# are never older than it).  awk -F'|' -f tools/replay-levers-check.awk
# Columns of a row: $3-$5 the model at 25.9 / 39.5 / 52 %, $6-$9 qwen and
# $10-$13 gemma at 10 / 25 / 50 / 75 %.
/^\| row \|/ { for (c = 3; c <= 13; c++) { h = $c; gsub(/^ +| +$/, "", h); head[c] = h } }
/^\| static \(baseline\)/ { for (c = 3; c <= 13; c++) st[c] = $c + 0 }
/^\| lru \(baseline\)/ { for (c = 3; c <= 13; c++) lru[c] = $c + 0 }
/: the default \|/ { for (c = 3; c <= 13; c++) def[c] = $c + 0 }
/^\| tier check: .*\(static\+recency\)/ { for (c = 3; c <= 13; c++) sr[c] = $c + 0 }
/^\| tier check: .*\(static\+predicted\)/ { for (c = 3; c <= 13; c++) sp[c] = $c + 0 }
END {
	worse = ""
	for (c = 3; c <= 13; c++) {
		if (sr[c] < def[c])
			worse = worse sprintf("%s%s, no predicted tier %.3f against %.3f", worse == "" ? "" : "; ", head[c], sr[c], def[c])
		if (sp[c] < def[c])
			worse = worse sprintf("%s%s, no recency tier %.3f against %.3f", worse == "" ? "" : "; ", head[c], sp[c], def[c])
	}
	print "**Tier check** (the two rows before the bound: the default with one tier's slots"
	print "left to the others).  Where a row misses less than the default, that tier makes"
	printf "things worse than leaving its slots to the others and the check fails: %s.\n\n", worse == "" ? "nowhere in this table" : worse
	print "**Issue 18's fs-replay goals** (the default row against `lru`'s): 25 % slots,"
	printf "qwen %.2fx, gemma %.2fx (goal <= 0.70x); 50 %%, qwen %.2fx, gemma %.2fx (goal <=\n", def[7] / lru[7], def[11] / lru[11], def[8] / lru[8], def[12] / lru[12]
	printf "0.25x).  On the model at 25.9 %% the default removes %.0f %% of `static`'s misses,\n", 100 * (st[3] - def[3]) / st[3]
	print "the clairvoyant bound all of them (goal: 80 % of the bound's).  The table at the top"
	print "of this page has these over 5 draws.\n"
}
