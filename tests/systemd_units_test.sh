#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
#
# tests/systemd_units_test.sh SRC_DIR FORESIGHTD: checks systemd/ offline
# (no systemd as PID 1 needed):
#   - systemd-analyze verify on foresightd.service (ExecStart pointed at the
#     built foresightd, the config at the example: verify wants them to exist)
#   - foresightd --check-config on the example config
#   - foresightd's sd_notify messages (READY, WATCHDOG, STOPPING), with python3
#   - systemd-sysusers and (as root) systemd-tmpfiles --create on the
#     snippets, into a scratch --root
#   - `systemd-analyze security --offline=true --threshold=20`: the unit's
#     exposure must be <= 2.0 (a failing or unparsable run fails the test)
# Without systemd-analyze it exits 77 (ctest: skipped) with a SKIP line.
set -euo pipefail
src=$1 daemon=$2
if ! command -v systemd-analyze >/dev/null; then
	echo "SKIP: systemd-analyze not found (Debian package systemd; bash tools/install-deps.sh)"
	exit 77
fi
work=$(mktemp -d "${TMPDIR:-/tmp}/fs-units-test.XXXXXX")
trap 'rm -rf "$work"' EXIT

unit=$work/foresightd.service
sed -e "s#/usr/sbin/foresightd#$daemon#" -e "s#/etc/foresight/foresightd.json#$src/systemd/foresightd.json#" \
	"$src/systemd/foresightd.service" >"$unit"
grep -q "^ExecStart=$daemon --config $src/systemd/foresightd.json\$" "$unit"

echo "units_test: systemd-analyze verify ($(systemd-analyze --version | head -1))"
(cd "$work" && systemd-analyze verify --man=no ./foresightd.service)

echo "units_test: foresightd --check-config"
# The group and socket directory of the example exist only where the package
# is installed: the user's group and a scratch socket stand in.
"$daemon" --check-config "$src/systemd/foresightd.json" --group "$(id -gn)" --socket "$work/check.sock"

echo "units_test: systemd-sysusers --root"
mkdir -p "$work/root/etc"
systemd-sysusers --root="$work/root" "$src/systemd/foresight.sysusers.conf"
grep -q '^foresight:' "$work/root/etc/passwd"
grep -q '^foresight:' "$work/root/etc/group"
if [[ $(id -u) -eq 0 ]]; then
	echo "units_test: systemd-tmpfiles --root --create"
	systemd-tmpfiles --root="$work/root" --create "$src/systemd/foresight.tmpfiles.conf"
	[[ -d "$work/root/run/foresight" && -d "$work/root/var/lib/foresight" ]]
else
	echo "units_test: systemd-tmpfiles skipped (needs root to chown)"
fi

# foresightd itself under a fake $NOTIFY_SOCKET: the watchdog stretched while
# loading, READY=1 (restoring it), WATCHDOG=1 at half of $WATCHDOG_USEC,
# STOPPING=1 on SIGTERM, exit 0.
if command -v python3 >/dev/null; then
	echo "units_test: sd_notify from foresightd (python3 listener)"
	python3 - "$daemon" "$work" <<'PY'
import os, signal, socket, subprocess, sys, time
daemon, work = sys.argv[1], sys.argv[2]
s = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
s.bind(work + "/notify")
s.settimeout(10)
env = dict(os.environ, NOTIFY_SOCKET=work + "/notify", WATCHDOG_USEC="400000")
env.pop("WATCHDOG_PID", None)
p = subprocess.Popen([daemon, "--socket", work + "/control.sock", "--cards", "1", "--slots", "16",
                      "--layers", "2", "--experts", "8", "--experts-used", "2"], env=env)
msgs = []
while not any(m.startswith("READY=1") for m in msgs):
    msgs.append(s.recv(1024).decode())
t0 = time.monotonic()
while sum(m == "WATCHDOG=1" for m in msgs) < 3:
    msgs.append(s.recv(1024).decode())
took = time.monotonic() - t0
p.send_signal(signal.SIGTERM)
while not msgs[-1].startswith("STOPPING=1"):
    msgs.append(s.recv(1024).decode())
rc = p.wait(timeout=30)
print("  ", msgs)
assert rc == 0, f"foresightd exit {rc}"
assert "WATCHDOG_USEC=900000000" in msgs[0], "the watchdog is not stretched while loading"
ready = next(m for m in msgs if m.startswith("READY=1"))
assert "WATCHDOG_USEC=400000" in ready.split("\n"), "READY does not restore WATCHDOG_USEC"
assert 0.2 < took < 3.0, f"3 watchdog pings took {took:.2f} s (period 0.2 s)"
PY
else
	echo "units_test: no python3: the sd_notify check of foresightd is skipped"
fi

# --threshold is the exposure x 10: the command itself fails above 2.0, and
# the parsed figure is checked too (a format change must not pass silently).
echo "units_test: systemd-analyze security --offline=true --threshold=20"
rc=0
(cd "$work" && systemd-analyze security --offline=true --threshold=20 --no-pager ./foresightd.service) \
	>"$work/security.txt" 2>&1 || rc=$?
grep -v '^✓' "$work/security.txt" || true
exposure=$(sed -n 's/.*Overall exposure level for [^:]*: \([0-9.]*\).*/\1/p' "$work/security.txt")
[[ -n $exposure ]] || {
	echo "units_test: FAIL: no exposure figure in the systemd-analyze security output (exit $rc)" >&2
	exit 1
}
echo "units_test: foresightd.service exposure $exposure (must be <= 2.0)"
[[ $rc -eq 0 ]] || {
	echo "units_test: FAIL: systemd-analyze security exit $rc (exposure $exposure above 2.0, or an error)" >&2
	exit 1
}
awk -v e="$exposure" 'BEGIN { exit !(e <= 2.0) }' || {
	echo "units_test: FAIL: exposure $exposure > 2.0" >&2
	exit 1
}
echo "units_test: OK"
