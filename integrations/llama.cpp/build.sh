#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
#
# integrations/llama.cpp/build.sh: fetch llama.cpp, check it is the commit
# our patches are for, apply them, build it (and, with --provider, our
# provider library against the patched headers).
#
#   bash integrations/llama.cpp/build.sh [options]
#
#   --cuda ARCHS      build the CUDA backend for these architectures (e.g. 90;
#                     "89;90"); default: CPU only
#   --out DIR         where everything goes (default: build-llama in the
#                     repository): DIR/src (the patched tree), DIR/cpu or
#                     DIR/cuda (its build), DIR/provider (ours)
#   --bundle FILE     llama.cpp's git bundle to use (a machine without the npm
#                     registry: carry the bundle there); default: fetched
#   --fetch-only      fetch, check and patch; build nothing
#   --provider        also build libforesight-llama (needs nvcc) with the
#                     patched tree's ggml-cuda.h, so a drift of the seam fails,
#                     in DIR/provider (a foresight build folder)
#   --fs-targets "T..."  the foresight targets built there (default:
#                     foresight-llama; e.g. "foresight-llama foresightd fsctl")
#   --targets "T..."  llama.cpp targets (default: "llama llama-cli")
#   --jobs N          build parallelism (default: nproc)
#
# llama.cpp's source comes from the npm package node-llama-cpp@3.21.1, which
# ships it as a git bundle (package/llama/gitRelease.bundle): the tarball's
# sha256 and the bundle's commit are checked.  It is cached in
# $FS_LLAMA_CACHE (default ~/.cache/foresight/llama) and never committed.
# The patched tree's own driver (driver/, if present) is built against the
# llama.cpp build.  Exits non-zero, saying why, on any failure.
set -euo pipefail

HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
ROOT=$(cd "$HERE/../.." && pwd)

NPM_PKG=node-llama-cpp@3.21.1
NPM_TGZ=node-llama-cpp-3.21.1.tgz
NPM_SHA256=7a231d6bafa14142a1cbed9893d4ec5bc6041b2a5f5939a623accaab4203c11f
LLAMA_COMMIT=80fb11ac73e66d89eae2c6a91d8a77428fa733ed

cuda=""
out="$ROOT/build-llama"
bundle=""
fetch_only=0
provider=0
targets="llama llama-cli"
fs_targets="foresight-llama"
jobs=$(nproc 2>/dev/null || echo 2)

die() {
	echo "build.sh: $*" >&2
	exit 1
}

while [ $# -gt 0 ]; do
	case "$1" in
	--cuda) cuda=${2:?--cuda needs architectures, e.g. 90}; shift 2 ;;
	--out) out=${2:?}; shift 2 ;;
	--bundle) bundle=${2:?}; shift 2 ;;
	--fetch-only) fetch_only=1; shift ;;
	--provider) provider=1; shift ;;
	--targets) targets=${2:?}; shift 2 ;;
	--fs-targets) fs_targets=${2:?}; shift 2 ;;
	--jobs) jobs=${2:?}; shift 2 ;;
	-h | --help) sed -n '4,32p' "${BASH_SOURCE[0]}" | sed 's/^# \{0,1\}//'; exit 0 ;;
	*) die "unknown option '$1' (try --help)" ;;
	esac
done
mkdir -p "$out"
out=$(cd "$out" && pwd)

# ---- 1. the bundle -------------------------------------------------------
if [ -z "$bundle" ]; then
	cache=${FS_LLAMA_CACHE:-$HOME/.cache/foresight/llama}
	mkdir -p "$cache"
	if [ ! -f "$cache/$NPM_TGZ" ]; then
		command -v npm >/dev/null || die "npm is needed to fetch $NPM_PKG (or pass --bundle FILE)"
		echo "build.sh: fetching $NPM_PKG (npm pack) into $cache"
		(cd "$cache" && npm pack --silent "$NPM_PKG" >/dev/null) || die "npm pack $NPM_PKG failed"
	fi
	got=$(sha256sum "$cache/$NPM_TGZ" | cut -d' ' -f1)
	[ "$got" = "$NPM_SHA256" ] || die "$cache/$NPM_TGZ: sha256 $got, expected $NPM_SHA256 (remove it to fetch again)"
	if [ ! -f "$cache/gitRelease.bundle" ]; then
		tar -xzf "$cache/$NPM_TGZ" -C "$cache" package/llama/gitRelease.bundle
		mv "$cache/package/llama/gitRelease.bundle" "$cache/gitRelease.bundle"
		rm -rf "$cache/package"
	fi
	bundle="$cache/gitRelease.bundle"
fi
[ -f "$bundle" ] || die "no bundle at $bundle"

