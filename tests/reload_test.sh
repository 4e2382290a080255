#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
#
# tests/reload_test.sh FORESIGHTD FSCTL TEST_ENGINE: SIGHUP re-reads the
# config file of a real foresightd started with --config FILE and
# --hold-timeout-ms 9000 (a flag, which must keep winning over the file):
#   0. The file unchanged: nothing applied, nothing needs a restart.
#   1. log_level 6: an engine's attach is logged ("attached").
#   2. The file changes log_level (-> 4), liveness_ms, metrics_listen (off ->
#      127.0.0.1:0), hold_timeout_ms (the flag wins: not applied) and slots
#      (restart only); SIGHUP.  The log names the applied keys with old and
#      new values and lists slots as needing a restart; the metrics
#      endpoint now answers; the next engine's attach is counted (fsctl
#      stats) but not logged (level 4 drops info lines in every thread);
#      fsctl stats still says 16 slots.
#   3. A bad value, an unknown key, then broken JSON: each reload is
#      rejected naming the key (or the file), nothing changes: the endpoint
#      still answers on the same port.
#   4. metrics_listen removed: the endpoint stops.  SIGTERM: exit 0.
set -euo pipefail
daemon=$1 fsctl=$2 engine=$3
# shellcheck source=tests/fs_daemon_lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/fs_daemon_lib.sh"
fs_test_init reload_test
fs_need curl "bash tools/install-deps.sh"
sock=$work/control.sock
cfg=$work/foresightd.json
write_cfg()
{
	# $1: extra "key": value lines (with a trailing comma each)
	printf '{\n%s  "socket": "%s",\n  "cards": 1,\n  "layers": 4,\n  "experts": 16,\n  "experts_used": 2\n}\n' \
		"$1" "$sock" >"$cfg"
}
# hup PATTERN: SIGHUP, then wait (5 s at most) for a new log line matching PATTERN
hup()
{
	local before
	before=$(grep -c -- "$1" "$work/log" || true)
	kill -HUP "$pid"
	for _ in $(seq 50); do
		[[ $(grep -c -- "$1" "$work/log" || true) -gt $before ]] && return 0
		sleep 0.1
	done
	fail "no log line '$1' after SIGHUP"
}
jget()
{
	local json
	json=$("$fsctl" --socket "$sock" stats --json) || fail "fsctl stats --json"
	fs_stats_get "$1" "$2" <<<"$json"
}

write_cfg '  "log_level": 6,
  "liveness_ms": 5000,
  "hold_timeout_ms": 10000,
  "slots": 16,
'
"$daemon" --config "$cfg" --hold-timeout-ms 9000 2>"$work/log" &
pid=$!
for _ in $(seq 100); do
	"$fsctl" --socket "$sock" ping >/dev/null 2>&1 && break
	kill -0 "$pid" 2>/dev/null || fail "foresightd exited"
	sleep 0.1
done
"$fsctl" --socket "$sock" ping >/dev/null || fail "foresightd does not answer"

echo "reload_test: 0. SIGHUP with the file unchanged: nothing to apply, nothing to restart"
hup 'no reloadable setting changed'
! grep -q 'only a restart applies' "$work/log" || fail "an unchanged file reported keys needing a restart"

echo "reload_test: 1. log_level 6: attaches are logged"
timeout 60 "$engine" run "$sock" 20 >/dev/null || fail "engine 1"
grep -q 'attached' "$work/log" || fail "the first attach was not logged at log_level 6"
n_attached=$(grep -c 'attached' "$work/log")

echo "reload_test: 2. change reloadable and restart-only keys; SIGHUP"
write_cfg '  "log_level": 4,
  "liveness_ms": 2000,
  "hold_timeout_ms": 3000,
  "metrics_listen": "127.0.0.1:0",
  "slots": 32,
'
hup 'reload: .*applied'
line=$(grep 'reload: .*applied' "$work/log" | tail -1)
echo "  $line"
for want in 'log_level 6 -> 4' 'liveness_ms 5000 -> 2000' 'metrics_listen none -> "127.0.0.1:0"'; do
	grep -qF -- "$want" <<<"$line" || fail "the reload line lacks '$want'"
done
! grep -q 'hold_timeout_ms' <<<"$line" || fail "hold_timeout_ms was applied over the --hold-timeout-ms flag"
restart=$(grep 'only a restart applies' "$work/log" | tail -1)
echo "  $restart"
grep -q 'slots' <<<"$restart" || fail "slots is not reported as needing a restart"
! grep -qE 'liveness_ms|log_level|metrics' <<<"$restart" || fail "a reloadable key is listed as restart-only"
port=$(fs_metrics_port)
[[ -n $port ]] || fail "the metrics endpoint did not start on reload"
curl -sSf -o "$work/metrics.txt" "http://127.0.0.1:$port/metrics" || fail "GET /metrics after the reload"
grep -q '^foresight_attaches_total 1$' "$work/metrics.txt" ||
	fail "the metrics endpoint started by the reload does not serve the counters"
timeout 60 "$engine" run "$sock" 20 >/dev/null || fail "engine 2"
[[ $(jget daemon attaches) == 2 ]] || fail "the second attach was not counted"
[[ $(grep -c 'attached' "$work/log") -eq $n_attached ]] || fail "an info line was logged at log_level 4"
[[ $(jget cards slots) == 16 ]] || fail "slots changed without a restart"
echo "reload_test: applied: log_level (info lines gone), liveness_ms, metrics_listen (port $port); slots needs a restart"

echo "reload_test: 3. invalid files are rejected whole"
write_cfg '  "log_level": 6,
  "liveness_ms": "soon",
  "metrics_listen": "127.0.0.1:0",
'
hup 'rejected'
grep -q "reload: $cfg:[0-9]*:[0-9]*: key 'liveness_ms'" "$work/log" || fail "the bad key is not named (file:line:col)"
write_cfg '  "log_level": 6,
  "heartbeat": 100,
  "metrics_listen": "127.0.0.1:0",
'
hup "key 'heartbeat': unknown"
echo '{"log_level": 6, "slots": ' >"$cfg"
hup "$cfg:2:1: the file ends where a value should be"
[[ $(grep -c 'rejected' "$work/log") -ge 3 ]] || fail "three reloads were not all rejected"
curl -sSf -o /dev/null "http://127.0.0.1:$port/metrics" || fail "the endpoint moved after a rejected reload"
[[ $(grep -c 'attached' "$work/log") -eq $n_attached ]] || fail "log_level changed by a rejected reload"
echo "reload_test: rejected three bad files; the running settings stayed"

echo "reload_test: 4. metrics_listen removed"
write_cfg '  "log_level": 6,
  "slots": 16,
'
hup 'metrics: 127.0.0.1:0 stopped'
if curl -s -o /dev/null "http://127.0.0.1:$port/metrics"; then
	fail "the endpoint still answers after metrics_listen was removed"
fi
kill -TERM "$pid"
rc=0
wait "$pid" || rc=$?
pid=
[[ $rc -eq 0 ]] || fail "foresightd exit status $rc"
echo "reload_test: OK"
