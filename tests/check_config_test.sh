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
# Issue 33 added three that passed and then failed the start: an arena
# larger than the machine's RAM (OOM-killed after loading), a --group the
# daemon's user is not in (the socket's chown failed), a socket directory
# it cannot write.
set -euo pipefail
daemon=$1 fixture=$2
# shellcheck source=tests/fs_daemon_lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/fs_daemon_lib.sh"
fs_test_init check_config_test
grp=$(id -gn)
"$fixture" --arch qwen3moe --out "$work/model.gguf" >/dev/null
good=(--socket "$work/s" --group "$grp")
run_as=() # a command to run the checks as another user (setpriv)

expect_ok()
{
	local rc=0
	"${run_as[@]}" "$daemon" --check-config "$@" >"$work/out" 2>&1 || rc=$?
	cat "$work/out"
	[[ $rc -eq 0 ]] || fail "--check-config $* exited $rc, not 0"
}
expect_fail() # WHAT PATTERN ARGS...
{
	local what=$1 pat=$2 rc=0
	shift 2
	"${run_as[@]}" "$daemon" --check-config "$@" >"$work/out" 2>&1 || rc=$?
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
# issue 33: an arena (and host slot pools) larger than this machine's RAM
expect_fail "an arena larger than RAM" "FAIL  host memory: the arena (4194310.577 GB)" \
	--socket "$work/s" --layers 1024 --experts 4096 --expert-bytes 1000000000
grep -q "more than this machine's" "$work/out" || fail "the RAM is not named"
# a group this user is not in, a socket directory it cannot write: as root,
# checked as nobody (root may chown to any group and write anywhere)
notin=root
if [[ $(id -u) == 0 ]]; then
	run_as=(setpriv --reuid=65534 --regid=65534 --clear-groups)
	chmod 0711 "$work"
elif id -nG | tr ' ' '\n' | grep -qx root; then
	notin=
fi
mkdir -m 0755 "$work/ro"
mkdir -m 0777 "$work/rw"
[[ $(id -u) == 0 ]] || chmod 0555 "$work/ro"
if [[ -n $notin ]]; then
	expect_fail "a group this user is not in" "FAIL  group '$notin' (gid [0-9]*): this user (uid [0-9]*) is not in it" \
		--socket "$work/rw/s" --group "$notin"
	grep -q "ok    socket directory of $work/rw/s" "$work/out" || fail "the writable directory was refused"
else
	echo "check_config_test: this user is in group root: the group case is not run"
fi
expect_fail "a socket directory this user cannot write" \
	"FAIL  socket directory $work/ro: this user (uid [0-9]*) cannot create files there" --socket "$work/ro/s"
run_as=()
echo "check_config_test: PASS"
