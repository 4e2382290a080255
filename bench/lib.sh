# SPDX-License-Identifier: Apache-2.0
# shellcheck shell=bash
#
# bench/lib.sh: the build preamble every bench/*/run.sh shares (sourced).
#
#   bench_build DIR MODE [TARGET...]
#
# MODE host: the default configuration (a CPU machine, CI's smoke tests);
# MODE gpu: the deps from .debs/ when it is there (tools/device-setup.sh,
# the lent GPU machines have no package registry) and a Release build.
# BENCH_CMAKE_ARGS (an array, optional) adds configure options.
# No TARGET: every target.  FS_BENCH_PREBUILT=1 (bench/device.sh built
# everything once): nothing is done.
# A failed configure or build prints the compiler's errors and returns 1,
# so a caller under `set -e` stops there instead of measuring a stale or
# missing binary (the old per-script preambles hid a failed build).
bench_build() {
	local dir=$1 mode=$2
	shift 2
	[ "${FS_BENCH_PREBUILT:-0}" = 1 ] && return 0
	echo "== build ($dir, $mode${*:+: $*})"
	local cfg=()
	if [ "$mode" = gpu ]; then
		if [ -d .debs ]; then
			# shellcheck disable=SC1091
			source tools/device-setup.sh /tmp/fsdeps >/dev/null
		fi
		cfg=(-DCMAKE_BUILD_TYPE=Release)
	fi
	local log
	log=$(mktemp /tmp/fs-bench-build-XXXXXX)
	local tgt=()
	[ $# -gt 0 ] && tgt=(--target "$@")
	if ! cmake -S . -B "$dir" "${cfg[@]}" "${BENCH_CMAKE_ARGS[@]}" >"$log" 2>&1 ||
		! cmake --build "$dir" -j"$(nproc)" "${tgt[@]}" >>"$log" 2>&1; then
		grep -E "error|Error" "$log" | head -40 >&2 || tail -40 "$log" >&2
		echo "bench_build: building $dir failed (log above)" >&2
		rm -f "$log"
		return 1
	fi
	grep -E "warning" "$log" | head -20 || true
	rm -f "$log"
}
