#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
#
# tools/device-debs.sh: fetch the .deb files of foresight's build/test
# dependencies for a machine WITHOUT a package registry (the lent GPU
# machines: Ubuntu 24.04, glibc 2.39, CUDA 13, cmake, gcc).
#
#   bash tools/device-debs.sh [--refresh] [EXTRA_PACKAGE...]
#
# Runs HERE, on a Debian 12 developer machine with apt: `apt-get download`s
# the packages below (plus any given as arguments) into .debs/ at the repo
# root (git-ignored).  Idempotent: a package with a valid .deb in .debs/
# is skipped (no apt query); --refresh re-downloads every package whose
# candidate version changed (security updates).  Each new file is checked
# with dpkg-deb.  The Debian 12 (glibc 2.36) binaries run on
# the newer glibc of the device.
#
# The packages: the libraries and headers foresight builds against (libuv,
# nng, cJSON, criterion) and the shared libraries they need at run time
# that a stock Ubuntu 24.04 may lack (mbedtls for nng; libgit2, nanomsg,
# http-parser, libssh2 for criterion).
#
# Then, on the device (see tools/device-setup.sh):
#   source tools/device-setup.sh            # unpacks into /tmp/fsdeps
#   bash tools/test.sh --no-deps --no-lint
set -euo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
DEBS="$ROOT/.debs"

PACKAGES=(
	libuv1 libuv1-dev
	libnng1 libnng-dev
	libcjson1 libcjson-dev
	libcriterion3 libcriterion-dev
	# run-time dependencies of nng and criterion
	libmbedtls14 libmbedx509-1 libmbedcrypto7
	libnanomsg5 libgit2-1.5 libhttp-parser2.9 libssh2-1
)
refresh=0
if [[ "${1:-}" == --refresh ]]; then
	refresh=1
	shift
fi
PACKAGES+=("$@")

die()
{
	echo "device-debs: error: $*" >&2
	exit 1
}

command -v apt-get >/dev/null 2>&1 || die "apt-get not found (run this on the Debian developer machine)"
command -v dpkg-deb >/dev/null 2>&1 || die "dpkg-deb not found"
mkdir -p "$DEBS"
cd "$DEBS"

arch=$(dpkg --print-architecture)
updated=0

# candidate PKG: the version apt would download (empty when unknown).
candidate()
{
	apt-cache policy "$1" 2>/dev/null | sed -n 's/^ *Candidate: *//p' | grep -v '(none)' || true
}

fetched=0
for p in "${PACKAGES[@]}"; do
	if [[ $refresh -eq 0 ]]; then
		have=0
		for f in "${p}"_*.deb; do
			[[ -f "$f" ]] && dpkg-deb --info "$f" >/dev/null 2>&1 && have=1
		done
		[[ $have -eq 1 ]] && continue
	fi
	ver=$(candidate "$p")
	if [[ -z "$ver" && $updated -eq 0 ]]; then
		echo "device-debs: '$p' unknown to apt, running apt-get update"
		apt-get update -qq || die "apt-get update failed"
		updated=1
		ver=$(candidate "$p")
	fi
	[[ -n "$ver" ]] || die "no candidate version for package '$p'"
	# apt-get download encodes the epoch colon as %3a.
	pkg_arch=$(apt-cache show --no-all-versions "$p" 2>/dev/null | sed -n 's/^Architecture: *//p' | head -n 1)
	file="${p}_${ver//:/%3a}_${pkg_arch:-$arch}.deb"
	if [[ -f "$file" ]] && dpkg-deb --info "$file" >/dev/null 2>&1; then
		continue
	fi
	# Another version of the same package: replace it.
	for old in "${p}"_*.deb; do
		[[ -e "$old" && "$old" != "$file" ]] && rm -f -- "$old"
	done
	echo "device-debs: downloading $p $ver"
	# apt-get warns about the unsandboxed download when run as root: harmless.
	apt-get download -qq "$p=$ver" 2> >(grep -v 'unsandboxed as root' >&2) ||
		die "apt-get download $p=$ver failed"
	[[ -f "$file" ]] || die "expected $DEBS/$file after downloading $p"
	dpkg-deb --info "$file" >/dev/null || die "$file is not a valid .deb"
	fetched=$((fetched + 1))
done

total=$(find . -maxdepth 1 -name '*.deb' | wc -l)
echo "device-debs: $fetched downloaded, $total .deb files in $DEBS ($(du -sh . | cut -f1))"
