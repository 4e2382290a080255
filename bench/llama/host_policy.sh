#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
#
# bench/llama/host_policy.sh: foresightd's policy on the llama.cpp benchmark's
# routing, at llama.cpp's pace, on the host backend (no GPU): what the
# learned predictor adds for an engine that posts only its routing and
# starts cold, as bench/llama/run.sh's served runs do.
#
#   bash bench/llama/host_policy.sh [OUTDIR]     (~11 minutes on 2 cores)
#
# Per real trace (qwen, gemma: their decode rows only, the 128 tokens
# run.sh decodes from an empty context) and budget (26 and 52 % of the
# experts as slots), a fresh foresightd (host backend, one card) and one
# fs-demo-engine replaying the trace at HP_HOLD_US a token (11,000: the
# served decode rate measured on the GPU, ~90 t/s), posting usage only, for
# each configuration of the learned predictor:
#   off    --learn 0 (the default: the tiers alone)
#   on     --learn 1 (on for engines that post no predictions)
#   on-p3  --learn 1 --learn-min-p 0.3 (only candidates used 3 times in 10)
#   adapt  --learn 1 --pred-adapt on (the predicted tier's auto size follows
#          its copies' measured use against the static tier's)
#   off-np --learn 0 --predicted-slots 0 (no predicted tier: its slots static's)
#   static --learn 0 --predicted-slots 0 --recency-slots 0 (the static tier
#          alone: the most used experts so far, as an LFU would keep them)
#   nofill --fill off: at budget 1.0 (a slot for every expert) the pool is
#          not filled at start, each expert copied at its first use
# Budget 1.0 runs off and nofill only (the others are off's there: no
# predicted tier when every expert fits), the others every configuration
# but nofill (the fill needs a slot for every expert).  The engine starts
# once the daemon's copies stop (a filled pool: as on the GPU, where the
# fill ends while llama.cpp loads the rest of the model).
# HP_CONFIGS (all of them) names a subset, e.g. "off on adapt"; HP_BUDGETS
# ("0.26 0.52 1.0") the budgets.
# HP_REPS (3) repetitions, interleaved.  Experts are 64 KiB and the bus
# HP_BUS_GBPS (0.5 GB/s), so a copy takes ~130 us: a 3 MiB expert takes
# 60-90 us on the GPU machine's link (~50 GB/s, less what llama.cpp's
# reads in place take), so the default errs towards a busy bus (1.0: 65
# us).  What is compared is counts (uses kept in VRAM, copies made), not
# timings.
# The table: median [min-max] hit rate, misses and copies, and each
# configuration's misses and copies against `off` of the same repetition.
# Exits non-zero when a promised row is missing (a run failed or the
# traces are absent: HP_TRACES, default ../shared/data/route-traces).
set -uo pipefail
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
OUT=${1:-$ROOT/build/host-policy}
mkdir -p "$OUT"
B=${FS_BENCH_BUILD:-$ROOT/build}
TRACES=${HP_TRACES:-$ROOT/../shared/data/route-traces}
REPS=${HP_REPS:-3}
HOLD=${HP_HOLD_US:-11000}
BUS=${HP_BUS_GBPS:-0.5}
FSD="$B/daemon/foresightd"
FSCTL="$B/tools/fsctl/fsctl"
DEMO="$B/tools/demo/fs-demo-engine"
for x in "$FSD" "$FSCTL" "$DEMO"; do
	[ -x "$x" ] || {
		echo "host_policy: $x not built (cmake --build $B)" >&2
		exit 2
	}
done
W=$(mktemp -d)
trap 'kill "$PID" 2>/dev/null; rm -rf "$W"' EXIT
PID=
CSV="$OUT/host-policy.csv"
echo "trace,budget,config,rep,slots,hits,misses,copied,too_late" >"$CSV"
declare -A ARGS=([off]="--learn 0" [on]="--learn 1" [on-p3]="--learn 1 --learn-min-p 0.3"
	[adapt]="--learn 1 --pred-adapt on" [off-np]="--learn 0 --predicted-slots 0" [static]="--learn 0 --predicted-slots 0 --recency-slots 0"
	[nofill]="--learn 0 --fill off")
# shellcheck disable=SC2206 # lists of names
CONFIGS=(${HP_CONFIGS:-off on on-p3 adapt off-np static nofill})
# shellcheck disable=SC2206
BUDGETS=(${HP_BUDGETS:-0.26 0.52 1.0})
configs_at() { # budget: the configurations run there
	local c
	for c in "${CONFIGS[@]}"; do
		if [ "$1" = 1.0 ]; then [ "$c" = off ] || [ "$c" = nofill ] && echo "$c"; else [ "$c" = nofill ] || echo "$c"; fi
	done
}
for c in "${CONFIGS[@]}"; do
	[ -n "${ARGS[$c]+set}" ] || {
		echo "host_policy.sh: HP_CONFIGS: no configuration '$c' (${!ARGS[*]})" >&2
		exit 2
	}
done
PROMISED=()

