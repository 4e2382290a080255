#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
#
# bench/iso/run.sh: one honest engine beside each attack of issue 33 on the
# shared tier, alone and with five attackers at once; the long runs of
# docs/results/reliability.md ("Sharing one tier").  Host backend, no GPU.
#
#   bash bench/iso/run.sh [--daemon PATH] [--reps N] [--attacks LIST] [--out DIR]
#
#   --daemon PATH  the foresightd to measure (default build/daemon/foresightd):
#                  a build of another commit gives the "before" figures with
#                  the same engines and attackers
#   --reps N       repetitions of the whole set (default 3)
#   --attacks L    comma list (default all but slowctl): future old hold1 hold8 fresh slow
#                  flood, and slowctl
#   --out DIR      where the rows and logs go (default /tmp/fs-iso-bench)
#   --stop-after   SIGTERM the daemon once the attackers are gone (default:
#                  while they still run); the no-read flood's hang in
#                  nng_close (issue 33) came after the flood
#
# Each repetition, for each attack: a fresh daemon (defaults, --backend host)
# and the honest engine alone (fs-demo-engine --windows 3000 --window-us 1000
# --skew 1.2); then a fresh daemon, one attacker, the honest engine beside
# it, SIGTERM to the daemon while the attacker still runs; then the same with
# five attackers.  As root the honest engine runs as uid 65533 and the
# attackers as 65534, both in the daemon's group (nogroup): two users, as the
# per-user budget and bar are meant; otherwise everyone is this user (an
# admin: the bar is then per process or name, and `fresh` gets through).
#
#   future  a hold word naming an epoch 2 past the current one (in no buffer)
#   old     a hold word on the oldest epoch a buffer holds (never acquired)
#   hold1   holds the current epoch and never lets go; re-attaches when revoked
#   hold8   the same with 8 distinct epochs
#   fresh   hold1, each attachment a new process under a new name
#   slow    an honest engine holding each epoch 20 ms (fs-demo-engine
#           --hold-us 20000): never revoked, never wrong
#   flood   20 control connections sending stats requests, never reading
#   slowctl the control for slow: the same engine paced at 20 ms a window
#           but holding its epoch only while it reads (--window-us 20000):
#           what sharing the tier with it costs, its holds aside
#
# Rows (DIR/rows.tsv, one per run): rep attack attackers honest_hit
# solo_hit share attach_ms mismatches stop_ms and the daemon's counters;
# DIR/summary.md: per attack and attacker count, the share of the solo hit
# rate (median, min..max over the repetitions), the slowest attach, wrong
# bytes, the slowest SIGTERM -> exit.  Exit status 1 when a promised row is
# missing (a run that failed to start or left no result).
set -uo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
B=${FS_BUILD:-$ROOT/build}
DAEMON=$B/daemon/foresightd
REPS=3
ATTACKS=future,old,hold1,hold8,fresh,slow,flood
OUT=/tmp/fs-iso-bench
STOP_AFTER=0
while [ $# -gt 0 ]; do
	case "$1" in
	--daemon) DAEMON=$2; shift 2 ;;
	--reps) REPS=$2; shift 2 ;;
	--attacks) ATTACKS=$2; shift 2 ;;
	--out) OUT=$2; shift 2 ;;
	--stop-after) STOP_AFTER=1; shift ;;
	-h | --help) sed -n '4,40p' "${BASH_SOURCE[0]}" | sed 's/^# \{0,1\}//'; exit 0 ;;
	*) echo "run.sh: unknown argument $1" >&2; exit 2 ;;
	esac
done
DEMO=$B/tools/demo/fs-demo-engine
FE=$B/tests/fault/fs-fault-engine
FSCTL=$B/tools/fsctl/fsctl
for x in "$DAEMON" "$DEMO" "$FE" "$FSCTL"; do
	[ -x "$x" ] || { echo "run.sh: $x is not built" >&2; exit 2; }
done
mkdir -p "$OUT"
chmod 0755 "$OUT"
SOCK=$OUT/fs.sock
ROWS=$OUT/rows.tsv
HONEST=(--windows 3000 --window-us 1000 --skew 1.2)

GROUP_ARGS=()
H_UID=() A_UID=()
if [ "$(id -u)" = 0 ] && getent group nogroup >/dev/null; then
	GROUP_ARGS=(--group nogroup --socket-mode 0660)
	H_UID=(setpriv --reuid=65533 --regid=nogroup --clear-groups)
	A_UID=(setpriv --reuid=65534 --regid=nogroup --clear-groups)
