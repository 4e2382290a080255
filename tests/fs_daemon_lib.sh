# SPDX-License-Identifier: Apache-2.0
# shellcheck shell=bash
#
# tests/fs_daemon_lib.sh: what the shell tests that run a real foresightd
# share (metrics_test.sh, reload_test.sh).  Source it, then:
#   fs_test_init NAME       a work folder in $work, a trap that kills $pid
#                           (set it to the daemon's pid) and removes $work,
#                           and fail MESSAGE (prints NAME: FAIL, the daemon's
#                           log $work/log, exits 1)
#   fs_need CMD HINT        exit 1 naming CMD and HINT when CMD is missing
#   fs_stats_get SEC KEY    a value of `fsctl stats --json` text on stdin
#                           (pretty-printed with tabs; an array section: its
#                           first element)
#   fs_metrics_port         the port of the last "metrics: serving" log line

fs_need()
{
	command -v "$1" >/dev/null || {
		echo "$fs_test_name: $1 not found ($2)" >&2
		exit 1
	}
}

fs_test_init()
{
	fs_test_name=$1
	# tools/test.sh's tsan stage: the TSan build's daemon, this build's tools.
	if [[ -n ${FS_TEST_DAEMON:-} ]]; then
		daemon=$FS_TEST_DAEMON
	fi
	work=$(mktemp -d "${TMPDIR:-/tmp}/fs-$1.XXXXXX")
	pid=
	trap fs_test_cleanup EXIT
}

fs_test_cleanup()
{
	[[ -n $pid ]] && kill -9 "$pid" 2>/dev/null
	rm -rf "$work"
}

fail()
{
	echo "$fs_test_name: FAIL: $*" >&2
	echo "--- foresightd log:" >&2
	cat "$work/log" >&2 || true
	exit 1
}

fs_stats_get()
{
	awk -v sec="$1" -v key="$2" '
		$0 ~ "^\t\"" sec "\":" {on = 1; next}
		on && /^\t[]}]/ {exit}
		on && /^\t\t}/ {exit}
		on && $0 ~ "^\t\t\t?\"" key "\":" {v = $NF; sub(/,$/, "", v); print v; exit}'
}

fs_metrics_port()
{
	# The daemon's shell may not have opened its log yet (it is started
	# in the background): then no port, not a sed error, which under
	# set -e -o pipefail ended the test in its first 0.1 s.
	[[ -e $work/log ]] || return 0
	sed -n 's#.*metrics: serving http://127\.0\.0\.1:\([0-9]*\)/metrics#\1#p' "$work/log" | tail -1
}
