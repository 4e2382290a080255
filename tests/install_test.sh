#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
#
# tests/install_test.sh BUILD_DIR PREFIX CC CMAKE: `cmake --install` into a
# scratch DESTDIR, then build a tiny external engine against the installed
# tree through pkg-config and through find_package(foresight-client), and
# run it (fs_client_open on a socket that does not exist must fail cleanly).
set -euo pipefail
build=$1 prefix=$2 cc=$3 cmake=$4
work=$(mktemp -d "${TMPDIR:-/tmp}/fs-install-test.XXXXXX")
trap 'rm -rf "$work"' EXIT
root=$work/root

DESTDIR=$root "$cmake" --install "$build" >"$work/install.log"
for f in sbin/foresightd bin/fsctl bin/fs-demo-engine include/foresight/foresight.h \
	lib/libforesight-client.a lib/pkgconfig/foresight-client.pc \
	lib/cmake/foresight-client/foresight-clientConfig.cmake \
	lib/systemd/system/foresightd.service lib/sysusers.d/foresight.conf lib/tmpfiles.d/foresight.conf; do
	# libdir may be lib/<multiarch> or lib64: look the library files up
	if [[ ! -e "$root$prefix/$f" ]] && ! find "$root$prefix" -path "*/${f#lib/}" | grep -q .; then
		echo "install_test: missing $prefix/$f" >&2
		exit 1
	fi
done
so=$(find "$root$prefix" -name 'libforesight-client.so.*.*' | head -1)
soname=$(objdump -p "$so" | awk '/SONAME/ {print $2}')
echo "install_test: $(basename "$so"), SONAME $soname"
[[ $soname == libforesight-client.so.0 ]]
libdir=$(dirname "$so")

mkdir -p "$work/src"
cat >"$work/src/engine.c" <<'C'
#include <foresight/foresight.h>
#include <stdio.h>
int main(void)
{
	struct fs_client_opts o = {.socket_path = "/nonexistent/foresight/control.sock", .name = "ext"};
	fs_client *c = NULL;
	int r = fs_client_open(&c, &o);
	printf("fs_client_open: %d (%s)\n", r, fs_strerror(r));
	return r < 0 && c == NULL ? 0 : 1;
}
C
cat >"$work/src/CMakeLists.txt" <<'CM'
cmake_minimum_required(VERSION 3.25)
project(ext_engine LANGUAGES C)
find_package(foresight-client 0.1 REQUIRED)
add_executable(engine engine.c)
target_link_libraries(engine PRIVATE foresight::client)
add_executable(engine-static engine.c)
target_link_libraries(engine-static PRIVATE foresight::client-static)
CM

echo "install_test: pkg-config"
export PKG_CONFIG_PATH=$libdir/pkgconfig PKG_CONFIG_SYSROOT_DIR=$root
# shellcheck disable=SC2046 # the flags are words
"$cc" -Wall -Werror "$work/src/engine.c" -o "$work/engine-pc" $(pkg-config --cflags --libs foresight-client)
LD_LIBRARY_PATH=$libdir "$work/engine-pc"

echo "install_test: find_package"
"$cmake" -S "$work/src" -B "$work/ext" -DCMAKE_C_COMPILER="$cc" -DCMAKE_PREFIX_PATH="$root$prefix" >"$work/ext.log" ||
	{
		cat "$work/ext.log"
		exit 1
	}
"$cmake" --build "$work/ext" >>"$work/ext.log" || {
	cat "$work/ext.log"
	exit 1
}
"$work/ext/engine"
"$work/ext/engine-static"
echo "install_test: OK"
