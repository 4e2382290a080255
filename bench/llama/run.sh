#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
#
# bench/llama/run.sh: llama.cpp served by foresightd against stock llama.cpp,
# on the GPU machine, side by side in one run.
#
#   bash bench/llama/run.sh OUTDIR
#
# For each workload (a model written by fs-gguf-model whose routing replays
# a route trace: qwen, gemma; or the calibrated routing model: calib) and
# each budget (the experts of a fraction of the layers in VRAM), the modes:
#   a     every expert in VRAM (-ngl 99): the ceiling (once per workload)
#   b     stock llama.cpp: --n-cpu-moe N, the experts of the first N layers
#         computed on the CPU (what users run today)
#   c     llama.cpp + foresightd, a pool of the same bytes as b's experts in
#         VRAM (a fresh daemon per run: every run starts cold)
#   lru   llama.cpp + the provider's in-process per-layer LRU in VRAM of the
#         same bytes (FORESIGHT_LLAMA_CACHE=lru), misses read in place as c
#   d     two llama.cpp processes at once on one foresightd (c's pool): each
#         one's decode rate, and the host memory of the experts
#   cs    c, with the provider staging up to LB_STAGE_N (16) missed experts a
#         layer into VRAM with a wide copy kernel before the layer's products
#         (FORESIGHT_LLAMA_STAGE), instead of the products reading them in place
#   lrus  lru, staged the same way
#   csn   cs with foresightd's learned predictor off (--learn 0, the default
#         since 2026-12-07: before, cs ran with it on)
#   csl   cs with it on (--learn 1): what the predictor is worth to an
#         engine that posts only its routing
# Each run is one fs-llama-driver process: decode (tg) from an empty context
# (--pp 0: the trace's decode tokens in order, cold), then prefill (pp) in a
# second process.  Repetitions are interleaved: every repetition runs every
# mode once, in a rotated order.  Per run: tokens/s, the provider's hits and
# bytes read in place, foresightd's copies, the peak VRAM in use (the card's,
# less what was in use before) and the engines' peak private host memory
# (below).  OUTDIR/llama-runs.csv has every run; OUTDIR/llama.md the
# table (bench/llama/table.py: medians, ranges, ratios, goals; the goals
# also as bench/rows.sh rows in OUTDIR/llama-rows.tsv).  Exits
# non-zero when a promised row is missing or failed.
#
# Environment: LB_STAGE (the provider's FORESIGHT_LLAMA_STAGE for c and
# lru: 0, misses read in place), LB_STAGE_N (the same for cs and lrus: 16),
# LB_WORKLOADS (qwen,gemma,calib), LB_BUDGETS (0.26,0.52),
# LB_MODES (a,b,c), LB_REPS (5), LB_TG (128), LB_PP (512), LB_BUDGET_S (stop
# starting runs after this many seconds: 540), FSL_TRACES (the route traces;
# default .traces in the repository, carried), FSL_MODELS (/tmp/fsl-models),
# LB_PREBUILT=1 (FSL_OUT's builds used as they are: neither
# tools/device-setup.sh nor setup.sh runs; bench/llama/run_test.sh runs this
# script so, on stand-ins, where there is no GPU).
set -uo pipefail
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
cd "$ROOT" || exit 2
OUT=${1:?usage: run.sh OUTDIR}
mkdir -p "$OUT"
OUT=$(cd "$OUT" && pwd)
if [ "${LB_PREBUILT:-0}" != 1 ]; then
	# shellcheck source=tools/device-setup.sh
	source tools/device-setup.sh /tmp/fsdeps >/dev/null || exit 1
	# llama.cpp, the driver and foresight: built once (stamped), or unpacked
	bash bench/llama/setup.sh >"$OUT/setup.log" 2>&1 || { tail -20 "$OUT/setup.log"; exit 1; }
fi
# shellcheck source=bench/llama/lib.sh
source bench/llama/lib.sh
trap 'fsl_fsd_stop; [ -n "${SMI:-}" ] && kill "$SMI" 2>/dev/null' EXIT

