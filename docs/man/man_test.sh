#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
#
# docs/man/man_test.sh MAN_BUILD_DIR FORESIGHTD FSCTL: the man pages cannot
# drift from the code:
#   - every option of `foresightd --help` is in foresightd(8);
#   - every config key (the option table: the --help options that are not
#     --config/--check-config/--config-reference/--help/--version) is in
#     foresightd.json(5) with the default `foresightd --config-reference`
#     states for it;
#   - every command of `fsctl --help` is in fsctl(1);
#   - all four pages exist, gzipped, look like roff (.TH) and have no
#     unfilled @PLACEHOLDER@.
set -euo pipefail
dir=$1 daemon=$2 fsctl=$3
fail=0
bad()
{
	echo "man_test: $*" >&2
	fail=1
}

# roff -> plain words: scdoc writes \fB..\fR, \- and \&; drop them.
plain()
{
	sed -e 's/\\f[BIRP]//g' -e 's/\\-/-/g' -e 's/\\&//g' -e 's/\\(em/--/g' "$1"
}

for p in foresightd.8 fsctl.1 libforesight-client.3 foresightd.json.5; do
	[[ -s "$dir/$p" && -s "$dir/$p.gz" ]] || bad "$p not built"
	grep -q '^\.TH' "$dir/$p" 2>/dev/null || bad "$p: no .TH line"
	gzip -t "$dir/$p.gz" 2>/dev/null || bad "$p.gz: not gzip"
	! grep -qE '@[A-Z_]+@' "$dir/$p" 2>/dev/null || bad "$p: a placeholder was not filled in"
done
[[ $fail -eq 0 ]] || exit 1

p8=$(plain "$dir/foresightd.8")
p5=$(plain "$dir/foresightd.json.5")
p1=$(plain "$dir/fsctl.1")

help=$("$daemon" --help)
ref=$("$daemon" --config-reference)
mapfile -t flags < <(grep -o -- '--[a-z][a-z-]*' <<<"$help" | sort -u)
[[ ${#flags[@]} -gt 20 ]] || bad "foresightd --help lists only ${#flags[@]} options"
n_keys=0
for f in "${flags[@]}"; do
	grep -qF -- "$f" <<<"$p8" || bad "foresightd(8) lacks $f (in --help)"
	case $f in
	--config | --check-config | --config-reference | --help | --version | --option) continue ;;
	esac
	key=${f#--}
	key=${key//-/_}
	n_keys=$((n_keys + 1))
	# The entry: the key on its own line, then (within its paragraph) "Default: X."
	dflt=$(awk -v k="*${key//_/\\\\_}*" '$0 == k {on = 1} on && /Default:/ {print; exit}' <<<"$ref" |
		sed -e 's/.*Default: //' -e 's/\. .*//' -e 's/\\//g')
	[[ -n "$dflt" ]] || {
		bad "--config-reference has no default for $key"
		continue
	}
	entry=$(awk -v k="$key" '$0 == k {on = 1} on {print} on && /Default:/ {exit}' <<<"$p5")
	[[ -n "$entry" ]] || {
		bad "foresightd.json(5) lacks the key $key"
		continue
	}
	grep -qF -- "Default: $dflt." <<<"$entry" || bad "foresightd.json(5): $key: default is not '$dflt'"
done
echo "man_test: checked ${#flags[@]} options of --help in foresightd(8), $n_keys keys with defaults in foresightd.json(5)"

fsctl_help=$("$fsctl" --help)
mapfile -t cmds < <(sed -n '/^Commands:/,/^$/p' <<<"$fsctl_help" | awk 'NF && !/^Commands:/ {print $1}')
[[ ${#cmds[@]} -ge 5 ]] || bad "fsctl --help lists only ${#cmds[@]} commands"
for c in "${cmds[@]}"; do
	grep -qE "^$c( |$)" <<<"$p1" || bad "fsctl(1) does not describe '$c' (in fsctl --help)"
done
echo "man_test: checked ${#cmds[@]} commands of fsctl --help in fsctl(1)"
[[ $fail -eq 0 ]] && echo "man_test: OK"
exit "$fail"
