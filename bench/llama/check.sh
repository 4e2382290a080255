#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
#
# bench/llama/check.sh: on the GPU machine, llama.cpp served by foresightd
# gives the same logits, byte for byte, as llama.cpp with every expert in
# VRAM: at ~0 %, 26 % and 100 % of the experts resident, with CUDA graphs on
# and off, with fusion off (gate and up as separate products), on the
# multi-token MMVQ path (ubatch 4) and MMQ (ubatch 512), and with foresightd
# killed (-9) and restarted while the engine decodes.
#
#   bash bench/llama/check.sh OUTDIR [--full]
#
# Each case runs fs-llama-driver and compares its per-token logit hashes
# (FNV-1a 64 of the float32 logits: --logits-out) with case a's; it also
# reads the provider's counters, so a case that promised slots shows it
# read some (hits) and the ~0 % case none.  A table in OUTDIR/check.md;
# exits non-zero when any case differs, fails or is missing.  --full adds
# the Qwen3-30B-A3B-shaped model on replayed qwen routing (16 GiB; its
# write and load take about a minute).
set -uo pipefail
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
cd "$ROOT" || exit 2
RES=${1:?usage: check.sh OUTDIR [--full]}
FULL=${2:-}
mkdir -p "$RES"
# shellcheck source=tools/device-setup.sh
source tools/device-setup.sh /tmp/fsdeps >/dev/null || exit 1
# shellcheck source=bench/llama/lib.sh
source bench/llama/lib.sh
trap fsl_fsd_stop EXIT
# The provider's misses read in place unless a case stages them (the
# default stages 16 a layer: the cases below that say so set it).
export FORESIGHT_LLAMA_STAGE=0

MODELS=${FSL_MODELS:-/tmp/fsl-models}
OUT="$FSL_WORK/check" # the runs' logits and logs (OUTDIR gets the table only)
rm -rf "$OUT"
mkdir -p "$MODELS" "$OUT"
rows="$RES/check.md"
echo "| model | case | logits vs a | tokens | uses | hits | status |" >"$rows"
echo "|---|---|---|---|---|---|---|" >>"$rows"
fail=0

# row MODEL CASE REF GOT HITS_RULE: compare logit files, read the stats.
row() {
	local model=$1 case=$2 ref=$3 got=$4 rule=$5 same="differ" n uses=- hits=- st=ok
	n=$(wc -l <"$got" 2>/dev/null || echo 0)
	if [ -s "$got" ] && cmp -s "$ref" "$got"; then same="identical"; else st=FAIL; fi
	if [ -f "$FSL_WORK/provider-stats.json" ] && [ "$rule" != none ]; then
		read -r uses hits staged < <(python3 -c 'import json,sys; d=json.load(open(sys.argv[1]))
print(d["uses"], d["hits"], d.get("staged", 0))' "$FSL_WORK/provider-stats.json")
		case $rule in
		zero) [ "$hits" = 0 ] || st=FAIL ;;
		some) [ "$hits" -gt 0 ] || st=FAIL ;;
		staged) [ "$hits" -gt 0 ] && [ "$staged" -gt 0 ] || st=FAIL ;; # the staging kernel ran
		esac
		rm -f "$FSL_WORK/provider-stats.json"
	fi
	[ "$st" = ok ] || fail=1
	echo "| $model | $case | $same | $n | $uses | $hits | $st |" | tee -a "$rows"
}

drive() { # drive MODE MODEL LOGITS [options]: one run, its log beside
	local mode=$1 model=$2 logits=$3
	shift 3
	rm -f "$logits"
	fsl_drive "$mode" "$model" --reps 1 --warmup 0 --logits-out "$logits" "$@" >"$logits.log" 2>&1 ||
		{ echo "  run failed ($mode): $(tail -3 "$logits.log")"; }
}

# ---- tiny: every path, quickly ---------------------------------------------
tiny="$MODELS/tiny.gguf"
[ -f "$tiny" ] || "$FSMODEL" --shape tiny --out "$tiny" >/dev/null || fsl_die "writing $tiny failed"
total=$("$FSD" --model "$tiny" --describe | python3 -c 'import json,sys; d=json.load(sys.stdin); print(sum(d["expert_bytes"]) * d["experts"])')
mib() { python3 -c "import sys; print(max(1, int($total * $1 / (1 << 20) + 0.999)))"; }
args=(--pp 40 --tg 48 --all-logits --threads 4)
# References: a with the same flags as each c case (fusion and the ubatch
# choose other kernels, whose rounding differs; CUDA graphs do not).
drive a "$tiny" "$OUT/t-a.txt" "${args[@]}"
GGML_CUDA_DISABLE_GRAPHS=1 drive a "$tiny" "$OUT/t-a-ng.txt" "${args[@]}"
GGML_CUDA_DISABLE_FUSION=1 drive a "$tiny" "$OUT/t-a-nf.txt" "${args[@]}"
drive a "$tiny" "$OUT/t-a-ub4.txt" "${args[@]}" --ubatch 4
[ -s "$OUT/t-a.txt" ] || fsl_die "the reference run failed: $(tail -5 "$OUT/t-a.txt.log")"
row tiny "a: every expert in VRAM, CUDA graphs off vs on" "$OUT/t-a.txt" "$OUT/t-a-ng.txt" none

fsl_fsd_start "$tiny" 0 --slots 1
drive c "$tiny" "$OUT/t-c0.txt" "${args[@]}"
row tiny "c: foresightd, 1 slot (~0 %)" "$OUT/t-a.txt" "$OUT/t-c0.txt" none