run_one() { # trace budget config rep slots layers experts used decode.csv
	local t=$1 b=$2 c=$3 r=$4 slots=$5 L=$6 E=$7 K=$8 dec=$9 sock="$W/fsd.sock"
	rm -f "$sock"
	# shellcheck disable=SC2086 # ARGS holds options
	"$FSD" --socket "$sock" --cards 1 --layers "$L" --experts "$E" --experts-used "$K" \
		--expert-bytes 65536 --slots "$slots" --bus-gbps "$BUS" ${ARGS[$c]} >"$W/fsd.log" 2>&1 &
	PID=$!
	local _
	for _ in $(seq 1 100); do
		"$FSCTL" --socket "$sock" stats >/dev/null 2>&1 && break
		sleep 0.1
	done
	local prev=-1 now
	for _ in $(seq 1 200); do # until its copies stop (the fill, if any)
		now=$("$FSCTL" --socket "$sock" stats --json 2>/dev/null | python3 -c 'import json,sys; print(json.load(sys.stdin)["cards"][0]["copied"])')
		[ "$now" = "$prev" ] && break
		prev=$now
		sleep 0.3
	done
	if "$DEMO" --socket "$sock" --trace "$dec" --windows 128 --predict none --hold-us "$HOLD" --quiet >"$W/demo.log" 2>&1 &&
		"$FSCTL" --socket "$sock" stats --json >"$W/st.json" 2>/dev/null; then
		python3 -c 'import json,sys
c = json.load(open(sys.argv[1]))["cards"][0]
print(",".join(str(c[k]) for k in ("slots", "hits", "misses", "copied", "too_late")))' "$W/st.json" |
			sed "s/^/$t,$b,$c,$r,/" >>"$CSV"
	else
		echo "host_policy: $t $b $c rep $r failed: $(tail -2 "$W/demo.log" "$W/fsd.log")" >&2
	fi
	kill "$PID" 2>/dev/null
	wait "$PID" 2>/dev/null
	PID=
}

for t in qwen gemma; do
	f="$TRACES/$t.route.csv"
	for b in "${BUDGETS[@]}"; do for c in $(configs_at "$b"); do PROMISED+=("$t,$b,$c"); done; done
	if [ ! -f "$f" ]; then
		echo "host_policy: $f absent: its rows are not run" >&2
		continue
	fi
	# the model's shape from the trace's header; its decode rows (phase 1)
	read -r L E K < <(sed -n 's/.*n_layer=\([0-9]*\) n_expert=\([0-9]*\) n_expert_used=\([0-9]*\).*/\1 \2 \3/p' "$f" | head -1)
	dec="$W/$t-decode.csv"
	awk -F, '/^#/ || /^turn/ || $2 == 1' "$f" >"$dec"
	for r in $(seq 1 "$REPS"); do
		for b in "${BUDGETS[@]}"; do
			slots=$(python3 -c "print(round($b * $L * $E))")
			mapfile -t cs < <(configs_at "$b")
			n=${#cs[@]}
			for k in $(seq 0 $((n - 1))); do # rotated each repetition
				run_one "$t" "$b" "${cs[$(((k + r) % n))]}" "$r" "$slots" "$L" "$E" "$K" "$dec"
			done
		done
	done
done

python3 - "$CSV" "${PROMISED[@]}" <<'PY' | tee "$OUT/host-policy.md"
import csv, statistics, sys
runs = list(csv.DictReader(open(sys.argv[1])))
promised = sys.argv[2:]
def rng(xs, f):
    return (f + " [" + f + "-" + f + "]").format(statistics.median(xs), min(xs), max(xs)) if xs else "-"
print("| trace | budget | learned predictor | slots | hit % | misses | copies | misses vs off | copies vs off |")
print("|---|---|---|---|---|---|---|---|---|")
missing = []
for p in promised:
    t, b, c = p.split(",")
    rs = [r for r in runs if (r["trace"], r["budget"], r["config"]) == (t, b, c)]
    if not rs:
        missing.append(p)
        print(f"| {t} | {b} | {c} | - | MISSING | | | | |")
        continue
    off = {r["rep"]: r for r in runs if (r["trace"], r["budget"], r["config"]) == (t, b, "off")}
    hit = [100 * int(r["hits"]) / (int(r["hits"]) + int(r["misses"])) for r in rs]
    mv = [int(r["misses"]) / int(off[r["rep"]]["misses"]) for r in rs if r["rep"] in off and int(off[r["rep"]]["misses"])]
    cv = [int(r["copied"]) / int(off[r["rep"]]["copied"]) for r in rs if r["rep"] in off and int(off[r["rep"]]["copied"])]
    print(f"| {t} | {b} | {c} | {rs[0]['slots']} | {rng(hit, '{:.2f}')} | {rng([int(r['misses']) for r in rs], '{:.0f}')} "
          f"| {rng([int(r['copied']) for r in rs], '{:.0f}')} | {rng(mv, '{:.3f}')} | {rng(cv, '{:.2f}')} |")
print()
print(f"{len(promised) - len(missing)} of {len(promised)} promised rows; runs: {len(runs)}")
sys.exit(1 if missing else 0)
PY
