#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
#
# bench/engine/run.sh: the headline benchmark (issue #10) on a GPU machine
# with no package registry (the lent nvidia-h200-x2: 2 x H200, 32 cores).
#
#   bash bench/engine/run.sh [OUTDIR]     (OUTDIR default $OUT or /tmp/fs-engine)
#
# 1. unpacks the .debs carried in .debs/ (tools/device-setup.sh), builds
#    Release in build-engine (foresightd and fs-engine-bench only);
# 2. runs `fs-engine-bench run --device cuda` over the matrix below: every
#    config runs all five modes side by side (same routing, same slot
#    budget, same bus budget) and prints its table; a config is not started
#    once EB_DEADLINE_S (default 330) seconds have passed since the start,
#    so the whole script stays well inside a 10-minute call;
# 3. writes OUTDIR/engine-results.md (the tables), OUTDIR/engine-results.csv
#    (one row per mode and config), OUTDIR/engine-run.log, the daemon logs
#    and per-window checksums of each config under OUTDIR/work-LABEL/.
# Exits non-zero when a config fails (a mode or engine whose window
# checksums differ from the others fails its config) or a selected config
# is not run before the deadline (pick fewer with EB_CONFIGS); configs that
# need more GPUs than there are are skipped with a line that says so.  The
# rows (bench/rows.sh, one per config) go to OUTDIR/engine-rows.tsv.
# FS_BENCH_PREBUILT=1 (bench/device.sh): FS_BENCH_BUILD is built, skip the build.
#
# Matrix (label: cards, engines, slot budget as a share of all experts,
# then the config's own fs-engine-bench arguments):
#   1c1e-26 1c1e-52 1c2e-26 2c1e-26 2c2e-26 1c2e-52 2c1e-52 2c2e-52: layers
#     split over the cards, the trace-oracle predictor;
#   1c1e-26-ra 1c1e-52-ra 2c1e-26-ra: the router-ahead kernel as the
#     predictor (--predictor kernel);
#   2c2e-26-dp: data parallel, one engine per card, one tier read across
#     the cards (issue #12: compare with 1c2e-26, one card with the same
#     slots); 2c2e-26-dp-own: the same with --peer off (each card its own
#     tier);
#   1c1e-26-perfect: the oracle never wrong (every routed expert in its
#     top 10, one to three layers ahead): what the daemon's mechanism
#     captures when prediction is not the limit;
#   2c2e-26-dp-down 2c1e-26-down: card 1 taken down (the control verb
#     `card`, standing in for a lost card) before engine 0's window 150:
#     the checksums must still agree with the baseline's and no expert may
#     be read from card 1 once an engine has seen it down.
# Bus budget: PCIe Gen4 x8 per card, scaled with the experts (--scale 4:
# 0.45 MiB experts over 3.375 GB/s = one 1.8 MiB expert over 13.5 GB/s).
# Extra arguments for every config: EB_ARGS (e.g. EB_ARGS="--windows 800");
# only some configs: EB_CONFIGS (labels, e.g. EB_CONFIGS="2c1e-52 2c2e-52").
set -euo pipefail
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
cd "$ROOT"
OUTDIR=${1:-${OUT:-/tmp/fs-engine}}
mkdir -p "$OUTDIR"
exec > >(tee "$OUTDIR/engine-run.log") 2>&1
T0=$(date +%s)
DEADLINE=${EB_DEADLINE_S:-330}
THREADS=${EB_CPU_THREADS:-8}

echo "== machine"
date -u +%Y-%m-%dT%H:%MZ
nvidia-smi --query-gpu=name,driver_version,memory.total,pcie.link.gen.current,pcie.link.width.current --format=csv || true
nvidia-smi topo -m 2>/dev/null | head -n 4 || true
nproc
NGPU=$(nvidia-smi -L 2>/dev/null | grep -c '^GPU' || true)

BD=${FS_BENCH_BUILD:-build-engine}
if [ "${FS_BENCH_PREBUILT:-0}" != 1 ]; then
	echo "== dependencies and build"
	# shellcheck disable=SC1091
	source tools/device-setup.sh /tmp/fsdeps >/dev/null
	cmake -S . -B "$BD" -DCMAKE_BUILD_TYPE=Release -DFS_BUILD_TESTS=OFF >/dev/null
	cmake --build "$BD" -j"$(nproc)" --target foresightd fs-engine-bench 2>&1 | grep -E "error|warning" || true
fi
B=$BD/bench/engine/fs-engine-bench
D=$BD/daemon/foresightd
test -x "$B" && test -x "$D"
echo "built in $(($(date +%s) - T0)) s"

