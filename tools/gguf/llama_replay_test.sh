#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
#
# llama_replay_test.sh: fs-gguf-model's models run in llama.cpp (CPU), and
# routing replay reproduces the route exactly.
#
#   llama_replay_test.sh MODEL_BIN ROUTE_CHECK_BIN DRIVER_SRC WORK_DIR TRACES_DIR
#
# Needs a llama.cpp build with integrations/llama.cpp/patches/0002-route-replay.patch
# applied: FS_LLAMA_BUILD=<its build dir> (shared libraries; the driver is
# built against it here, or FS_LLAMA_DRIVER=<a built fs-llama-driver>).
# Exit 77 (ctest: skipped) with a SKIP line when FS_LLAMA_BUILD is not set.
# FS_LLAMA_STOCK_BUILD=<a build of the same commit without 0002> adds: a
# model without tid2eid gives the same logits, byte for byte, on both.
#
#  1. a tiny qwen3moe model, no route: two driver processes give byte-equal
#     logits (every prefill token and every decode step, hashes and raw
#     floats), all finite; flash attention on and off;
#  2. the same model with tables from the calibrated routing model: every
#     (position, layer) llama.cpp routed (ffn_moe_topk-L, eval callback)
#     equals the route, prefill in ubatches smaller than the batch;
#  3. with the real qwen trace (when ../shared/data/route-traces is there):
#     a tiny model of 128 experts, top-6, replays it exactly;
#  4. a small gpt-oss model (MXFP4 experts, biases, sinks, SWA) runs, finite,
#     and replays the calibrated route.
set -euo pipefail

model_bin=$1 check_bin=$2 driver_src=$3 work=$4 traces=$5

skip() {
	echo "SKIP: $* (the llama.cpp replay test did not run)"
	exit 77
}
fail() {
	echo "FAIL: $*"
	exit 1
}

[ -n "${FS_LLAMA_BUILD:-}" ] || skip "FS_LLAMA_BUILD (a llama.cpp build with the route-replay patch) is not set"
[ -f "$FS_LLAMA_BUILD/CMakeCache.txt" ] || fail "FS_LLAMA_BUILD=$FS_LLAMA_BUILD is not a llama.cpp build dir"

rm -rf "$work"
mkdir -p "$work"
cd "$work"

build_driver() { # build_driver DIR LLAMA_BUILD
	cmake -S "$driver_src" -B "$1" -DLLAMA_BUILD_DIR="$2" -DCMAKE_BUILD_TYPE=Release >"$1.log" 2>&1 ||
		{ cat "$1.log"; fail "cannot configure the driver against $2"; }
	cmake --build "$1" >>"$1.log" 2>&1 || { cat "$1.log"; fail "cannot build the driver against $2"; }
}
drv=${FS_LLAMA_DRIVER:-}
if [ -z "$drv" ]; then
	build_driver driver "$FS_LLAMA_BUILD"
	drv=$work/driver/fs-llama-driver
fi

run() { # run NAME ARGS...: the driver, its output kept in NAME.out
	local name=$1
	shift
	local rc=0
	"$drv" --threads 2 --warmup 0 "$@" >"$name.out" 2>&1 || rc=$?
	if [ "$rc" -ne 0 ]; then
		cat "$name.out"
		fail "$name: fs-llama-driver $* exited $rc"
	fi
	grep -q " 0 non-finite" "$name.out" || { cat "$name.out"; fail "$name: non-finite logits"; }
}

# 1. determinism and finiteness
"$model_bin" --shape tiny --out tiny.gguf >/dev/null
for fa in on off; do
	for r in a b; do
		run "plain-$fa-$r" -m tiny.gguf --fa $fa --pp 24 --tg 8 --reps 2 --all-logits --require-identical \
			--logits-out "plain-$fa-$r.fnv" --logits-raw "plain-$fa-$r.raw"
	done
	cmp "plain-$fa-a.fnv" "plain-$fa-b.fnv" || fail "fa $fa: two runs' logit hashes differ"
	cmp "plain-$fa-a.raw" "plain-$fa-b.raw" || fail "fa $fa: two runs' raw logits differ"
	n=$(wc -l <"plain-$fa-a.fnv")
	[ "$n" -eq 32 ] || fail "fa $fa: $n output tokens hashed, want 24 + 8"
	[ "$(stat -c %s "plain-$fa-a.raw")" -eq $((32 * 512 * 4)) ] || fail "fa $fa: raw logits size"
	echo "ok: tiny qwen3moe, fa $fa: two runs byte-identical (32 tokens), finite"