# ---- 2. the source, checked, patched -------------------------------------
src="$out/src"
rm -rf "$src"
git clone -q "$bundle" "$src" 2>/dev/null || die "git clone $bundle failed"
head=$(git -C "$src" rev-parse HEAD)
[ "$head" = "$LLAMA_COMMIT" ] || die "the bundle is llama.cpp $head; our patches are for $LLAMA_COMMIT"
for p in "$HERE"/patches/*.patch; do
	[ -f "$p" ] || continue
	git -C "$src" apply --whitespace=nowarn "$p" || die "$(basename "$p") does not apply to $LLAMA_COMMIT"
	echo "build.sh: applied $(basename "$p")"
done
[ "$fetch_only" = 1 ] && { echo "build.sh: patched source in $src"; exit 0; }

# ---- 3. llama.cpp ---------------------------------------------------------
common=(-DCMAKE_BUILD_TYPE=Release -DGGML_NATIVE=OFF -DLLAMA_OPENSSL=OFF -DLLAMA_BUILD_TESTS=OFF
	-DLLAMA_BUILD_SERVER=OFF -DLLAMA_BUILD_EXAMPLES=OFF)
if [ -n "$cuda" ]; then
	bdir="$out/cuda"
	cmake -S "$src" -B "$bdir" "${common[@]}" -DGGML_CUDA=ON "-DCMAKE_CUDA_ARCHITECTURES=$cuda" >"$out/cuda-configure.log" 2>&1 ||
		die "configuring llama.cpp (CUDA) failed: $out/cuda-configure.log"
else
	bdir="$out/cpu"
	cmake -S "$src" -B "$bdir" "${common[@]}" -DGGML_CUDA=OFF >"$out/cpu-configure.log" 2>&1 ||
		die "configuring llama.cpp (CPU) failed: $out/cpu-configure.log"
fi
# shellcheck disable=SC2086 # a list of targets
cmake --build "$bdir" -j "$jobs" --target $targets >"$bdir.log" 2>&1 || { tail -30 "$bdir.log" >&2; die "building llama.cpp failed: $bdir.log"; }
echo "build.sh: llama.cpp built in $bdir"

# A host with the CUDA toolkit but no driver (a build machine, not the GPU
# one) has no libcuda.so.1 for the linker to resolve libggml-cuda's driver
# calls against: link the driver through the toolkit's stub under that name
# (the GPU machine's real one is what loads at run time).
drv_ld=()
if [ -n "$cuda" ] && ! ldconfig -p 2>/dev/null | grep -q 'libcuda\.so\.1 '; then
	stub=$(dirname "$(command -v nvcc 2>/dev/null || echo /usr/local/cuda/bin/nvcc)")/../lib64/stubs/libcuda.so
	if [ -f "$stub" ]; then
		mkdir -p "$out/cuda-stub"
		ln -sf "$(cd "$(dirname "$stub")" && pwd)/libcuda.so" "$out/cuda-stub/libcuda.so.1"
		drv_ld=("-DCMAKE_EXE_LINKER_FLAGS=-Wl,-rpath-link,$out/cuda-stub")
		echo "build.sh: no libcuda.so.1 here (no driver): the driver links through the toolkit's stub"
	fi
fi
if [ -f "$HERE/driver/CMakeLists.txt" ]; then
	cmake -S "$HERE/driver" -B "$bdir-driver" -DCMAKE_BUILD_TYPE=Release "-DLLAMA_BUILD_DIR=$bdir" "${drv_ld[@]}" \
		>"$bdir-driver.log" 2>&1 && cmake --build "$bdir-driver" -j "$jobs" >>"$bdir-driver.log" 2>&1 ||
		{ tail -30 "$bdir-driver.log" >&2; die "building the driver failed: $bdir-driver.log"; }
	echo "build.sh: driver built in $bdir-driver"
fi

# ---- 4. our provider, against the patched header ---------------------------
if [ "$provider" = 1 ]; then
	command -v nvcc >/dev/null || [ -x /usr/local/cuda/bin/nvcc ] || die "--provider needs nvcc"
	pdir="$out/provider"
	# shellcheck disable=SC2086 # a list of targets
	cmake -S "$ROOT" -B "$pdir" -DCMAKE_BUILD_TYPE=Release -DFS_BUILD_TESTS=OFF \
		"-DFS_LLAMA_INCLUDE=$src/ggml/include" >"$pdir.log" 2>&1 &&
		cmake --build "$pdir" -j "$jobs" --target $fs_targets >>"$pdir.log" 2>&1 ||
		{ tail -30 "$pdir.log" >&2; die "building libforesight-llama failed: $pdir.log"; }
	echo "build.sh: $pdir/integrations/llama.cpp/provider/libforesight-llama.so"
fi
