# SPDX-License-Identifier: Apache-2.0
# shellcheck shell=bash
#
# tools/device-setup.sh: make foresight buildable on a machine WITHOUT a
# package registry (the lent GPU machines: Ubuntu 24.04, glibc 2.39,
# CUDA 13, cmake, gcc) from the .deb files tools/device-debs.sh put in
# .debs/ (git-ignored; carry it to the device with the working tree).
#
#   source tools/device-setup.sh [PREFIX]        # default PREFIX /tmp/fsdeps
#   eval "$(bash tools/device-setup.sh [PREFIX])" # the same, from a script
#
# It runs THERE.  Every .debs/*.deb is unpacked with `dpkg -x` (or ar + tar
# where dpkg is missing) into PREFIX (re-unpacked on every run, so the
# fix-ups below apply exactly once), then the unpacked metadata is made
# relocatable:
#   - *.pc: variables set to /usr... (prefix=, libdir=, includedir=) point
#     into PREFIX; criterion.pc loses Requires.private/Libs.private (its
#     private .pc dependencies are not shipped; we link shared).
#   - cJSON's CMake files hard-code "/usr": rewritten to PREFIX/usr.  nng's
#     compute their prefix relative to the file (rewritten the same way,
#     consistently, so its "/usr move" check still holds).
# and these are exported (PREFIX first, existing values kept after it):
#   PKG_CONFIG_PATH    PREFIX/usr/lib/x86_64-linux-gnu/pkgconfig:PREFIX/usr/share/pkgconfig
#   CMAKE_PREFIX_PATH  PREFIX/usr
#   LD_LIBRARY_PATH    PREFIX/usr/lib/x86_64-linux-gnu (tests load criterion, nng, ...)
# CPATH and LIBRARY_PATH are deliberately NOT set: pkgconf treats their
# directories as system directories and drops the matching -I/-L flags,
# which would hide where a dependency comes from.
# Sourcing prints the export lines too; run as a script it prints only them
# (for eval).  Then: bash tools/test.sh --no-deps --no-lint
#
# Sourced, it never exits the calling shell: errors return 1.

_fsd_main()
{
	local root prefix multiarch lib deb n f
	root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd) || return 1
	prefix=${1:-/tmp/fsdeps}
	case "$prefix" in
	/*) ;;
	*) prefix="$PWD/$prefix" ;;
	esac
	multiarch=x86_64-linux-gnu
	lib="$prefix/usr/lib/$multiarch"

	if ! compgen -G "$root/.debs/*.deb" >/dev/null; then
		echo "device-setup: no .deb files in $root/.debs (run tools/device-debs.sh on the developer machine" \
			"and carry .debs/ along)" >&2
		return 1
	fi
	mkdir -p "$prefix" || return 1

	n=0
	for deb in "$root"/.debs/*.deb; do
		if command -v dpkg >/dev/null 2>&1; then
			dpkg -x "$deb" "$prefix" || {
				echo "device-setup: dpkg -x $deb failed" >&2
				return 1
			}
		else
			# No dpkg: a .deb is an ar archive holding data.tar.{xz,zst,gz}.
			local tmp member
			tmp=$(mktemp -d) || return 1
			(cd "$tmp" && ar x "$deb") || {
				echo "device-setup: ar x $deb failed" >&2
				rm -rf "$tmp"
				return 1
			}
			member=$(find "$tmp" -maxdepth 1 -name "data.tar.*" | head -n 1)
			tar -xf "$member" -C "$prefix" || {
				echo "device-setup: cannot unpack $member of $deb" >&2
				rm -rf "$tmp"
				return 1
			}
			rm -rf "$tmp"
		fi
		n=$((n + 1))
	done

	# pkg-config files: absolute /usr values -> PREFIX/usr.
	for f in "$lib"/pkgconfig/*.pc "$prefix"/usr/share/pkgconfig/*.pc; do
		[[ -f "$f" ]] || continue
		sed -i -E "s#^([A-Za-z_][A-Za-z0-9_.]*)=/usr(/|\$)#\\1=$prefix/usr\\2#" "$f"
		case "$(basename "$f")" in
		criterion.pc) sed -i -E '/^(Requires|Libs)\.private:/d' "$f" ;;
		esac
	done
	# CMake package files: "/usr..." -> "PREFIX/usr...".
	for f in "$lib"/cmake/*/*.cmake; do
		[[ -f "$f" ]] || continue
		sed -i -e "s#\"/usr\"#\"$prefix/usr\"#g" -e "s#\"/usr/#\"$prefix/usr/#g" "$f"
	done

	# Prepend $2 to the :-list in variable $1 unless already present.
	_fsd_prepend()
	{
		local cur=${!1-}
		case ":$cur:" in
		*":$2:"*) ;;
		*) export "$1=$2${cur:+:$cur}" ;;
		esac
	}
	_fsd_prepend PKG_CONFIG_PATH "$prefix/usr/share/pkgconfig"
	_fsd_prepend PKG_CONFIG_PATH "$lib/pkgconfig"
	_fsd_prepend CMAKE_PREFIX_PATH "$prefix/usr"
	_fsd_prepend LD_LIBRARY_PATH "$lib"
	unset -f _fsd_prepend

	echo "device-setup: $n packages unpacked into $prefix" >&2
	local v
	for v in PKG_CONFIG_PATH CMAKE_PREFIX_PATH LD_LIBRARY_PATH; do
		printf 'export %s=%q\n' "$v" "${!v}"
	done
}

if [[ "${BASH_SOURCE[0]}" != "$0" ]]; then
	# sourced: export into the calling shell
	if _fsd_main "$@"; then
		unset -f _fsd_main
	else
		unset -f _fsd_main
		return 1
	fi
else
	# executed: the exports land in this process only; print them for eval
	set -uo pipefail
	_fsd_main "$@" || exit 1
fi