done
if [ -n "${FS_LLAMA_STOCK_BUILD:-}" ]; then
	build_driver driver-stock "$FS_LLAMA_STOCK_BUILD"
	drv_patched=$drv
	drv=$work/driver-stock/fs-llama-driver
	run plain-stock -m tiny.gguf --fa on --pp 24 --tg 8 --reps 1 --all-logits --logits-raw plain-stock.raw
	drv=$drv_patched
	cmp plain-on-a.raw plain-stock.raw || fail "0002 changed the logits of a model without tid2eid"
	echo "ok: without tid2eid, patched and stock llama.cpp give byte-identical logits"
else
	echo "SKIP: FS_LLAMA_STOCK_BUILD is not set (patched vs stock logits not compared)"
fi
# the logits depend on the input (a driver that ignores it would pass the above)
run plain-shift -m tiny.gguf --fa on --pp 24 --tg 8 --reps 1 --all-logits --first-token 7 --logits-out shift.fnv
cmp -s plain-on-a.fnv shift.fnv && fail "other tokens, same logits"

# 2. replay of the calibrated routing model, prefill in ubatches of 16
"$model_bin" --shape tiny --route-model --route-tokens 50 --route-save tiny-r.fstrace --out tiny-r.gguf >/dev/null
run route-model -m tiny-r.gguf --pp 40 --tg 6 --ubatch 16 --batch 40 --reps 1 --routes tiny-r.routes
"$check_bin" --trace tiny-r.fstrace --routes tiny-r.routes --layers 4 --positions 46 --vocab 512
# without the tables the router chooses: the same check must fail
run route-none -m tiny.gguf --pp 40 --tg 6 --ubatch 16 --batch 40 --reps 1 --routes tiny.routes
if "$check_bin" --trace tiny-r.fstrace --routes tiny.routes --layers 4 --positions 46 --vocab 512 >/dev/null 2>&1; then
	fail "a model without tid2eid routes like the trace: the check cannot fail"
fi
echo "ok: calibrated route replayed exactly (46 positions x 4 layers)"

# 3. the real qwen trace
if [ -f "$traces/qwen.route.csv" ]; then
	"$model_bin" --shape tiny --experts 128 --route "$traces/qwen.route.csv" --out tiny-q.gguf >/dev/null 2>&1
	run route-qwen -m tiny-q.gguf --pp 150 --tg 10 --ubatch 64 --reps 1 --routes tiny-q.routes
	"$check_bin" --trace "$traces/qwen.route.csv" --routes tiny-q.routes --layers 4 --positions 160 --vocab 512
	echo "ok: qwen trace replayed exactly (160 positions, wrapping at its 128 decode tokens)"
else
	echo "SKIP: $traces/qwen.route.csv is absent (the real-trace replay did not run)"
fi

# 4. gpt-oss
oss=(--shape gpt-oss-20b --layers 2 --experts 8 --embd 256 --ff 256 --vocab 512 --heads 4 --kv-heads 2 --head-dim 64)
"$model_bin" "${oss[@]}" --route-model --route-tokens 40 --route-save oss.fstrace --out oss.gguf >/dev/null
run oss -m oss.gguf --pp 20 --tg 4 --reps 2 --require-identical --routes oss.routes
"$check_bin" --trace oss.fstrace --routes oss.routes --layers 2 --positions 24 --vocab 512
echo "ok: gpt-oss (MXFP4 experts, biases, sinks) runs, finite, replays its route"
echo "PASS"