fsl_fsd_start "$tiny" "$(mib 0.26)"
drive c "$tiny" "$OUT/t-c26.txt" "${args[@]}"
row tiny "c: 26 %, CUDA graphs on" "$OUT/t-a.txt" "$OUT/t-c26.txt" some
GGML_CUDA_DISABLE_GRAPHS=1 drive c "$tiny" "$OUT/t-c26-ng.txt" "${args[@]}"
row tiny "c: 26 %, CUDA graphs off" "$OUT/t-a-ng.txt" "$OUT/t-c26-ng.txt" some
GGML_CUDA_DISABLE_FUSION=1 drive c "$tiny" "$OUT/t-c26-nf.txt" "${args[@]}"
row tiny "c: 26 %, fusion off (gate, up apart)" "$OUT/t-a-nf.txt" "$OUT/t-c26-nf.txt" some
drive c "$tiny" "$OUT/t-c26-ub4.txt" "${args[@]}" --ubatch 4
row tiny "c: 26 %, ubatch 4 (MMVQ, several tokens)" "$OUT/t-a-ub4.txt" "$OUT/t-c26-ub4.txt" some
# misses staged into VRAM by the provider's copy kernel (FORESIGHT_LLAMA_STAGE)
# instead of read in place: the products read other addresses, the same bytes
FORESIGHT_LLAMA_STAGE=16 drive c "$tiny" "$OUT/t-c26-st.txt" "${args[@]}"
row tiny "c: 26 %, misses staged (16 a layer), CUDA graphs on" "$OUT/t-a.txt" "$OUT/t-c26-st.txt" staged
FORESIGHT_LLAMA_STAGE=16 GGML_CUDA_DISABLE_GRAPHS=1 drive c "$tiny" "$OUT/t-c26-st-ng.txt" "${args[@]}"
row tiny "c: 26 %, misses staged, CUDA graphs off" "$OUT/t-a-ng.txt" "$OUT/t-c26-st-ng.txt" staged
FORESIGHT_LLAMA_STAGE=2 drive c "$tiny" "$OUT/t-c26-st2.txt" "${args[@]}" --ubatch 4
row tiny "c: 26 %, 2 staged a layer (the rest in place), ubatch 4" "$OUT/t-a-ub4.txt" "$OUT/t-c26-st2.txt" staged

fsl_fsd_start "$tiny" "$(mib 1.10)"
drive c "$tiny" "$OUT/t-c100.txt" "${args[@]}"
row tiny "c: 100 %" "$OUT/t-a.txt" "$OUT/t-c100.txt" some

# kill -9 while it decodes, restart: the engine keeps decoding (misses read
# from the arena), the same logits.
long=(--pp 16 --tg 3000 --threads 4)
drive a "$tiny" "$OUT/t-a-long.txt" "${long[@]}"
fsl_fsd_start "$tiny" "$(mib 0.26)"
(
	sleep 1.5
	kill -9 "$FSL_FSD_PID"
	sleep 1
	setsid "$FSD" --socket "$FSL_SOCK" --backend cuda --cards 1 --model "$tiny" --allow-unlocked \
		--pool-mib "$(mib 0.26)" >"$FSL_WORK/fsd2.log" 2>&1 </dev/null &
	echo $! >"$FSL_WORK/fsd2.pid"
) &
drive c "$tiny" "$OUT/t-c-kill.txt" "${long[@]}"
wait
row tiny "c: 26 %, foresightd killed (-9) at 1.5 s, restarted at 2.5 s" "$OUT/t-a-long.txt" "$OUT/t-c-kill.txt" some
if grep -q '"attaches":2' "$OUT/t-c-kill.txt.log" 2>/dev/null || [ -f "$FSL_WORK/fsd2.pid" ]; then
	FSL_FSD_PID=$(cat "$FSL_WORK/fsd2.pid" 2>/dev/null)
fi
fsl_fsd_stop

# ---- full size on replayed routing -------------------------------------------
if [ "$FULL" = --full ]; then
	qwen="$MODELS/qwen.gguf" # the name bench/llama/run.sh writes it under
	trace=${FSL_TRACES:-$ROOT/.traces}/qwen.route.csv
	[ -f "$qwen" ] || "$FSMODEL" --shape qwen3-30b-a3b --route "$trace" --match-trace --out "$qwen" >/dev/null ||
		fsl_die "writing $qwen failed"
	fargs=(--pp 512 --tg 64 --threads 16)
	drive a "$qwen" "$OUT/q-a.txt" "${fargs[@]}"
	fsl_fsd_start "$qwen" "$(fsl_pool_mib "$qwen" 36)"
	drive c "$qwen" "$OUT/q-c26.txt" "${fargs[@]}"
	row qwen-replay "c: 26 % (the experts of 12 of 48 layers)" "$OUT/q-a.txt" "$OUT/q-c26.txt" some
	FORESIGHT_LLAMA_STAGE=16 drive c "$qwen" "$OUT/q-c26-st.txt" "${fargs[@]}"
	row qwen-replay "c: 26 %, misses staged (16 a layer)" "$OUT/q-a.txt" "$OUT/q-c26-st.txt" staged
	fsl_fsd_stop
fi

echo
if [ "$fail" = 0 ]; then echo "check.sh: every case identical"; else echo "check.sh: FAILED"; fi
exit "$fail"
