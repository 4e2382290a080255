#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
#
# tools/demo.sh: THE main job of foresight on a machine without a GPU.
#
#   bash tools/demo.sh [--windows N] [--no-deps]
#
# Installs what is missing (tools/install-deps.sh), builds, starts foresightd
# on the host backend (two stand-in cards in host memory, a 13.5 GB/s bus
# each) on a private socket, runs two fs-demo-engine processes against the
# one expert tier while `fsctl stats` refreshes every second, then stops
# everything with `fsctl shutdown`.  Each engine verifies every expert it
# reads (slot or arena) against the arena checksum and ends with
# "verified reads: N mismatches: 0".  Exits non-zero if anything fails.
set -euo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$ROOT"

windows=1500
deps=1
while [ $# -gt 0 ]; do
	case "$1" in
	--windows) windows=$2; shift ;;
	--no-deps) deps=0 ;;
	-h | --help) sed -n '4,16p' "${BASH_SOURCE[0]}" | sed 's/^# \{0,1\}//'; exit 0 ;;
	*) echo "demo.sh: unknown argument '$1' (try --help)" >&2; exit 2 ;;
	esac
	shift
done

[ "$deps" = 1 ] && bash tools/install-deps.sh
B=${FS_BUILD_DIR:-build}
cmake -S . -B "$B" >/dev/null
cmake --build "$B" -j"$(nproc)" --target foresightd fsctl fs-demo-engine >/dev/null

RUN=$(mktemp -d /tmp/foresight-demo-XXXXXX)
SOCK=$RUN/control.sock
FSCTL=("$B/tools/fsctl/fsctl" --socket "$SOCK")
daemon_pid=
cleanup()
{
	[ -n "$daemon_pid" ] && kill "$daemon_pid" 2>/dev/null && wait "$daemon_pid" 2>/dev/null
	rm -rf "$RUN"
}
trap cleanup EXIT

echo "== foresightd (host backend) on $SOCK"
"$B/daemon/foresightd" --backend host --socket "$SOCK" 2>"$RUN/foresightd.log" &
daemon_pid=$!
for _ in $(seq 100); do "${FSCTL[@]}" ping >/dev/null 2>&1 && break; sleep 0.1; done
"${FSCTL[@]}" ping

echo "== two engines on one expert tier ($windows windows each)"
"$B/tools/demo/fs-demo-engine" --socket "$SOCK" --windows "$windows" --window-us 2000 --name engine-a \
	--seed 1 --quiet >"$RUN/a.out" 2>&1 &
a=$!
"$B/tools/demo/fs-demo-engine" --socket "$SOCK" --windows "$windows" --window-us 2000 --name engine-b \
	--seed 2 --quiet >"$RUN/b.out" 2>&1 &
b=$!

# Live stats while they run (the same view `fsctl stats --watch` gives).
while kill -0 "$a" 2>/dev/null || kill -0 "$b" 2>/dev/null; do
	printf '\n---- %s ----\n' "$(date +%T)"
	"${FSCTL[@]}" stats --layers 4 || true
	sleep 1
done
rc=0
wait "$a" || rc=1
wait "$b" || rc=1

echo
echo "== final stats"
"${FSCTL[@]}" stats --layers 4
echo
echo "== engine-a"; tail -n 3 "$RUN/a.out"
echo "== engine-b"; tail -n 3 "$RUN/b.out"
"${FSCTL[@]}" shutdown
wait "$daemon_pid" || rc=1
daemon_pid=
echo "== foresightd log"; cat "$RUN/foresightd.log"
grep -q "mismatches: 0" "$RUN/a.out" && grep -q "mismatches: 0" "$RUN/b.out" || rc=1
[ "$rc" = 0 ] && echo "demo: OK" || echo "demo: FAILED" >&2
exit "$rc"
