#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
#
# patch_test.sh: our llama.cpp patches apply to the llama.cpp build.sh
# fetches (node-llama-cpp@3.21.1 from npm, its sha256 and commit checked),
# and the provider's view of the seam is the patched ggml-cuda.h's: fsl_seam.c
# compiles against that header (FSL_GGML_CUDA_H), so a change to one side
# alone fails here.  Then the seam's layout is compared field by field with
# the provider's own declaration (the one a build without the llama.cpp tree
# uses).
#
#   bash patch_test.sh CC WORKDIR
#
# Skipped (exit 77) only when the npm registry cannot be reached after three
# tries (nothing fetched, nothing to test); every other failure fails.
set -uo pipefail
HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
ROOT=$(cd "$HERE/../../.." && pwd)
CC=${1:-cc}
WORK=${2:-$(mktemp -d)}
mkdir -p "$WORK"
# the npm tarball: build.sh's cache (~/.cache/foresight/llama), shared by
# every build folder's run of this test

ok=0
for try in 1 2 3; do
	if bash "$ROOT/integrations/llama.cpp/build.sh" --fetch-only --out "$WORK/llama" >"$WORK/fetch.log" 2>&1; then
		ok=1
		break
	fi
	if ! grep -q "npm pack" "$WORK/fetch.log"; then
		cat "$WORK/fetch.log" >&2
		echo "patch_test: build.sh failed (not the fetch)" >&2
		exit 1
	fi
	sleep $((try * 5))
done
if [ "$ok" != 1 ]; then
	cat "$WORK/fetch.log" >&2
	echo "SKIP: the npm registry could not be reached: llama.cpp's source was not fetched"
	exit 77
fi
cat "$WORK/fetch.log"

src="$WORK/llama/src"
inc=(-I "$src/ggml/include" -I "$ROOT/integrations/llama.cpp/provider" -I "$ROOT/client/include" -I "$ROOT/proto")
# 1. the provider compiles against the patched header
"$CC" -std=gnu11 -Wall -Wextra -Werror -fsyntax-only -DFSL_GGML_CUDA_H "${inc[@]}" \
	"$ROOT/integrations/llama.cpp/provider/fsl_seam.c" || { echo "patch_test: fsl_seam.c against the patched ggml-cuda.h" >&2; exit 1; }
# 2. the two declarations have the same layout
cat >"$WORK/abi.c" <<'C'
#include <stddef.h>
#include "ggml-cuda.h"
#define ggml_backend_cuda_expert_provider fsl_mirror
#undef FSL_GGML_CUDA_H
#include "fsl_seam_iface.h"
#undef ggml_backend_cuda_expert_provider
#define SAME(f) _Static_assert(offsetof(struct ggml_backend_cuda_expert_provider, f) == offsetof(struct fsl_mirror, f), #f)
SAME(ctx);
SAME(claim);
SAME(check);
SAME(begin);
SAME(end);
SAME(route);
_Static_assert(sizeof(struct ggml_backend_cuda_expert_provider) == sizeof(struct fsl_mirror), "size");
int main(void) { return 0; }
C
"$CC" -std=gnu11 -Werror "${inc[@]}" -c "$WORK/abi.c" -o "$WORK/abi.o" || { echo "patch_test: the layouts differ" >&2; exit 1; }
echo "patch_test: both patches apply to 80fb11a; the provider's seam matches the patched ggml-cuda.h"
