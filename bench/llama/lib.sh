# SPDX-License-Identifier: Apache-2.0
# shellcheck shell=bash
#
# bench/llama/lib.sh: what bench/llama's scripts share: where the builds are
# (bench/llama/setup.sh makes them), a foresightd on the CUDA backend for a
# model, and fs-llama-driver runs in the three ways the benchmark compares:
#   a (every expert in VRAM), b (stock --n-cpu-moe), c (llama.cpp + foresightd).
#
# Sourced.  FSL_OUT: the build folder of integrations/llama.cpp/build.sh
# (default /tmp/fsl); FSL_WORK: sockets, logs, stats (default /tmp/fsl-work).

FSL_OUT=${FSL_OUT:-/tmp/fsl}
FSL_WORK=${FSL_WORK:-/tmp/fsl-work}
FSB="$FSL_OUT/provider"
FSD="$FSB/daemon/foresightd"
FSCTL="$FSB/tools/fsctl/fsctl"
FSMODEL="$FSB/tools/gguf/fs-gguf-model"
PROVIDER="$FSB/integrations/llama.cpp/provider/libforesight-llama.so"
DRIVER="$FSL_OUT/cuda-driver/fs-llama-driver"
FSL_SOCK="$FSL_WORK/fsd.sock"
# The experts of every layer in the provider's buffer; everything else as -ngl 99 puts it.
FSL_OT='ffn_(gate|up|down|gate_up)_exps\.weight=CUDA0_Experts'
mkdir -p "$FSL_WORK"

fsl_die() {
	echo "bench/llama: $*" >&2
	exit 1
}

# fsl_fsd_start MODEL POOL_MIB [extra foresightd options...]: a fresh
# foresightd on the CUDA backend, one card, a pool of POOL_MIB (0: --slots
# among the extra options); returns once it answers and the whole arena is
# loaded.
fsl_fsd_start() {
	local model=$1 mib=$2 pool=()
	shift 2
	[ "$mib" = 0 ] || pool=(--pool-mib "$mib")
	fsl_fsd_stop
	rm -f "$FSL_SOCK"
	setsid "$FSD" --socket "$FSL_SOCK" --backend cuda --cards 1 --model "$model" --allow-unlocked \
		"${pool[@]}" "$@" >"$FSL_WORK/fsd.log" 2>&1 </dev/null &
	FSL_FSD_PID=$!
	local i
	for i in $(seq 1 600); do
		if "$FSCTL" --socket "$FSL_SOCK" stats --json >"$FSL_WORK/fsd-stats.json" 2>/dev/null &&
			python3 - "$FSL_WORK/fsd-stats.json" <<'PY'; then
import json, sys
d = json.load(open(sys.argv[1]))["daemon"]
sys.exit(0 if d.get("arena_loaded_bytes", 0) >= d.get("arena_bytes", 1) else 1)
PY
			return 0
		fi
		kill -0 "$FSL_FSD_PID" 2>/dev/null || { tail -5 "$FSL_WORK/fsd.log" >&2; fsl_die "foresightd exited"; }
		sleep 0.2
	done
	fsl_die "foresightd did not load $model in 120 s"
}

fsl_fsd_stop() {
	[ -n "${FSL_FSD_PID:-}" ] || return 0
	kill "$FSL_FSD_PID" 2>/dev/null
	local i
	for i in $(seq 1 100); do
		kill -0 "$FSL_FSD_PID" 2>/dev/null || break
		sleep 0.05
	done
	kill -9 "$FSL_FSD_PID" 2>/dev/null
	FSL_FSD_PID=
}

# The pool (MiB) of the expert weight bytes of layers ncpu..L-1: what
# --n-cpu-moe ncpu leaves in VRAM (the slots also hold each part's zero
# tail and alignment, so the pool holds slightly fewer experts than that).
# ncpu 0 (every expert resident): a slot for every expert, slightly more
# than their bytes.
fsl_pool_mib() {
	local model=$1 ncpu=$2
	"$FSD" --model "$model" --describe 2>/dev/null | python3 -c '
import json, sys
d = json.load(sys.stdin)
n = int(sys.argv[1])
if n == 0:  # every expert fits: a slot each (slots are the largest expert, 4 KiB aligned)
    slot = (int(d["max_expert_bytes"]) + 4095) // 4096 * 4096
    print((slot * len(d["parts"]) * d["experts"] + (1 << 20) - 1) >> 20)
    sys.exit(0)
b = sum(sum(p["bytes"] for p in l["parts"]) for l in d["parts"] if l["layer"] >= n) * d["experts"]
print(max(1, b >> 20))' "$ncpu"
}

# fsl_drive MODE MODEL [driver options...]: one fs-llama-driver run.
#   a      every expert in VRAM (-ngl 99)
#   b:N    stock: --n-cpu-moe N
#   c      the provider against the running foresightd
# FSL_STATS (c): where the provider writes its counters at exit.
fsl_drive() {
	local mode=$1 model=$2
	shift 2
	case $mode in
	a) "$DRIVER" -m "$model" --ngl 99 "$@" ;;
	b:*) "$DRIVER" -m "$model" --ngl 99 --n-cpu-moe "${mode#b:}" "$@" ;;
	c) GGML_CUDA_EXPERT_PROVIDER="$PROVIDER" FORESIGHT_SOCKET="$FSL_SOCK" FORESIGHT_LLAMA_QUIET=1 \
		FORESIGHT_LLAMA_STATS="${FSL_STATS:-$FSL_WORK/provider-stats.json}" \
		"$DRIVER" -m "$model" --ngl 99 --ot "$FSL_OT" "$@" ;;
	*) fsl_die "fsl_drive: mode $mode" ;;
	esac
}
