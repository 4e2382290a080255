#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
#
# tools/install-deps.sh: install what foresight needs to build, test and
# lint on Debian 12 (bookworm) or a close relative with apt-get.
#
#   bash tools/install-deps.sh          # install the missing packages
#   bash tools/install-deps.sh --check  # only report; exit 1 if any missing
#   bash tools/install-deps.sh --list   # print the package list
#
# Idempotent and silent when everything is already installed: each package
# is checked with dpkg-query first, and apt-get (update + install
# --no-install-recommends, non-interactive) runs only for the missing ones.
# Uses sudo when not root.  Exits non-zero with a message on any failure.
#
# Machines without a package registry (the lent GPU machines) use
# tools/device-debs.sh + tools/device-setup.sh instead, and run
# tools/test.sh with --no-deps.
set -euo pipefail

PACKAGES=(
	build-essential    # gcc, make, libc headers
	cmake              # >= 3.25
	pkg-config
	libuv1-dev         # daemon event loop
	libnng-dev         # control plane transport
	libcjson-dev       # JSON config / control messages
	libcriterion-dev   # unit tests
	clang              # libFuzzer, alternative sanitizer runtimes
	clang-format       # tools/lint.sh
	cppcheck           # tools/lint.sh
	procps             # ps, pgrep, sysctl (test scripts)
	psmisc             # fuser, pstree (integration test helpers)
	util-linux         # setarch (TSan/ASan on high-entropy ASLR kernels)
	coreutils          # nproc, timeout
	python3            # the Python binding's tests (client/python, stdlib only)
	scdoc              # man pages (docs/man/*.scd)
	curl               # tests: scrape the Prometheus endpoint
	prometheus         # tests: promtool check metrics
	tmux               # tests: fsctl top on an 80x24 and a 200x50 terminal (top_test.sh)
)

die()
{
	echo "install-deps: error: $*" >&2
	exit 1
}

mode=install
case "${1:-}" in
"") ;;
--check) mode=check ;;
--list)
	printf '%s\n' "${PACKAGES[@]}"
	exit 0
	;;
-h | --help)
	sed -n '4,18p' "${BASH_SOURCE[0]}" | sed 's/^# \{0,1\}//'
	exit 0
	;;
*) die "unknown argument '$1' (try --help)" ;;
esac

command -v dpkg-query >/dev/null 2>&1 || die "dpkg-query not found: this script supports Debian/Ubuntu only"

missing=()
for p in "${PACKAGES[@]}"; do
	status=$(dpkg-query -W -f='${Status}' "$p" 2>/dev/null || true)
	[[ "$status" == "install ok installed" ]] || missing+=("$p")
done

[[ ${#missing[@]} -eq 0 ]] && exit 0

if [[ "$mode" == check ]]; then
	echo "install-deps: missing packages: ${missing[*]}" >&2
	exit 1
fi

command -v apt-get >/dev/null 2>&1 || die "apt-get not found; install by hand: ${missing[*]}"

SUDO=()
if [[ $(id -u) -ne 0 ]]; then
	command -v sudo >/dev/null 2>&1 || die "not root and sudo not found; as root run: apt-get install ${missing[*]}"
	SUDO=(sudo -n)
	sudo -n true 2>/dev/null || SUDO=(sudo)
fi

export DEBIAN_FRONTEND=noninteractive
echo "install-deps: installing: ${missing[*]}"
if ! "${SUDO[@]}" apt-get update -qq; then
	die "apt-get update failed (no network or no apt sources?)"
fi
if ! "${SUDO[@]}" apt-get install -y -qq --no-install-recommends "${missing[@]}" </dev/null; then
	die "apt-get install failed for: ${missing[*]}"
fi

# Verify: a package that apt-get could not provide must not pass silently.
still=()
for p in "${missing[@]}"; do
	status=$(dpkg-query -W -f='${Status}' "$p" 2>/dev/null || true)
	[[ "$status" == "install ok installed" ]] || still+=("$p")
done
[[ ${#still[@]} -eq 0 ]] || die "still missing after apt-get install: ${still[*]}"
echo "install-deps: done"
