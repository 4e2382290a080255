#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
#
# bench/llama/setup.sh: on the GPU machine, build what bench/llama runs:
# foresight's dependencies from .debs/ (tools/device-setup.sh), llama.cpp
# with our patches for CUDA (integrations/llama.cpp/build.sh, the source
# from the bundle carried in .llama/gitRelease.bundle: that machine reaches
# no registry), the driver, and foresight (foresightd, fsctl, fs-gguf-model,
# libforesight-llama) against the patched headers.
#
#   bash bench/llama/setup.sh [--pack DIR] [CUDA_ARCHS]     (default 90)
#
# Into FSL_OUT (default /tmp/fsl), outside the carried tree, so a machine
# still warm from the last call reuses it.  Two stamps: llama.cpp is rebuilt
# only when the patches, the driver or the architectures change, foresight
# when its sources do.  A llama.cpp build carried back from an earlier call
# (.llama/prebuilt-STAMP.tar.xz.part*, made by --pack, with the patched
# tree's headers beside it: .llama/headers-STAMP.tar.xz) is unpacked instead
# of rebuilt when its stamp matches; only a build needs the bundle
# (.llama-bundle/gitRelease.bundle: carry one or the other, the two pass
# the call's 64 MiB).  --pack DIR: after building, write the llama.cpp
# build's libraries and the driver there as .tar.xz parts of at most 15 MiB
# (a device call returns files of at most 16 MiB), and the headers.
set -euo pipefail
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
cd "$ROOT"
PACK=
if [ "${1:-}" = --pack ]; then
	PACK=${2:?--pack DIR}
	shift 2
fi
ARCHS=${1:-90}
FSL_OUT=${FSL_OUT:-/tmp/fsl}
BUNDLE=${FSL_BUNDLE:-$ROOT/.llama-bundle/gitRelease.bundle}
mkdir -p "$FSL_OUT"

# shellcheck source=tools/device-setup.sh
source tools/device-setup.sh /tmp/fsdeps >/dev/null || exit 1

hash_of() { (cd "$ROOT" && cat "$@" 2>/dev/null; echo "$ARCHS") | sha256sum | cut -c1-16; }
llama_stamp=$(hash_of integrations/llama.cpp/patches/*.patch integrations/llama.cpp/driver/* integrations/llama.cpp/build.sh)
fs_stamp=$( (git ls-files -s daemon client common proto tools integrations CMakeLists.txt
	git diff HEAD -- daemon client common proto tools integrations CMakeLists.txt) | sha256sum | cut -c1-16)
t0=$(date +%s)

# ---- llama.cpp (patched, CUDA) and the driver ------------------------------
if [ "$(cat "$FSL_OUT/llama.stamp" 2>/dev/null)" != "$llama_stamp" ]; then
	pre=$(ls .llama/prebuilt-"$llama_stamp".tar.xz.part* 2>/dev/null | head -1 || true)
	sets=$( (ls .llama/prebuilt-*.tar.xz.part00 2>/dev/null || true) | wc -l) # none: build from the bundle
	if [ -z "$pre" ] && [ "$sets" = 1 ] && [ -z "${FSL_REQUIRE_STAMP:-}" ]; then
		# One carried build, made for other inputs than these hash to here:
		# say so loudly and use it (FSL_REQUIRE_STAMP=1 rebuilds instead).
		other=$(basename "$(ls .llama/prebuilt-*.tar.xz.part00)" .tar.xz.part00)
		other=${other#prebuilt-}
		echo "setup.sh: WARNING: the carried llama.cpp build is stamped $other, these inputs hash to $llama_stamp:"
		for f in integrations/llama.cpp/patches/*.patch integrations/llama.cpp/driver/* integrations/llama.cpp/build.sh; do
			echo "setup.sh:   $(sha256sum "$f" | cut -c1-16) $f"
		done
		echo "setup.sh: using it anyway"
		llama_stamp=$other
		pre=$(ls .llama/prebuilt-"$llama_stamp".tar.xz.part* | head -1)
	fi
	if [ -n "$pre" ] && [ -f ".llama/headers-$llama_stamp.tar.xz" ]; then
		echo "setup.sh: unpacking the carried llama.cpp build ($llama_stamp)"
		rm -rf "$FSL_OUT/cuda" "$FSL_OUT/cuda-driver" "$FSL_OUT/src"
		cat .llama/prebuilt-"$llama_stamp".tar.xz.part* | tar -xJ -C "$FSL_OUT"
		tar -xJf ".llama/headers-$llama_stamp.tar.xz" -C "$FSL_OUT"
	else
		[ -f "$BUNDLE" ] || { echo "setup.sh: no llama.cpp bundle at $BUNDLE and no carried build" >&2; exit 1; }
		bash integrations/llama.cpp/build.sh --cuda "$ARCHS" --bundle "$BUNDLE" --out "$FSL_OUT" --targets llama \
			--jobs "$(nproc)"
	fi
	echo "$llama_stamp" >"$FSL_OUT/llama.stamp"
	echo "setup.sh: llama.cpp ready after $(($(date +%s) - t0)) s"
else
	echo "setup.sh: llama.cpp in $FSL_OUT is current ($llama_stamp)"
fi

# ---- foresight, against the patched header ---------------------------------
if [ "$(cat "$FSL_OUT/fs.stamp" 2>/dev/null)" != "$fs_stamp" ]; then
	pdir="$FSL_OUT/provider"
	cmake -S "$ROOT" -B "$pdir" -DCMAKE_BUILD_TYPE=Release -DFS_BUILD_TESTS=OFF \
		"-DFS_LLAMA_INCLUDE=$FSL_OUT/src/ggml/include" >"$pdir.log" 2>&1 &&
		cmake --build "$pdir" -j "$(nproc)" --target foresight-llama foresightd fsctl fs-gguf-model >>"$pdir.log" 2>&1 ||
		{ tail -30 "$pdir.log" >&2; echo "setup.sh: building foresight failed: $pdir.log" >&2; exit 1; }
	echo "$fs_stamp" >"$FSL_OUT/fs.stamp"
	echo "setup.sh: foresight ready after $(($(date +%s) - t0)) s"
else
	echo "setup.sh: foresight in $FSL_OUT is current ($fs_stamp)"
fi

if [ -n "$PACK" ]; then
	mkdir -p "$PACK"
	(cd "$FSL_OUT" && find cuda/bin cuda-driver -maxdepth 1 \( -name '*.so*' -o -name fs-llama-driver \) -print0 |
		tar --null -T - -cf - | xz -T0 -6) | split -b 15M -d - "$PACK/prebuilt-$llama_stamp.tar.xz.part"
	tar -cJf "$PACK/headers-$llama_stamp.tar.xz" -C "$FSL_OUT" src/ggml/include src/include
	ls -la "$PACK"/prebuilt-"$llama_stamp".*
fi
