#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
#
# tools/fsctl/top_test.sh FORESIGHTD FSCTL TEST_ENGINE DEMO [SCREEN_OUT]: `fsctl top`
# on real terminals (tmux) against a real daemon with an engine running
# (issue 21, problem 5):
#   - 80x24: every line of the screen within 80 columns, the screen 24 lines,
#     the cards, the engine and the worst layers on it, rates per second;
#   - 200x50: more columns (tlate/s, dev/s) and more layer rows than 80x24;
#   - `?` shows a line of help per column, `?` again the rates, `q` quits
#     and leaves the terminal as it was (the alternate screen);
#   - into a pipe: no escape byte at all;
#   - an engine named "py<ESC>[31mRED" (fs-demo-engine --name, problem 4):
#     `fsctl clients`, `fsctl stats` and `fsctl top` into a pipe show it
#     escaped (py\x1b[31mRED), the tmux screen carries no red, and the
#     daemon's log line has no escape byte.
# SCREEN_OUT: where the captured 80x24 screen is written (README shows it).
# tmux is installed by tools/install-deps.sh; without it the test is
# skipped (exit 77), visibly.
set -euo pipefail
daemon=$1 fsctl=$2 engine=$3 demo=$4 screen_out=${5:-}
# shellcheck source=tests/fs_daemon_lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/../../tests/fs_daemon_lib.sh"
fs_test_init top_test
if ! command -v tmux >/dev/null; then
	echo "top_test: SKIP: tmux not found (bash tools/install-deps.sh installs it)"
	exit 77
fi
sock=$work/control.sock
"$daemon" --socket "$sock" --cards 2 --slots 48 --layers 24 --experts 32 --experts-used 4 2>"$work/log" &
pid=$!
for _ in $(seq 100); do
	"$fsctl" --socket "$sock" ping >/dev/null 2>&1 && break
	kill -0 "$pid" 2>/dev/null || fail "foresightd exited"
	sleep 0.1
done
"$engine" run "$sock" 1000000 2000 >"$work/engine.out" 2>&1 &
epid=$!
export TMUX_TMPDIR=$work
tsock=$work/tmux
cleanup_top()
{
	tmux -S "$tsock" kill-server 2>/dev/null || true
	kill "$epid" 2>/dev/null || true
	fs_test_cleanup
}
trap cleanup_top EXIT

# screen W H: start fsctl top in a W x H tmux window, wait for two frames,
# capture the screen into $work/screen-WxH
screen()
{
	local w=$1 h=$2 f=$work/screen-$1x$2
	tmux -S "$tsock" new-session -d -s "top$w" -x "$w" -y "$h" \
		"$fsctl --socket $sock top --interval 0.3; echo fsctl-exited-\$?; sleep 30"
	# a frame of rates (not the first, since-start one) with the engine's
	# windows moving: on a loaded machine the engine may stall a moment
	for _ in $(seq 100); do
		sleep 0.1
		tmux -S "$tsock" capture-pane -p -t "top$w" >"$f"
		grep -q "over 0\.[0-9]s" "$f" && awk '$2 == "test-run" && $5 + 0 > 0 {ok = 1} END {exit !ok}' "$f" && break
	done
	grep -q "over 0\.[0-9]s" "$f" || fail "${w}x$h: no frame with rates: $(cat "$f")"
}

