#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
#
# gguf_npm_test.sh: an independent GGUF reader, the npm package
# @huggingface/gguf, must read every fixture of fs-gguf-fixture exactly as
# ours does: the same metadata keys, types and values, the same tensor
# names, ggml types, shapes and absolute data offsets.
#
#   gguf_npm_test.sh FIXTURE_BIN DUMP_BIN NPM_DUMP_SCRIPT NPM_PREFIX WORK_DIR
#
# The package (pinned) is installed into NPM_PREFIX (in the build tree,
# git-ignored) on first use.  Exit 77 (ctest: skipped) with a SKIP line when
# node >= 20, npm or the registry is not available.
set -euo pipefail

PKG="@huggingface/gguf@0.4.6"
fixture_bin=$1 dump_bin=$2 script=$3 prefix=$4 work=$5

skip() {
	echo "SKIP: $* (the independent-reader check did not run)"
	exit 77
}

command -v node >/dev/null 2>&1 || skip "node is not installed"
major=$(node -e 'process.stdout.write(process.versions.node.split(".")[0])')
[ "$major" -ge 20 ] || skip "node $major is too old for $PKG (needs >= 20)"
if [ ! -f "$prefix/node_modules/@huggingface/gguf/package.json" ]; then
	command -v npm >/dev/null 2>&1 || skip "npm is not installed"
	mkdir -p "$prefix"
	echo "installing $PKG into $prefix"
	timeout 180 npm install --prefix "$prefix" --no-audit --no-fund --no-package-lock --loglevel=error "$PKG" ||
		skip "npm could not install $PKG (offline?)"
fi

rm -rf "$work"
mkdir -p "$work"
"$fixture_bin" --set "$work" >"$work/list"
fail=0
n=0
while read -r f; do
	n=$((n + 1))
	"$dump_bin" "$f" >"$f.ours"
	if ! node "$script" "$prefix" "$f" >"$f.npm"; then
		echo "FAIL: $(basename "$f"): @huggingface/gguf refused it"
		fail=1
		continue
	fi
	if ! diff -u "$f.npm" "$f.ours" >"$f.diff"; then
		echo "FAIL: $(basename "$f"): the readers disagree (- npm, + ours):"
		head -40 "$f.diff"
		fail=1
		continue
	fi
	echo "ok: $(basename "$f"): $(grep -c '^tensor ' "$f.ours") tensors, $(grep -c '^kv ' "$f.ours") keys agree"
done <"$work/list"
[ "$n" -gt 0 ] || { echo "FAIL: no fixtures written"; exit 1; }
[ "$fail" -eq 0 ] || exit 1
rm -rf "$work"
echo "the independent reader agrees on all $n fixtures"