else
	echo "run.sh: not root: the engine and the attackers all run as $(id -un), an admin" >&2
fi

now_ms() { date +%s%3N; }

start_daemon() { # LOG
	rm -f "$SOCK" "$SOCK".*
	"$DAEMON" --backend host --socket "$SOCK" "${GROUP_ARGS[@]}" >"$1" 2>&1 &
	DPID=$!
	for _ in $(seq 300); do
		"$FSCTL" --socket "$SOCK" ping >/dev/null 2>&1 && return 0
		kill -0 "$DPID" 2>/dev/null || return 1
		sleep 0.1
	done
	return 1
}

stop_daemon() { # prints ms from SIGTERM to exit (-1: killed at 20 s)
	local t0 t
	t0=$(now_ms)
	kill -TERM "$DPID" 2>/dev/null
	while kill -0 "$DPID" 2>/dev/null; do
		t=$(($(now_ms) - t0))
		if [ $t -gt 20000 ]; then
			kill -9 "$DPID"
			wait "$DPID" 2>/dev/null
			echo -1
			return
		fi
		sleep 0.01
	done
	wait "$DPID" 2>/dev/null
	echo $(($(now_ms) - t0))
}

counter() { # JSON KEY: the daemon counter from a stats --json file
	python3 -c 'import json,sys
try: print(int(json.load(open(sys.argv[1]))["daemon"].get(sys.argv[2], -1)))
except Exception: print(-1)' "$1" "$2"
}

attacker() { # ATTACK I OUTFILE: start attacker I, its pid in APID
	local a=$1 i=$2 o=$3
	case "$a" in
	future) setsid "${A_UID[@]}" "$FE" iso "$SOCK" future-hold seconds=600 >"$o" 2>&1 & ;;
	old) setsid "${A_UID[@]}" "$FE" iso "$SOCK" old-hold seconds=600 >"$o" 2>&1 & ;;
	hold1) setsid "${A_UID[@]}" "$FE" iso "$SOCK" rehold holds=1 seconds=600 >"$o" 2>&1 & ;;
	hold8) setsid "${A_UID[@]}" "$FE" iso "$SOCK" rehold holds=8 seconds=600 >"$o" 2>&1 & ;;
	fresh) setsid "${A_UID[@]}" "$FE" iso "$SOCK" rehold holds=1 fresh=1 seconds=600 >"$o" 2>&1 & ;;
	slow) setsid "${A_UID[@]}" "$DEMO" --socket "$SOCK" --name "slow-$i" --windows 1000000 --hold-us 20000 \
		--skew 1.2 -q >"$o" 2>&1 & ;;
	flood) setsid "${A_UID[@]}" "$FE" iso "$SOCK" no-read seconds=600 conns=20 >"$o" 2>&1 & ;;
	slowctl) setsid "${A_UID[@]}" "$DEMO" --socket "$SOCK" --name "slowctl-$i" --windows 1000000 \
		--window-us 20000 --skew 1.2 -q >"$o" 2>&1 & ;;
	*) echo "run.sh: no attack $a" >&2; exit 2 ;;
	esac
	APID=$!
}
# (a script's background job is no group leader, so setsid execs in place:
# $! is the session's leader, and `kill -- -PID` reaches its children)

honest() { # TAG: runs the honest engine; sets HIT ATTACH MISM (empty: no result)
	local o=$OUT/$1.honest.out
	"${H_UID[@]}" "$DEMO" --socket "$SOCK" --name honest "${HONEST[@]}" -q >"$o" 2>&1
	HIT=$(sed -n 's/.*hit rate: \([0-9.]*\)%.*/\1/p' "$o" | tail -1)
	ATTACH=$(sed -n 's/.*(the first took \([0-9.]*\) ms).*/\1/p' "$o" | tail -1)
	MISM=$(sed -n 's/.*mismatches: \([0-9]*\).*/\1/p' "$o" | tail -1)
}