check_fits()
{
	local w=$1 h=$2 f=$work/screen-$1x$2
	local lines widest
	lines=$(wc -l <"$f")
	widest=$(awk '{ if (length($0) > m) m = length($0) } END { print m + 0 }' "$f")
	echo "top_test: ${w}x$h: $lines lines, widest $widest"
	[[ $lines -le $h ]] || fail "${w}x$h: $lines lines"
	[[ $widest -le $w ]] || fail "${w}x$h: a line of $widest columns"
	grep -q "^host0 " "$f" && grep -q "^host1 " "$f" || fail "${w}x$h: the cards are not on the screen"
	grep -q "test-run" "$f" || fail "${w}x$h: the engine is not on the screen"
	grep -q "WORST LAYERS" "$f" || fail "${w}x$h: no layers"
	grep -q "? help  q quit" "$f" || fail "${w}x$h: no status line"
	# the totals line whole: its rates and the interval at its end (it was
	# cut at "over 0." once miss/s reached five digits)
	grep -qE "^hit [0-9.]+%  ?hits/s [0-9.]+[kMGTPE]?  ?miss/s [0-9.]+[kMGTPE]?  ?copy/s [0-9.]+[kMGTPE]?  ?MB/s [0-9.]+[kMGTPE]?  ?late/s [0-9.]+[kMGTPE]?  ?over [0-9.]+s$" "$f" ||
		fail "${w}x$h: the totals line is not whole: $(grep '^hit ' "$f")"
	# the engine runs: its windows per second are a rate, not a total
	awk '$2 == "test-run" { exit !($5 + 0 > 0) }' "$f" || fail "${w}x$h: the engine's win/s is not positive"
}

screen 80 24
check_fits 80 24
[[ -n $screen_out ]] && cp "$work/screen-80x24" "$screen_out"
cat "$work/screen-80x24"
# ? shows the help, ? again the rates, q quits
tmux -S "$tsock" send-keys -t top80 '?'
sleep 0.5
tmux -S "$tsock" capture-pane -p -t top80 >"$work/help"
grep -q "hits/s    expert uses served from the card's slots, per second" "$work/help" ||
	fail "? shows no column help: $(cat "$work/help")"
tmux -S "$tsock" send-keys -t top80 '?'
sleep 0.5
tmux -S "$tsock" capture-pane -p -t top80 >"$work/back"
grep -q "WORST LAYERS" "$work/back" || fail "? again does not return to the rates"
tmux -S "$tsock" send-keys -t top80 q
sleep 0.5
tmux -S "$tsock" capture-pane -p -t top80 >"$work/quit"
grep -q "fsctl-exited-0" "$work/quit" || fail "q did not quit with 0: $(cat "$work/quit")"
grep -q "WORST LAYERS" "$work/quit" && fail "the screen was not restored after q"

screen 200 50
check_fits 200 50
grep -q "tlate/s" "$work/screen-200x50" && grep -q "dev/s" "$work/screen-200x50" ||
	fail "200x50: no wider columns"
small=$(grep -cE "^ +[0-9]+ +[0-9.-]+ " "$work/screen-80x24" || true)
large=$(grep -cE "^ +[0-9]+ +[0-9.-]+ " "$work/screen-200x50" || true)
[[ $large -gt $small ]] || fail "200x50 shows no more layer rows ($large) than 80x24 ($small)"

# into a pipe: no escape byte
"$fsctl" --socket "$sock" top --count 2 --interval 0.2 >"$work/pipe"
if LC_ALL=C grep -q $'\033' "$work/pipe"; then fail "an escape in piped output"; fi
# 4: a hostile engine name
"$demo" --socket "$sock" --windows 1000000 --name $'py\e[31mRED' >"$work/demo.out" 2>&1 &
dpid=$!
for _ in $(seq 50); do
	"$fsctl" --socket "$sock" clients >"$work/clients" 2>&1 || true
	grep -q 'RED' "$work/clients" && break
	sleep 0.1
done
"$fsctl" --socket "$sock" stats >"$work/stats" 2>&1
"$fsctl" --socket "$sock" top --count 1 >"$work/top1" 2>&1
kill "$dpid" 2>/dev/null || true
for f in clients stats top1 log; do
	if LC_ALL=C grep -q $'\033' "$work/$f"; then fail "an escape byte in $f: $(grep -a RED "$work/$f")"; fi
done
grep -qF 'py\x1b[31mRED' "$work/clients" || fail "fsctl clients does not show the name escaped: $(cat "$work/clients")"
grep -qF 'py\x1b[31mRED' "$work/stats" || fail "fsctl stats does not show the name escaped"
tmux -S "$tsock" capture-pane -e -p -t top200 >"$work/colour"
if grep -q $'\033\[31m' "$work/colour"; then fail "the name painted the terminal red"; fi
echo "top_test: PASS"
