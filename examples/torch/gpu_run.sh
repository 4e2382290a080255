#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
#
# examples/torch/gpu_run.sh: the PyTorch engine example on a GPU machine
# (torch + transformers + numpy installed, CUDA, no package registry).
#
#   bash examples/torch/gpu_run.sh [OUTDIR [run.py options]]   (OUTDIR default $OUT or /tmp/fs-torch)
#
# 1. unpacks the .debs brought along in .debs/ (tools/device-debs.sh made
#    them) with tools/device-setup.sh and builds foresightd, fsctl and
#    libforesight-client (Release, build-gpu; the CUDA backend where nvcc is);
# 2. checks torch sees a GPU, then the example's own tests: the torch-free
#    ones and the CPU engine test against a host-backend daemon;
# 3. runs examples/torch/run.py with the CUDA backend daemon: the stock
#    model against the served model at slot budgets 16..320 (two passes
#    each), two engine processes on one daemon, kill -9 + restart of the
#    daemon mid-run, misses computed on the CPU;
# 4. leaves OUTDIR/results.md (the table), results.json, torch-run.log,
#    foresightd.log, model.gguf.  Exit status: run.py's (1 when any served
#    run's tokens differ from the stock model's).
set -euo pipefail
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
cd "$ROOT"
OUTDIR=${1:-${OUT:-/tmp/fs-torch}}
[ $# -gt 0 ] && shift # the rest goes to run.py
mkdir -p "$OUTDIR"
exec > >(tee "$OUTDIR/torch-run.log") 2>&1

echo "== machine"
date -u +%Y-%m-%dT%H:%MZ
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv || true

echo "== dependencies and build"
# shellcheck disable=SC1091
source tools/device-setup.sh /tmp/fsdeps >/dev/null
B=${FS_BUILD_DIR:-build-gpu}
cmake -S . -B "$B" -DCMAKE_BUILD_TYPE=Release >/dev/null
cmake --build "$B" -j"$(nproc)" --target foresightd fsctl foresight-client fs-gguf-dump 2>&1 |
	grep -E "error|warning" || true
test -x "$B/daemon/foresightd" && test -x "$B/tools/fsctl/fsctl"
export FORESIGHT_LIB=$ROOT/$B/client/libforesight-client.so
export FORESIGHTD=$ROOT/$B/daemon/foresightd FSCTL=$ROOT/$B/tools/fsctl/fsctl
export FS_GGUF_DUMP=$ROOT/$B/tools/gguf/fs-gguf-dump
export PYTHONPATH=$ROOT/client/python${PYTHONPATH:+:$PYTHONPATH} PYTHONDONTWRITEBYTECODE=1
PY=${PYTHON:-python3}

echo "== python"
"$PY" - <<'EOF'
import torch, transformers, foresight
print("python", __import__("sys").version.split()[0], "torch", torch.__version__, "cuda", torch.version.cuda,
      "transformers", transformers.__version__, "gpu", torch.cuda.get_device_name(0) if torch.cuda.is_available() else None)
print("libforesight-client", foresight.library_path())
assert torch.cuda.is_available(), "torch sees no GPU"
EOF

echo "== the example's tests (binding, CPU engine on the host backend)"
"$PY" -m unittest discover -s client/python/tests 2>&1 | tail -n 3 || echo "(binding tests FAILED: see above)"
"$PY" -m unittest discover -s examples/torch -p "test_*.py" 2>&1 | tail -n 3 || echo "(example tests FAILED)"

echo "== run.py (CUDA backend)"
rc=0
"$PY" examples/torch/run.py --foresightd "$FORESIGHTD" --fsctl "$FSCTL" --backend cuda --device cuda:0 \
	--out "$OUTDIR" "$@" || rc=$?
echo "results: $OUTDIR/results.md (run.py exit $rc)"
exit $rc