WORKLOADS=${LB_WORKLOADS:-qwen,gemma,calib}
BUDGETS=${LB_BUDGETS:-0.26,0.52}
MODES=${LB_MODES:-a,b,c}
REPS=${LB_REPS:-5}
TG=${LB_TG:-128}
PP=${LB_PP:-512}
BUDGET_S=${LB_BUDGET_S:-540}
TRACES=${FSL_TRACES:-$ROOT/.traces}
MODELS=${FSL_MODELS:-/tmp/fsl-models}
THREADS=$(nproc)
mkdir -p "$MODELS"
T0=$(date +%s)
# The runs so far, kept where a later call to a machine still warm finds
# them (LB_FRESH=1 starts over): a run already there with status ok is not
# run again, so one benchmark may span two device calls.
CSV="$FSL_WORK/llama-runs.csv"
[ -n "${LB_FRESH:-}" ] && rm -f "$CSV" "$FSL_WORK"/logits-*
[ -f "$CSV" ] || echo "workload,budget,mode,rep,proc,phase,tps,status,uses,hits,miss_bytes,token_uses,token_hits,copy_bytes,vram_mib,wall_s,n_cpu_moe,pool_mib,logits,begin_us,host_mib" >"$CSV"
PROMISED="$OUT/llama-promised.txt"
: >"$PROMISED"
ran() { grep -q "^$1,$2,$3,$4,$5,$6,[^,]*,ok," "$CSV"; } # w b mode rep proc phase: ran and ok
base_of() { case $1 in cs | lrus) echo "${1%s}" ;; csn | csl) echo c ;; *) echo "$1" ;; esac; } # a staged mode's unstaged one

# VRAM: the card's memory in use (nvidia-smi --query-gpu, every 200 ms in
# the background, with the time), less what was in use before any run.  A
# run's figure is the peak over its time: the llama.cpp process and, for
# the served modes, foresightd's pool (the VRAM that configuration costs;
# d: both processes).  Per-process figures are not used: in the GPU
# machine's container nvidia-smi's per-process query lists nothing.
# Host memory, sampled with it: the private (anonymous) memory of every
# fs-llama-driver process, summed (/proc/PID/status RssAnon).  Stock b
# holds its CPU layers' experts there; a served engine's experts are
# foresightd's one arena (shared memory, not counted here), so a served
# engine's figure is what it keeps besides, and d's two engines together
# should keep twice one c engine's, not another copy of the experts.
engines_anon_mib() {
	awk 'FNR == 1 { n = "" } /^Name:/ { n = $2 } /^RssAnon:/ && n == "fs-llama-driver" { t += $2 }
		END { printf "%.1f", t / 1024 }' /proc/[0-9]*/status 2>/dev/null
}
smi_used() { nvidia-smi --query-gpu=memory.used --format=csv,noheader,nounits -i 0 2>/dev/null | head -1; }
VRAM0=$(smi_used)
[[ $VRAM0 =~ ^[0-9]+$ ]] || fsl_die "nvidia-smi --query-gpu=memory.used gave '$VRAM0'"
(while :; do
	echo "$(date +%s.%N) $(smi_used) $(engines_anon_mib)"
	sleep 0.2
done) >"$FSL_WORK/smi.log" 2>/dev/null &
SMI=$!
peak_of() { # COLUMN BASE T0 T1: a sampled column's peak between the two times (date +%s.%N), less BASE
	awk -v c="$1" -v z="$2" -v a="$3" -v b="$4" '$1 >= a && $1 <= b && $c - z > m { m = $c - z } END { print m + 0 }' \
		"$FSL_WORK/smi.log"
}

model_of() { # the workload's model file, written when absent
	local w=$1 f="$MODELS/$1.gguf"
	if [ ! -f "$f" ]; then
		local t0
		t0=$(date +%s)
		case $w in
		qwen) "$FSMODEL" --shape qwen3-30b-a3b --route "$TRACES/qwen.route.csv" --match-trace --out "$f" >/dev/null ;;
		gemma) "$FSMODEL" --shape gemma-replay --route "$TRACES/gemma.route.csv" --match-trace --out "$f" >/dev/null ;;
		calib) "$FSMODEL" --shape qwen3-30b-a3b --route-model --route-tokens 20000 --out "$f" >/dev/null ;;
		*) fsl_die "workload $w: qwen, gemma or calib" ;;
		esac || fsl_die "writing $f failed"
		echo "run.sh: wrote $f in $(($(date +%s) - t0)) s" >&2
	fi
	echo "$f"
}

