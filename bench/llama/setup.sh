#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
#
# bench/llama/setup.sh: on the GPU machine, build what bench/llama runs, once
# per tree: foresight's dependencies from .debs/ (tools/device-setup.sh),
# llama.cpp with our patches for CUDA (integrations/llama.cpp/build.sh, the
# source from the bundle carried in .llama/gitRelease.bundle: that machine
# reaches no registry), the driver, and foresight (foresightd, fsctl,
# fs-gguf-model, libforesight-llama) against the patched headers.
#
#   bash bench/llama/setup.sh [CUDA_ARCHS]      (default 90)
#
# Into FSL_OUT (default /tmp/fsl), outside the carried tree, so a machine
# still warm from the last call reuses it: a stamp of the inputs' hashes
# skips a build that is current.  Source tools/device-setup.sh's exports
# before running what it built (bench/llama/run.sh and check.sh do).
set -euo pipefail
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
cd "$ROOT"
ARCHS=${1:-90}
FSL_OUT=${FSL_OUT:-/tmp/fsl}
BUNDLE=${FSL_BUNDLE:-$ROOT/.llama/gitRelease.bundle}
[ -f "$BUNDLE" ] || { echo "setup.sh: no llama.cpp bundle at $BUNDLE (carry .llama)" >&2; exit 1; }

# shellcheck source=tools/device-setup.sh
source tools/device-setup.sh /tmp/fsdeps >/dev/null || exit 1

stamp=$( (git ls-files -s integrations daemon client common proto tools bench/llama CMakeLists.txt 2>/dev/null
	git diff HEAD -- integrations daemon client common proto tools CMakeLists.txt 2>/dev/null
	echo "$ARCHS") | sha256sum | cut -c1-16)
if [ -f "$FSL_OUT/stamp" ] && [ "$(cat "$FSL_OUT/stamp")" = "$stamp" ]; then
	echo "setup.sh: $FSL_OUT is current ($stamp)"
	exit 0
fi
t0=$(date +%s)
bash integrations/llama.cpp/build.sh --cuda "$ARCHS" --bundle "$BUNDLE" --out "$FSL_OUT" --targets llama \
	--provider --fs-targets "foresight-llama foresightd fsctl fs-gguf-model" --jobs "$(nproc)"
echo "$stamp" >"$FSL_OUT/stamp"
echo "setup.sh: built in $(($(date +%s) - t0)) s"
