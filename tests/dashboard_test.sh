#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
#
# tests/dashboard_test.sh FORESIGHTD FSCTL TEST_ENGINE DASHBOARD: the Grafana
# dashboard (docs/grafana/foresight.json) against a real daemon's /metrics
# (issue 21, problem 6): the file is JSON with panels; every foresight_*
# metric its queries name is served (a family a scrape lists, with an
# engine attached so the client series exist; a counter's _total name);
# and the metrics a Prometheus user expects are right:
#   - foresight_arena_bytes and foresight_arena_reused are gauges;
#   - byte counters end in _bytes_total; no foresight_client_pid/uid
#     gauges: foresight_client_info{client,name,pid,uid} 1 instead;
#   - every client series carries name="..." besides the reused client id;
#   - foresight_card_slots{card} is the capacity (the --slots given).
set -euo pipefail
daemon=$1 fsctl=$2 engine=$3 dash=$4
# shellcheck source=tests/fs_daemon_lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/fs_daemon_lib.sh"
fs_test_init dashboard_test
fs_need curl "bash tools/install-deps.sh"
fs_need python3 "bash tools/install-deps.sh"

sock=$work/control.sock
"$daemon" --socket "$sock" --cards 2 --slots 24 --layers 4 --experts 16 --experts-used 2 \
	--metrics-listen 127.0.0.1:0 2>"$work/log" &
pid=$!
port=
for _ in $(seq 100); do
	port=$(fs_metrics_port)
	[[ -n $port ]] && "$fsctl" --socket "$sock" ping >/dev/null 2>&1 && break
	kill -0 "$pid" 2>/dev/null || fail "foresightd exited"
	sleep 0.1
done
[[ -n $port ]] || fail "no metrics port in the log"
"$engine" hold "$sock" >"$work/engine.out" 2>&1 &
epid=$!
trap 'kill $epid 2>/dev/null; fs_test_cleanup' EXIT
for _ in $(seq 50); do
	curl -sSf "http://127.0.0.1:$port/metrics" >"$work/metrics.txt"
	grep -q '^foresight_client_info{' "$work/metrics.txt" && break
	sleep 0.1
done
grep -q '^foresight_client_info{client="[0-9]*",name="[^"]*",pid="[0-9]*",uid="[0-9]*"} 1$' "$work/metrics.txt" ||
	fail "no foresight_client_info{client,name,pid,uid} 1: $(grep client "$work/metrics.txt" | head -5)"

type_of()
{
	awk -v m="$1" '$1 == "#" && $2 == "TYPE" && $3 == m {print $4}' "$work/metrics.txt"
}
[[ $(type_of foresight_arena_bytes) == gauge ]] || fail "foresight_arena_bytes is not a gauge"
[[ $(type_of foresight_arena_reused) == gauge ]] || fail "foresight_arena_reused is not a gauge"
[[ $(type_of foresight_arena_loaded_bytes_total) == counter ]] || fail "no counter foresight_arena_loaded_bytes_total"
[[ $(type_of foresight_card_copied_bytes_total) == counter ]] || fail "no counter foresight_card_copied_bytes_total"
[[ $(type_of foresight_card_slots) == gauge ]] || fail "no capacity gauge foresight_card_slots"
grep -q '^foresight_card_slots{card="1"} 24$' "$work/metrics.txt" || fail "foresight_card_slots is not --slots"
grep -qE '^foresight_client_(pid|uid)' "$work/metrics.txt" && fail "pid/uid are still gauges"
grep -qE '^foresight_arena_load_total|^foresight_client_dev_seen_seconds' "$work/metrics.txt" &&
	fail "an old misleading name is still served"
# no client sample with only the reused row id
if grep -E '^foresight_client_' "$work/metrics.txt" | grep -v 'name="' | grep -q .; then
	fail "client series without a name label: $(grep -E '^foresight_client_' "$work/metrics.txt" | grep -v 'name="' | head -3)"
fi
# byte counters carry _bytes in their name
if grep -E '^# TYPE foresight_.*bytes' "$work/metrics.txt" | grep counter | grep -vq '_bytes_total counter'; then
	fail "a byte counter without _bytes_total"
fi

# the dashboard: every metric it names is served
python3 - "$dash" "$work/metrics.txt" <<'PY'
import json, re, sys
dash = json.load(open(sys.argv[1]))
served = set()
for line in open(sys.argv[2]):
    if line.startswith("# TYPE "):
        served.add(line.split()[2])
panels = dash.get("panels", [])
assert len(panels) >= 8, "only %d panels" % len(panels)
used, missing = set(), []
for p in panels:
    for t in p.get("targets", []):
        for m in re.findall(r"\bforesight_[a-z0-9_]+", t.get("expr", "")):
            used.add(m)
for q in dash.get("templating", {}).get("list", []):
    for m in re.findall(r"\bforesight_[a-z0-9_]+", str(q.get("query", ""))):
        used.add(m)
missing = sorted(m for m in used if m not in served)
if missing:
    sys.exit("dashboard_test: the dashboard names metrics foresightd does not serve: %s" % ", ".join(missing))
need = ["foresight_card_hits_total", "foresight_layer_hits_total", "foresight_card_copied_bytes_total",
        "foresight_card_bus_busy_seconds_total", "foresight_card_late_total", "foresight_client_info"]
lack = [m for m in need if m not in used]
if lack:
    sys.exit("dashboard_test: the dashboard lacks %s" % ", ".join(lack))
print("dashboard_test: %d panels, %d metrics, all served" % (len(panels), len(used)))
PY
echo "dashboard_test: PASS"