CSV=$OUTDIR/engine-results.csv
MD=$OUTDIR/engine-results.md
rm -f "$CSV" "$MD"
fail=0
declare -a CKS=()
# shellcheck disable=SC2206 # EB_ARGS is a word list on purpose
EXTRA=(${EB_ARGS:-})
# shellcheck source=bench/rows.sh
source bench/rows.sh
rows_init "$OUTDIR/engine-rows.tsv"
promised=0
for spec in "1c1e-26 1 1 0.26" "1c1e-52 1 1 0.52" "1c2e-26 1 2 0.26" "2c1e-26 2 1 0.26" \
	"2c2e-26 2 2 0.26" "1c2e-52 1 2 0.52" "2c1e-52 2 1 0.52" "2c2e-52 2 2 0.52" \
	"1c1e-26-ra 1 1 0.26 --predictor kernel" "1c1e-52-ra 1 1 0.52 --predictor kernel" \
	"2c1e-26-ra 2 1 0.26 --predictor kernel" "2c2e-26-dp 2 2 0.26 --placement dp" \
	"2c2e-26-dp-own 2 2 0.26 --placement dp --peer off" \
	"1c1e-26-perfect 1 1 0.26 --pred-recall 1:100,100,100 --pred-recall 2:100,100,100 --pred-recall 3:100,100,100" \
	"2c2e-26-dp-down 2 2 0.26 --placement dp --card-down 1@150 --modes baseline,both" \
	"2c1e-26-down 2 1 0.26 --card-down 1@150 --modes baseline,both"; do
	read -r label cards engines budget own <<<"$spec"
	# shellcheck disable=SC2206 # a config's own arguments are a word list
	OWN=(${own:-})
	if [ -n "${EB_CONFIGS:-}" ] && ! [[ " $EB_CONFIGS " == *" $label "* ]]; then
		continue
	fi
	row_promise "engine-$label" pass "fs-engine-bench, $cards card(s), $engines engine(s), budget $budget: every mode's checksums agree"
	promised=$((promised + 1))
	now=$(($(date +%s) - T0))
	if [ "$cards" -gt "$NGPU" ]; then
		echo "== $label: SKIPPED (needs $cards GPUs, $NGPU here)" | tee -a "$MD"
		row_skip "engine-$label" "needs $cards GPUs, $NGPU here"
		continue
	fi
	if [ "$now" -ge "$DEADLINE" ]; then
		echo "== $label: NOT RUN (${now} s elapsed, deadline ${DEADLINE} s)" | tee -a "$MD"
		row_fail "engine-$label" "not run: ${now} s elapsed, deadline ${DEADLINE} s"
		continue
	fi
	echo "== $label: $cards card(s), $engines engine(s), budget $budget (${now} s elapsed)"
	out=$OUTDIR/out-$label.txt
	rc=0
	"$B" run --daemon "$D" --device cuda --cards "$cards" --engines "$engines" --budget "$budget" \
		--cpu-threads "$THREADS" --csv "$CSV" --label "$label" --workdir "$OUTDIR/work-$label" \
		--timeout 240 "${OWN[@]}" "${EXTRA[@]}" >"$out" 2>&1 || rc=$?
	cat "$out"
	{
		echo "### $label (exit $rc)"
		grep -E '^(\||[0-9] card|dense part|shape|predictor|oracle recall|placement|held at the end|card down|router-ahead|checksums|run checksum)' "$out" || true
		echo
	} >>"$MD"
	[ "$rc" = 0 ] || fail=1
	both=$(grep -m1 -E '^\| both \|' "$out" | awk -F'|' '{ gsub(/ /, "", $3); gsub(/^ +| +$/, "", $4); gsub(/^ +| +$/, "", $(NF-1)); print "both: " $3 " tok/s, hit " $4 ", headroom share " $(NF-1) }')
	if [ "$rc" = 0 ] && grep -q '^checksums: .*all equal' "$out"; then
		row_ok "engine-$label" "checksums agree" "$both"
	else
		row_fail "engine-$label" "exit $rc: $(grep -m1 -iE 'FAIL|error|differ' "$out" | cut -c1-120)"
	fi
	ck=$(sed -n 's/^run checksum \([0-9a-f]*\)$/\1/p' "$out")
	[ -n "$ck" ] && CKS+=("$label:$ck")
done

# Within a config every mode and engine must agree (fs-engine-bench fails
# otherwise); across configs the run checksums differ by construction: the
# dense part's length is calibrated per config and enters every window.
echo "== run checksums per config (informational)"
printf '%s\n' "${CKS[@]}"
echo "== tables: $MD, rows: $CSV ($(($(date +%s) - T0)) s in all)"
[ "$promised" -gt 0 ] || echo "EB_CONFIGS selected no config: ${EB_CONFIGS:-}"
rows_summary "$ROWS_FILE" | tee -a "$MD" || fail=1
echo "engine bench: $([ $fail = 0 ] && echo passed || echo FAILED)"
exit $fail
