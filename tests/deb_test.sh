#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
#
# tests/deb_test.sh SRC_DIR BUILD_DIR CMAKE CPACK C_COMPILER: the .deb.
#
# `cpack -G DEB` needs a tree configured with -DCMAKE_INSTALL_PREFIX=/usr (the
# unit's ExecStart and the pkg-config file carry the prefix).  BUILD_DIR is
# used when it is one; otherwise (CI's build/ has the default /usr/local) a
# tree at BUILD_DIR/deb-usr is configured with /usr, no tests and no CUDA
# (-DFS_CUDA=OFF, the host-only build: the package's layout is the same;
# nvcc would triple the time), and built (incrementally on later runs).
# Then:
#   - packaging/deb/cudart.cmake names the CUDA runtime's packages right
#     (NVIDIA's cuda-cudart-X-Y, Debian's libcudart11.0 / libcudart12);
#   - dpkg-deb --info: package foresight, the version, Depends naming
#     libuv1, libnng1 and libcjson1, the example config as a conffile, and
#     the maintainer scripts postinst and postrm (packaging/deb/) only;
#   - the package installs here: each Depends clause has an alternative
#     dpkg knows installed (issue 33: with nvcc from NVIDIA's runfile and
#     no runtime package, the host-only tree must not depend on one);
#   - with CUDA in BUILD_DIR (libforesight-kernels built): its CPack
#     Depends names the CUDA runtime the kernels library links;
#   - dpkg-deb --contents: foresightd, fsctl, the library with its soname
#     links, the header, .pc, CMake package, unit, sysusers/tmpfiles
#     snippets, the example config and the four man pages; nothing under
#     /usr/local;
#   - dpkg -x into a scratch root (no root privileges needed), then the
#     unpacked foresightd --version and --check-config of the unpacked
#     example config, and fsctl --help, with LD_LIBRARY_PATH on the unpacked
#     library directory (ldd must find every library);
#   - the postinst run into that root (DPKG_ROOT) creates the user, group,
#     /run/foresight and /var/lib/foresight; the postrm's purge removes them.
set -euo pipefail
src=$1 build=$2 cmake=$3 cpack=$4 cc=$5
work=$(mktemp -d "${TMPDIR:-/tmp}/fs-deb-test.XXXXXX")
trap 'rm -rf "$work"' EXIT
fail()
{
	echo "deb_test: FAIL: $*" >&2
	exit 1
}

prefix=$(sed -n 's/^CMAKE_INSTALL_PREFIX:PATH=//p' "$build/CMakeCache.txt")
if [[ $prefix != /usr ]]; then
	tree=$build/deb-usr
	echo "deb_test: $build has prefix $prefix: building a /usr tree in $tree"
	"$cmake" -S "$src" -B "$tree" -DCMAKE_INSTALL_PREFIX=/usr -DCMAKE_C_COMPILER="$cc" \
		-DCMAKE_BUILD_TYPE=RelWithDebInfo -DBUILD_TESTING=OFF -DFS_BUILD_TESTS=OFF -DFS_MAN=ON \
		-DFS_CUDA=OFF \
		>"$work/configure.log" 2>&1 || {
		cat "$work/configure.log"
		fail "configure of $tree"
	}
	grep -q "FS_CUDA=OFF: a host-only build" "$work/configure.log" || fail "-DFS_CUDA=OFF did not make a host-only tree"
	"$cmake" --build "$tree" -j "$(nproc 2>/dev/null || echo 2)" >"$work/build.log" 2>&1 || {
		tail -50 "$work/build.log"
		fail "build of $tree"
	}
else
	tree=$build
fi

for v in "11.8 cuda-cudart-11-8 | libcudart11.0" "12.4 cuda-cudart-12-4 | libcudart12"; do
	got=$("$cmake" -DFS_DEB_CUDART_TEST="${v%% *}" -P "$src/packaging/deb/cudart.cmake" 2>&1)
	[[ $got == "${v#* }" ]] || fail "CUDA ${v%% *}: the runtime's Depends is '$got', not '${v#* }'"
done

