#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
#
# tests/check_config_test.sh FORESIGHTD FIXTURE: foresightd --check-config
# runs the start's checks that hold nothing (issue 21, problem 3;
# daemon/fsd_preflight.c).  Each of these used to print "configuration OK"
# and then stop the start: a group that does not exist, a missing model, a
# truncated GGUF, a socket in a missing directory, a file at the socket
# path, a metrics address in use.  Each must now exit 2 naming the problem;
# a good configuration (with a real GGUF model) exits 0 and lists what it
# did not check.  FIXTURE is fs-gguf-fixture (writes a small GGUF model).
set -euo pipefail
daemon=$1 fixture=$2
# shellcheck source=tests/fs_daemon_lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/fs_daemon_lib.sh"
fs_test_init check_config_test
grp=$(id -gn)
"$fixture" --arch qwen3moe --out "$work/model.gguf" >/dev/null
good=(--socket "$work/s" --group "$grp")

expect_ok()
{
	local rc=0
	"$daemon" --check-config "$@" >"$work/out" 2>&1 || rc=$?
	cat "$work/out"
	[[ $rc -eq 0 ]] || fail "--check-config $* exited $rc, not 0"
}
expect_fail() # WHAT PATTERN ARGS...
{
	local what=$1 pat=$2 rc=0
	shift 2
	"$daemon" --check-config "$@" >"$work/out" 2>&1 || rc=$?
	cat "$work/out"
	[[ $rc -eq 2 ]] || fail "$what: exited $rc, not 2"
	grep -q -- "$pat" "$work/out" || fail "$what: no '$pat' in the output"
}

expect_ok "${good[@]}" --model "$work/model.gguf"
grep -q "ok    model $work/model.gguf: GGUF qwen3moe" "$work/out" || fail "the model check is not reported"
grep -q "not checked" "$work/out" || fail "what was not checked is not said"
[[ -e $work/s || -e $work/s.lock ]] && fail "--check-config left a file behind"

expect_fail "a missing group" "FAIL  group 'no-such-group-fs21' does not exist" \
	--socket "$work/s" --group no-such-group-fs21
expect_fail "a missing model" "FAIL  model $work/none.gguf" "${good[@]}" --model "$work/none.gguf"
size=$(stat -c %s "$work/model.gguf")
head -c $((size / 2)) "$work/model.gguf" >"$work/cut.gguf"
expect_fail "a truncated model" "FAIL  model $work/cut.gguf" "${good[@]}" --model "$work/cut.gguf"
head -c 3 "$work/model.gguf" >"$work/tiny.gguf"
expect_fail "a 3-byte model" "FAIL  model $work/tiny.gguf" "${good[@]}" --model "$work/tiny.gguf"
expect_fail "a missing socket directory" "FAIL  socket directory $work/nodir: No such file" \
	--socket "$work/nodir/s" --group "$grp"
echo data >"$work/file"
expect_fail "a file at the socket path" "FAIL  $work/file exists and is a regular file" \
	--socket "$work/file" --group "$grp"
[[ $(cat "$work/file") == data ]] || fail "--check-config changed the file at the socket path"

# a metrics address in use: hold a port with a listening socket
if command -v python3 >/dev/null; then
	python3 -c 'import socket,sys,time
s=socket.socket(); s.bind(("127.0.0.1",0)); s.listen(); print(s.getsockname()[1], flush=True); time.sleep(30)' \
		>"$work/port" &
	holder=$!
	for _ in $(seq 50); do [[ -s $work/port ]] && break; sleep 0.1; done
	port=$(cat "$work/port")
	expect_fail "a metrics address in use" "FAIL  metrics_listen 127.0.0.1:$port: Address already in use" \
		"${good[@]}" --metrics-listen "127.0.0.1:$port"
	kill "$holder"
fi
echo "check_config_test: PASS"
