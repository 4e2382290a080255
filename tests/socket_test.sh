#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
#
# tests/socket_test.sh FORESIGHTD FSCTL: who owns the socket paths (issue 21,
# problems 1, 2 and 7; daemon/fsd_sockpath.c):
#   - a second daemon on a served socket exits 1 naming the first one's pid,
#     and the first keeps its socket files and still answers fsctl;
#   - --socket on a regular file, a directory or a symbolic link is refused
#     (exit 1, "is not a socket"), and the file is left as it was;
#   - a socket directory that does not exist is named as such, before the
#     arena is allocated;
#   - a stale socket of a daemon killed with -9 is replaced at the next start;
#   - a clean stop removes the sockets it made and its lock file, nothing else.
set -euo pipefail
daemon=$1 fsctl=$2
# shellcheck source=tests/fs_daemon_lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/fs_daemon_lib.sh"
fs_test_init socket_test
sock=$work/control.sock
small=(--cards 1 --slots 8 --layers 2 --experts 8 --experts-used 2)

wait_up()
{
	for _ in $(seq 100); do
		"$fsctl" --socket "$1" ping >/dev/null 2>&1 && return 0
		kill -0 "$pid" 2>/dev/null || fail "foresightd exited"
		sleep 0.1
	done
	fail "no answer on $1"
}

"$daemon" --socket "$sock" "${small[@]}" 2>"$work/log" &
pid=$!
wait_up "$sock"

# 1. a second daemon on the same socket
rc=0
"$daemon" --socket "$sock" "${small[@]}" 2>"$work/log2" || rc=$?
cat "$work/log2"
[[ $rc -eq 1 ]] || fail "a second daemon exited $rc, not 1"
grep -q "another foresightd (pid $pid) serves" "$work/log2" || fail "the second daemon did not name the first"
grep -q "arena" "$work/log2" && fail "the second daemon allocated an arena before giving up"
[[ -S $sock && -S $sock.fd ]] || fail "the second daemon removed the first one's socket files"
"$fsctl" --socket "$sock" ping >/dev/null || fail "the first daemon no longer answers"

# 7. a socket this user may not use: "permission denied", exit 3 (it said
# "foresightd is not running", exit 1)
rc=0
if [[ $(id -u) -eq 0 ]]; then
	chmod 0600 "$sock"
	setpriv --reuid=65534 --regid=65534 --clear-groups "$fsctl" --socket "$sock" ping >"$work/out" 2>&1 || rc=$?
else
	chmod 0000 "$sock"
	"$fsctl" --socket "$sock" ping >"$work/out" 2>&1 || rc=$?
fi
cat "$work/out"
[[ $rc -eq 3 ]] || fail "fsctl on a socket it may not use exited $rc, not 3"
grep -q "permission denied on $sock" "$work/out" || fail "no 'permission denied' message"
chmod 0660 "$sock"
rc=0
"$fsctl" --socket "$work/none.sock" ping >"$work/out" 2>&1 || rc=$?
[[ $rc -eq 1 ]] && grep -q "not running at $work/none.sock (connect: no socket there)" "$work/out" ||
	fail "fsctl on a missing socket: exit $rc, $(cat "$work/out")"

# a clean stop removes its own sockets and lock
kill -TERM "$pid"
wait "$pid" || fail "foresightd exited $? on SIGTERM"
pid=
for f in "$sock" "$sock.fd" "$sock.lock"; do
	[[ -e $f ]] && fail "$f left after a clean stop"
done

# 2. paths that are not sockets: refused, left alone
echo data >"$work/file"
mkdir "$work/dir"
ln -s "$work/file" "$work/link"
for p in file dir link; do
	rc=0
	"$daemon" --socket "$work/$p" "${small[@]}" 2>"$work/log3" || rc=$?
	cat "$work/log3"
	[[ $rc -eq 1 ]] || fail "--socket on a $p exited $rc, not 1"
	grep -q "is not a socket\|not a socket" "$work/log3" || fail "--socket on a $p: no 'not a socket' message"
	grep -q "Address in use\|arena" "$work/log3" && fail "--socket on a $p: a misleading message or an arena"
done
[[ $(cat "$work/file") == data ]] || fail "the regular file was changed"
[[ -d $work/dir && -L $work/link ]] || fail "the directory or the link was removed"
# the same for the .fd peer
echo data >"$work/peer.sock.fd"
rc=0
"$daemon" --socket "$work/peer.sock" "${small[@]}" 2>"$work/log3" || rc=$?
[[ $rc -eq 1 && $(cat "$work/peer.sock.fd") == data ]] || fail "a regular file at SOCKET.fd was not left alone"
[[ -e $work/peer.sock ]] && fail "a refused start left a socket behind"

# 7. a missing socket directory is named, before the arena
rc=0
"$daemon" --socket "$work/nodir/s" "${small[@]}" 2>"$work/log4" || rc=$?
cat "$work/log4"
[[ $rc -eq 1 ]] || fail "a missing socket directory exited $rc"
grep -q "socket directory $work/nodir: No such file or directory" "$work/log4" || fail "the missing directory not named"
grep -q "arena" "$work/log4" && fail "the arena was allocated before the socket directory was checked"

# a stale socket (kill -9) is replaced
"$daemon" --socket "$sock" "${small[@]}" 2>"$work/log" &
pid=$!
wait_up "$sock"
kill -9 "$pid"
wait "$pid" 2>/dev/null || true
[[ -S $sock ]] || fail "kill -9 left no socket (the next step tests nothing)"
"$daemon" --socket "$sock" "${small[@]}" 2>"$work/log" &
pid=$!
wait_up "$sock"
grep -q "removing $sock, a stale socket" "$work/log" || fail "the stale socket was not reported"
kill -TERM "$pid"
wait "$pid" || fail "foresightd exited $? on SIGTERM"
pid=
echo "socket_test: PASS"