# A prefix other than /usr is refused (the project config file); checked
# here on the tree we were given when it is not /usr.
if [[ $prefix != /usr ]]; then
	if (cd "$build" && "$cpack" -G DEB -B "$work/refused") >"$work/refused.log" 2>&1; then
		fail "cpack accepted a tree with prefix $prefix"
	fi
	grep -q 'CMAKE_INSTALL_PREFIX=/usr' "$work/refused.log" || {
		cat "$work/refused.log"
		fail "cpack refused the /usr/local tree without saying why"
	}
	echo "deb_test: cpack refuses a tree with prefix $prefix (as it should)"
fi

(cd "$tree" && "$cpack" -G DEB -B "$work/pkg") >"$work/cpack.log" 2>&1 || {
	cat "$work/cpack.log"
	find "$work/pkg" -name 'PreinstallOutput.log' -exec tail -40 {} \;
	fail "cpack -G DEB"
}
mapfile -t debs < <(find "$work/pkg" -maxdepth 1 -name 'foresight_*.deb')
[[ ${#debs[@]} -eq 1 ]] || fail "expected one foresight_*.deb, found: ${debs[*]:-none}"
deb=${debs[0]}
echo "deb_test: $(basename "$deb") ($(stat -c %s "$deb") bytes)"

echo "deb_test: dpkg-deb --info"
dpkg-deb --info "$deb" | tee "$work/info.txt"
version=$(sed -n 's/^project(foresight VERSION \([0-9.]*\).*/\1/p' "$src/CMakeLists.txt")
grep -q '^ Package: foresight$' "$work/info.txt" || fail "package name is not foresight"
grep -q "^ Version: $version\$" "$work/info.txt" || fail "version is not $version"
depends=$(sed -n 's/^ Depends: //p' "$work/info.txt")
for dep in libuv1 libnng1 libcjson1; do
	grep -qE "(^|, )$dep( |,|$)" <<<"$depends" || fail "Depends lacks $dep: $depends"
done
[[ $(dpkg-deb --field "$deb" Architecture) == "$(dpkg --print-architecture)" ]] || fail "architecture"
# Installable here: every clause of Depends has an alternative installed.
IFS=, read -r -a clauses <<<"$depends"
for clause in "${clauses[@]}"; do
	ok=0
	IFS='|' read -r -a alts <<<"$clause"
	for alt in "${alts[@]}"; do
		name=$(awk '{print $1}' <<<"$alt")
		name=${name%%:*}
		dpkg-query -W --showformat='${Status}' "$name" 2>/dev/null | grep -q "install ok installed" && ok=1
	done
	[[ $ok == 1 ]] || fail "Depends clause '$clause' has no alternative installed here: the package would not install"
done
if [[ $tree != "$build" ]]; then
	! grep -q cudart <<<"$depends" || fail "the host-only package depends on the CUDA runtime: $depends"
fi
mkdir -p "$work/control"
dpkg-deb --control "$deb" "$work/control"
grep -qx '/etc/foresight/foresightd.json' "$work/control/conffiles" || fail "the example config is not a conffile"
for s in preinst prerm config; do
	[[ ! -e "$work/control/$s" ]] || fail "unexpected maintainer script $s"
done
for s in postinst postrm; do
	cmp -s "$work/control/$s" "$src/packaging/deb/$s" || fail "maintainer script $s is not packaging/deb/$s"
done
if compgen -G "$build/kernels/libforesight-kernels.so*" >/dev/null; then
	grep -q 'CPACK_DEBIAN_PACKAGE_DEPENDS ".*cuda-cudart-[0-9]*-[0-9]* | libcudart[0-9]*' "$build/CPackConfig.cmake" ||
		fail "libforesight-kernels is built but Depends does not name the CUDA runtime: $(grep DEPENDS "$build/CPackConfig.cmake")"
	echo "deb_test: with CUDA, Depends names the CUDA runtime: $(sed -n 's/.*PACKAGE_DEPENDS "\(.*\)")/\1/p' "$build/CPackConfig.cmake")"
else
	echo "deb_test: no CUDA in $build: the CUDA runtime's Depends is not checked here"
fi

echo "deb_test: dpkg-deb --contents"
dpkg-deb --contents "$deb" | awk '{print $6 ($7 ? " " $7 " " $8 : "")}' | sed 's#^\./#/#' >"$work/contents.txt"
cat "$work/contents.txt"
ma=$(dpkg-architecture -qDEB_HOST_MULTIARCH 2>/dev/null || gcc -print-multiarch)
libdir=/usr/lib/$ma
want=(
	/usr/sbin/foresightd
	/usr/bin/fsctl
	"$libdir/libforesight-client.so.$version"
	"$libdir/libforesight-client.so.0 -> libforesight-client.so.$version"
	"$libdir/libforesight-client.so -> libforesight-client.so.0"
	"$libdir/libforesight-client.a"
	/usr/include/foresight/foresight.h
	"$libdir/pkgconfig/foresight-client.pc"
	"$libdir/cmake/foresight-client/foresight-clientConfig.cmake"
	"$libdir/cmake/foresight-client/foresight-clientConfigVersion.cmake"
	"$libdir/cmake/foresight-client/foresight-clientTargets.cmake"
	/usr/lib/systemd/system/foresightd.service
	/usr/lib/sysusers.d/foresight.conf
	/usr/lib/tmpfiles.d/foresight.conf
	/etc/foresight/foresightd.json
	/usr/share/man/man8/foresightd.8.gz
	/usr/share/man/man1/fsctl.1.gz
	/usr/share/man/man3/libforesight-client.3.gz
	/usr/share/man/man5/foresightd.json.5.gz
)
for f in "${want[@]}"; do
	grep -qxF -- "$f" "$work/contents.txt" || fail "the package lacks $f"
done
! grep -q '^/usr/local' "$work/contents.txt" || fail "files under /usr/local"
if [[ $tree != "$build" ]]; then
	! grep -q libforesight-kernels "$work/contents.txt" || fail "the host-only package has the CUDA kernels library"
fi

echo "deb_test: dpkg -x into a scratch root"
root=$work/root
dpkg -x "$deb" "$root"
grep -qx "ExecStart=/usr/sbin/foresightd --config /etc/foresight/foresightd.json" \
	"$root/usr/lib/systemd/system/foresightd.service" || fail "the unit's ExecStart"
grep -qx 'prefix=/usr' "$root$libdir/pkgconfig/foresight-client.pc" ||
	grep -q "libdir=$libdir" "$root$libdir/pkgconfig/foresight-client.pc" || fail "the .pc file's paths"
soname=$(objdump -p "$root$libdir/libforesight-client.so.$version" | awk '/SONAME/ {print $2}')
[[ $soname == libforesight-client.so.0 ]] || fail "soname $soname"
export LD_LIBRARY_PATH=$root$libdir
for b in "$root/usr/sbin/foresightd" "$root/usr/bin/fsctl"; do
	deps=$(ldd "$b")
	! grep -q 'not found' <<<"$deps" || fail "$(basename "$b"): a library is not found: $deps"
done
out=$("$root/usr/sbin/foresightd" --version)
echo "  $out"
[[ $out == "foresightd $version "* ]] || fail "foresightd --version: $out"
# The example names the group foresight and /run/foresight, which only an
# installed package creates: the user's group and a scratch socket stand in.
"$root/usr/sbin/foresightd" --check-config "$root/etc/foresight/foresightd.json" --group "$(id -gn)" \
	--socket "$root/check.sock"
"$root/usr/bin/fsctl" --help >/dev/null

echo "deb_test: the maintainer scripts into the scratch root"
DPKG_ROOT=$root sh "$work/control/postinst" configure || fail "postinst configure"
grep -q '^foresight:' "$root/etc/passwd" && grep -q '^foresight:' "$root/etc/group" ||
	fail "postinst did not create the user and group foresight"
[[ -d $root/run/foresight && -d $root/var/lib/foresight ]] || fail "postinst did not create the directories"
DPKG_ROOT=$root sh "$work/control/postrm" purge || fail "postrm purge"
grep -q '^foresight:' "$root/etc/passwd" "$root/etc/group" && fail "purge left the user or group foresight"
[[ -e $root/run/foresight || -e $root/var/lib/foresight ]] && fail "purge left the directories"
page=$(zcat "$root/usr/share/man/man8/foresightd.8.gz")
grep -q '^\.TH' <<<"$page" || fail "foresightd.8.gz is not a man page"
echo "deb_test: OK"