layers_of() { "$FSD" --model "$1" --describe | python3 -c 'import json,sys; print(json.load(sys.stdin)["layers"])'; }

# one W B MODE REP PHASE [extra env...]: one driver process, one CSV line.
one() {
	local w=$1 b=$2 mode=$3 rep=$4 phase=$5 model=$6 ncpu=$7 mib=$8 proc=${9:-0}
	local j="$FSL_WORK/run-$proc"
	ran "$w" "$b" "$mode" "$rep" "$proc" "$phase" && return 0
	# the logits of every output token: a, c and lru decode the same tokens
	# with the same flags, so theirs must be the same bytes
	local lg="$FSL_WORK/logits-$w-$b-$mode-$rep-$proc-$phase.txt"
	local args=(--threads "$THREADS" --fa on --reps 1 --warmup 0 --jsonl "$j.jsonl" --logits-out "$lg")
	if [ "$phase" = tg ]; then args+=(--pp 0 --tg "$TG"); else args+=(--pp "$PP" --tg 0); fi
	# each repetition decodes other tokens of the calibrated model (its sessions)
	[ "$w" = calib ] && args+=(--first-token $((rep * 1000)))
	rm -f "$j.jsonl" "$j.stats.json"
	local dmode=$mode t0 rc pid st=ok base
	base=$(base_of "$mode")
	export FORESIGHT_LLAMA_STAGE=${LB_STAGE:-0}
	[ "$base" = "$mode" ] || FORESIGHT_LLAMA_STAGE=${LB_STAGE_N:-16}
	case $base in b) dmode="b:$ncpu" ;; c | lru | d) dmode=c ;; esac
	t0=$(date +%s.%N)
	if [ "$base" = lru ]; then
		FSL_STATS="$j.stats.json" FORESIGHT_LLAMA_CACHE="lru:$mib" fsl_drive "$dmode" "$model" "${args[@]}" >"$j.log" 2>&1 &
	else
		FSL_STATS="$j.stats.json" fsl_drive "$dmode" "$model" "${args[@]}" >"$j.log" 2>&1 &
	fi
	pid=$!
	wait "$pid"
	rc=$?
	local wall t1 sj=- tps pstats copies bus fnv=-
	t1=$(date +%s.%N)
	wall=$(awk -v a="$t0" -v b="$t1" 'BEGIN { printf "%.1f", b - a }')
	if [ "$base" = c ] || [ "$base" = d ]; then
		# the daemon's whole telemetry after the run (its copies, refusals, tiers), kept beside the CSV
		sj="$FSL_WORK/fsd-stats-$w-$b-$mode-$rep-$proc-$phase.json"
		"$FSCTL" --socket "$FSL_SOCK" stats --json >"$sj" 2>/dev/null
	fi
	# one python3 a run (it starts in 0.4 s on a loaded 2-core host): the
	# driver's rate, the provider's counters and its host time per
	# evaluation (epoch, tables, upload call), foresightd's copied bytes
	read -r tps pstats copies bus < <(python3 - "$j.jsonl" "$phase" "$j.stats.json" "$sj" <<'PY'
import json, sys
jl, phase, ps, sj = sys.argv[1:5]
tps, pstats, bus, copies = "0", "0,0,0,0,0", "0", 0
try:  # a driver that died may leave a cut line: then the run failed (rc), 0 here
    for l in open(jl):
        d = json.loads(l)
        if d.get("summary"):
            tps = str(d["tg_tps_median"] if phase == "tg" else d["pp_tps_median"])
except (OSError, ValueError, KeyError):
    pass
try:
    d = json.load(open(ps))
    pstats = ",".join(str(d[k]) for k in ("uses", "hits", "miss_bytes", "token_uses", "token_hits"))
    bus = str(round(d["begin_ns"] / max(1, d["windows"]) / 1000, 1))
except (OSError, ValueError, KeyError):
    pass
try:
    copies = sum(c.get("copied_bytes", 0) for c in json.load(open(sj)).get("cards", []))
except (OSError, ValueError, AttributeError):
    pass
print(tps, pstats, copies, bus)
PY
	)
	: "${pstats:=0,0,0,0,0}" "${copies:=0}" "${bus:=0}"
	if [ "$rc" != 0 ] || [ ! -s "$j.jsonl" ] || [ "${tps:-0}" = 0 ]; then
		tps=0
		st="failed(rc=$rc)"
		tail -5 "$j.log" | sed 's/^/    /' >&2
	fi
	[ -s "$lg" ] && fnv=$(sha256sum "$lg" | cut -c1-16)
	echo "$w,$b,$mode,$rep,$proc,$phase,$tps,$st,$pstats,$copies,$(peak_of 2 "$VRAM0" "$t0" "$t1"),$wall,$ncpu,$mib,$fnv,$bus,$(peak_of 3 0 "$t0" "$t1")" >>"$CSV"
	printf 'run.sh: %-5s %-4s %-3s rep %s %s: %s t/s (%s s) %s\n' "$w" "$b" "$mode" "$rep" "$phase" "$tps" "$wall" "$st" >&2
}

