#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
#
# tests/metrics_test.sh FORESIGHTD FSCTL TEST_ENGINE: the Prometheus endpoint
# of a real foresightd (metrics_listen 127.0.0.1:0, the port from its log):
#   - an engine runs, then GET /metrics: 200, Content-Type text/plain
#     version=0.0.4, and `promtool check metrics` passes it (CI installs
#     promtool with tools/install-deps.sh; without it that one check is
#     skipped with a SKIP line, which tools/test.sh lists);
#   - counters agree with `fsctl stats --json` (daemon windows, attaches,
#     records; card 0 hits and misses; layer 0 hits), read while nothing
#     moves;
#   - every counter of the stats reply's daemon section has its sample;
#   - hostile requests: POST (405), another path (404), a GET with a body
#     (400), a 1 MiB header (refused or dropped): the daemon still serves;
#   - a non-loopback metrics_listen is refused without metrics_allow_remote;
#   - SIGTERM: exit 0, the endpoint stopped.
set -euo pipefail
daemon=$1 fsctl=$2 engine=$3
# shellcheck source=tests/fs_daemon_lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/fs_daemon_lib.sh"
fs_test_init metrics_test
fs_need curl "bash tools/install-deps.sh"

sock=$work/control.sock
"$daemon" --socket "$sock" --cards 2 --slots 16 --layers 4 --experts 16 --experts-used 2 \
	--metrics-listen 127.0.0.1:0 2>"$work/log" &
pid=$!
port=
for _ in $(seq 100); do
	port=$(fs_metrics_port)
	[[ -n $port ]] && "$fsctl" --socket "$sock" ping >/dev/null 2>&1 && break
	kill -0 "$pid" 2>/dev/null || fail "foresightd exited"
	sleep 0.1
done
[[ -n $port ]] || fail "no 'metrics: serving' line in the log"
url=http://127.0.0.1:$port/metrics
echo "metrics_test: $url"

timeout 60 "$engine" run "$sock" 200 >"$work/engine.out" || fail "the test engine failed: $(cat "$work/engine.out")"
cat "$work/engine.out"

# stats JSON (fsctl --json pretty-prints with tabs): SECTION KEY [the
# section is an array: its first element]
jget()
{
	fs_stats_get "$1" "$2" <"$work/stats.json"
}
prom()
{
	awk -v m="$1" '$1 == m {print $2; exit}' "$work/metrics.txt"
}

pairs=(
	"daemon windows foresight_windows_total"
	"daemon attaches foresight_attaches_total"
	"daemon records foresight_records_total"
	"cards hits foresight_card_hits_total{card=\"0\"}"
	"cards misses foresight_card_misses_total{card=\"0\"}"
	"layers hits foresight_layer_hits_total{layer=\"0\"}"
)
ok=0
for _ in $(seq 20); do
	curl -sS -D "$work/headers" -o "$work/metrics.txt" "$url" || fail "GET $url"
	"$fsctl" --socket "$sock" stats --json >"$work/stats.json" || fail "fsctl stats --json"
	curl -sS -o "$work/metrics2.txt" "$url" || fail "GET $url"
	if cmp -s <(grep -v -e uptime -e hot_wakeups "$work/metrics.txt") \
		<(grep -v -e uptime -e hot_wakeups "$work/metrics2.txt"); then
		ok=1
		break
	fi
	sleep 0.2 # still moving (copies landing): read again
done
[[ $ok -eq 1 ]] || fail "the counters never stood still"
grep -qi '^HTTP/1.1 200' "$work/headers" || fail "status: $(head -1 "$work/headers")"
grep -qi '^Content-Type: text/plain; version=0.0.4' "$work/headers" || fail "Content-Type: $(cat "$work/headers")"

if command -v promtool >/dev/null; then
	echo "metrics_test: promtool check metrics ($(wc -l <"$work/metrics.txt") lines)"
	promtool check metrics <"$work/metrics.txt" || fail "promtool check metrics"
else
	echo "SKIP: metrics_test: promtool check metrics: promtool not found (Debian package prometheus; bash tools/install-deps.sh)"
fi

for p in "${pairs[@]}"; do
	read -r sec key metric <<<"$p"
	j=$(jget "$sec" "$key")
	m=$(prom "$metric")
	echo "  stats $sec.$key = ${j:-?}, $metric = ${m:-?}"
	[[ -n $j && -n $m && $j == "$m" ]] || fail "$metric ($m) != fsctl stats $sec.$key ($j)"
done
[[ $(prom foresight_windows_total) -ge 200 ]] || fail "the engine's 200 windows are not counted"
[[ $(prom foresight_attaches_total) -ge 1 ]] || fail "no attach counted"

# Every daemon counter of the stats reply (the same X-macro list) is exposed.
mapfile -t dkeys < <(awk '/^\t"daemon":/ {on = 1; next} on && /^\t}/ {exit} on {k = $1; gsub(/[":]/, "", k); print k}' "$work/stats.json")
[[ ${#dkeys[@]} -ge 10 ]] || fail "stats --json daemon section: ${#dkeys[*]} keys"
for k in "${dkeys[@]}"; do
	grep -qE "^foresight_${k%_ns}(_seconds)?(_total)? " "$work/metrics.txt" ||
		grep -qE "^foresight_${k} " "$work/metrics.txt" || fail "no sample for the daemon counter $k"
done
echo "metrics_test: all ${#dkeys[@]} daemon counters exposed; values agree with fsctl stats --json"

code()
{
	curl -s -o /dev/null -w '%{http_code}' "$@" || true
}
[[ $(code -X POST "$url") == 405 ]] || fail "POST /metrics is not 405"
[[ $(code "http://127.0.0.1:$port/") == 404 ]] || fail "GET / is not 404"
[[ $(code "http://127.0.0.1:$port/metrics/x") == 404 ]] || fail "GET /metrics/x is not 404"
[[ $(code -X GET --data-binary 'x=1' "$url") == 400 ]] || fail "GET with a body is not 400"
# (from a file: one argument cannot be 1 MiB)
{
	printf 'X-Big: '
	head -c 1048576 /dev/zero | tr '\0' a
	echo
} >"$work/big.hdr"
c=$(curl -s -o /dev/null -w '%{http_code}' -H "@$work/big.hdr" "$url" 2>/dev/null || true)
[[ $c == 000 || $c == 4* ]] || fail "a 1 MiB header was answered '$c' (want a 4xx or a closed connection)"
echo "metrics_test: hostile requests refused (POST 405, other paths 404, a body 400, a 1 MiB header: $c)"
kill -0 "$pid" || fail "foresightd died"
[[ $(code "$url") == 200 ]] || fail "no longer serving after the hostile requests"

if "$daemon" --check-config --socket "$work/check.sock" --metrics-listen 0.0.0.0:0 >"$work/remote.log" 2>&1; then
	fail "a non-loopback metrics_listen was accepted without metrics_allow_remote"
fi
grep -q -- "--metrics-listen: " "$work/remote.log" || fail "the refusal does not name --metrics-listen: $(cat "$work/remote.log")"
"$daemon" --check-config --socket "$work/check.sock" --metrics-listen 0.0.0.0:0 --metrics-allow-remote >/dev/null ||
	fail "metrics_allow_remote does not allow 0.0.0.0"

kill -TERM "$pid"
rc=0
wait "$pid" || rc=$?
pid=
[[ $rc -eq 0 ]] || fail "foresightd exit status $rc"
grep -q 'metrics: 127.0.0.1:0 stopped' "$work/log" || fail "no 'metrics: ... stopped' line"
echo "metrics_test: OK"