[ -f "$ROWS" ] || printf 'rep\tattack\tattackers\thonest_hit\tsolo_hit\tshare\tattach_ms\tmismatches\tstop_ms\tover_budget\tbad_holds\tbackoff_refused\tstale\tslow_revoked\tslow_mismatches\tload\n' >"$ROWS"
IFS=, read -r -a LIST <<<"$ATTACKS"
missing=0
for rep in $(seq "$REPS"); do
	for a in "${LIST[@]}"; do
		tag=r$rep-$a
		if ! start_daemon "$OUT/$tag-solo.log"; then
			echo "run.sh: $tag: the daemon did not start" >&2
			missing=$((missing + 1))
			continue
		fi
		honest "$tag-solo"
		solo=$HIT
		stop_daemon >/dev/null
		for n in 1 5; do
			tag=r$rep-$a-x$n
			if ! start_daemon "$OUT/$tag.log"; then
				echo "run.sh: $tag: the daemon did not start" >&2
				missing=$((missing + 1))
				continue
			fi
			pids=()
			for i in $(seq "$n"); do
				attacker "$a" "$i" "$OUT/$tag.att$i.out"
				pids+=("$APID")
				# One user may have 4 attaches waiting for their fd
				# handshake (fsd_clients.c): 100 ms apart.
				sleep 0.1
			done
			sleep 2 # the attack takes hold (slow: its first windows)
			honest "$tag"
			"$FSCTL" --socket "$SOCK" stats --json >"$OUT/$tag.stats.json" 2>/dev/null
			load=$(cut -d' ' -f1 /proc/loadavg)
			[ "$STOP_AFTER" = 1 ] || stop=$(stop_daemon)
			# Each attacker leads a session of its own (setsid): its
			# children (fresh's, flood's pinger) go with it.
			for p in "${pids[@]}"; do kill -TERM -- "-$p" 2>/dev/null; done
			sleep 0.5
			for p in "${pids[@]}"; do
				kill -9 -- "-$p" 2>/dev/null
				wait "$p" 2>/dev/null
			done
			[ "$STOP_AFTER" = 0 ] || stop=$(stop_daemon)
			srev=- smis=-
			if [ "$a" = slow ] || [ "$a" = slowctl ]; then
				srev=$(grep -c "revok\|over its budget" "$OUT/$tag.log")
				smis=$(cat "$OUT/$tag".att*.out | sed -n 's/.*mismatches: \([0-9]*\).*/\1/p' | awk '{s+=$1} END {print s+0}')
			fi
			js=$OUT/$tag.stats.json
			if [ -z "$HIT" ] || [ -z "$solo" ]; then
				echo "run.sh: $tag: no result (see $OUT/$tag.honest.out)" >&2
				missing=$((missing + 1))
				continue
			fi
			share=$(awk -v h="$HIT" -v s="$solo" 'BEGIN {printf "%.3f", (s > 0) ? h / s : 0}')
			printf '%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n' "$rep" "$a" "$n" "$HIT" \
				"$solo" "$share" "$ATTACH" "$MISM" "$stop" "$(counter "$js" over_budget)" \
				"$(counter "$js" bad_holds)" "$(counter "$js" backoff_refused)" \
				"$(counter "$js" stale)" "$srev" "$smis" "$load" | tee -a "$ROWS"
		done
	done
done

python3 - "$ROWS" "$OUT/summary.md" <<'PY'
import csv, statistics, sys
rows = list(csv.DictReader(open(sys.argv[1]), delimiter="\t"))
out = ["| attack | attackers | runs | share of solo hit rate: median (min..max) | honest hit % (solo %) | slowest attach ms | wrong bytes | slowest SIGTERM -> exit ms | over_budget | bad_holds | backoff_refused |",
       "|---|---|---|---|---|---|---|---|---|---|---|"]
keys = []
for r in rows:
    k = (r["attack"], r["attackers"])
    if k not in keys:
        keys.append(k)
for k in keys:
    rs = [r for r in rows if (r["attack"], r["attackers"]) == k]
    sh = [float(r["share"]) for r in rs]
    hit = statistics.median(float(r["honest_hit"]) for r in rs)
    solo = statistics.median(float(r["solo_hit"]) for r in rs)
    att = max(float(r["attach_ms"] or -1) for r in rs)
    mism = sum(int(r["mismatches"] or 0) for r in rs)
    stop = max(int(r["stop_ms"]) if int(r["stop_ms"]) >= 0 else 10**9 for r in rs)
    def c(name):
        return "/".join(r[name] for r in rs)
    out.append(f"| {k[0]} | {k[1]} | {len(rs)} | {100*statistics.median(sh):.0f} % ({100*min(sh):.0f}..{100*max(sh):.0f}) | {hit:.1f} ({solo:.1f}) | {att:.0f} | {mism} | {stop if stop < 10**9 else 'hung'} | {c('over_budget')} | {c('bad_holds')} | {c('backoff_refused')} |")
open(sys.argv[2], "w").write("\n".join(out) + "\n")
print("\n".join(out))
PY
if [ "$missing" -gt 0 ]; then
	echo "run.sh: $missing promised run(s) without a result" >&2
	exit 1
fi
exit 0