for w in ${WORKLOADS//,/ }; do
	model=$(model_of "$w")
	L=$(layers_of "$model")
	for b in ${BUDGETS//,/ }; do
		ncpu=$(python3 -c "print(round($L * (1 - $b)))")
		mib=$(fsl_pool_mib "$model" "$ncpu")
		modes=()
		for m in ${MODES//,/ }; do
			[ "$m" = a ] && [ "$b" != "${BUDGETS%%,*}" ] && continue # a: once per workload
			modes+=("$m")
			for r in $(seq 1 "$REPS"); do
				case $m in
				d) for p in 1 2; do echo "$w,$b,$m,$r,tg,$p" >>"$PROMISED"; done ;;
				lru | lrus) echo "$w,$b,$m,$r,tg,0" >>"$PROMISED" ;; # compared on decode (base_of: lru)
				*) for ph in tg pp; do echo "$w,$b,$m,$r,$ph,0" >>"$PROMISED"; done ;;
				esac
			done
		done
		for r in $(seq 1 "$REPS"); do
			n=${#modes[@]}
			for k in $(seq 0 $((n - 1))); do
				m=${modes[$(((k + r) % n))]}
				if ran "$w" "$b" "$m" "$r" 0 tg && { [ "$(base_of "$m")" = lru ] || ran "$w" "$b" "$m" "$r" 0 pp; }; then
					continue # an earlier call ran them
				fi
				if [ "$m" = d ] && ran "$w" "$b" d "$r" 1 tg && ran "$w" "$b" d "$r" 2 tg; then
					continue
				fi
				if [ $(($(date +%s) - T0)) -gt "$BUDGET_S" ]; then
					echo "run.sh: out of time (LB_BUDGET_S=$BUDGET_S): $w $b $m rep $r not run" >&2
					continue
				fi
				case $(base_of "$m") in
				c | d)
					case $m in
					csn) fsl_fsd_start "$model" "$mib" --learn 0 ;;
					csl) fsl_fsd_start "$model" "$mib" --learn 1 ;;
					*) fsl_fsd_start "$model" "$mib" ;;
					esac
					;;
				lru) fsl_fsd_start "$model" 0 --slots 1 ;; # the arena only: the LRU has its own VRAM
				*) fsl_fsd_stop ;;
				esac
				if [ "$m" = d ]; then # two engines at once on the one daemon
					one "$w" "$b" d "$r" tg "$model" "$ncpu" "$mib" 1 &
					d1=$!
					one "$w" "$b" d "$r" tg "$model" "$ncpu" "$mib" 2
					# that one, not a bare wait: the VRAM sampler runs in
					# the background until the end (a bare wait hung here
					# until the device call's limit, 2026-12-06)
					wait "$d1"
					continue
				fi
				one "$w" "$b" "$m" "$r" tg "$model" "$ncpu" "$mib"
				[ "$(base_of "$m")" = lru ] || one "$w" "$b" "$m" "$r" pp "$model" "$ncpu" "$mib"
			done
		done
	done
	fsl_fsd_stop
	[ -n "${LB_KEEP_MODELS:-}" ] || rm -f "$model" # the disk holds about three at once
done

cp "$CSV" "$OUT/llama-runs.csv"
# the table, and its goals as bench/rows.sh rows (bench/device.sh --only llama)
python3 bench/llama/table.py "$CSV" "$PROMISED" --rows "$OUT/llama-rows.tsv" >"$OUT/llama.md"
rc=$?
cp "$OUT/llama.md" "$OUT/llama-results.md"
cat "$OUT/llama.md"
exit $rc
