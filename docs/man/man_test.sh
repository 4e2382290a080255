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
#   - both lists are exactly the option list (FSD_OPTIONS, as
#     --config-reference prints it), in order, each key's reload rule too;
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

# Both ways: the pages' lists are exactly the option list (FSD_OPTIONS,
# daemon/fsd_options.h, as --config-reference prints it), in its order:
# no option missing, none left over from an older list.  An entry of a
# list is the line before its ".RS 4" indent.
entries()
{
	sed -n "/^\.SH $1\$/,/^\.SH /p" | awk '$0 == ".RS 4" && prev !~ /^\./ {print prev} {prev = $0}'
}
rows=$(sed -n 's/^\*\(.*\)\*$/\1/p' <<<"$ref" | sed 's/\\//g')
n_rows=$(wc -l <<<"$rows")
[[ $n_rows -gt 20 ]] || bad "--config-reference lists only $n_rows options"
keys5=$(entries KEYS <<<"$p5")
[[ "$keys5" == "$rows" ]] || bad "foresightd.json(5) KEYS differs from the option list:
$(diff <(echo "$rows") <(echo "$keys5") || true)"
opts8=$(entries OPTIONS <<<"$p8" | awk '{print $1}' | grep -vxE -- '--(config|check-config|config-reference.*|help|version)' | sed -e 's/^--//' -e 's/-/_/g')
[[ "$opts8" == "$rows" ]] || bad "foresightd(8) OPTIONS differs from the option list:
$(diff <(echo "$rows") <(echo "$opts8") || true)"
# The reload rule of each key, as the list says it.
while read -r key; do
	want=$(awk -v k="*${key//_/\\_}*" '$0 == k {on = 1} on && /Default:/ {print; exit}' <<<"$ref" | grep -o 'SIGHUP applies a change\|A change needs a restart')
	got=$(awk -v k="$key" '$0 == k {on = 1} on && /Default:/ {print; exit}' <<<"$p5" | grep -o 'SIGHUP applies a change\|A change needs a restart')
	[[ -n "$want" && "$want" == "$got" ]] || bad "foresightd.json(5): $key: '$got', the list says '$want'"
done <<<"$rows"
echo "man_test: foresightd(8) OPTIONS and foresightd.json(5) KEYS are the $n_rows options of the list, in order"

fsctl_help=$("$fsctl" --help)
mapfile -t cmds < <(sed -n '/^Commands:/,/^$/p' <<<"$fsctl_help" | awk 'NF && !/^Commands:/ {print $1}')
[[ ${#cmds[@]} -ge 5 ]] || bad "fsctl --help lists only ${#cmds[@]} commands"
for c in "${cmds[@]}"; do
	grep -qE "^$c( |$)" <<<"$p1" || bad "fsctl(1) does not describe '$c' (in fsctl --help)"
done
echo "man_test: checked ${#cmds[@]} commands of fsctl --help in fsctl(1)"
[[ $fail -eq 0 ]] && echo "man_test: OK"
exit "$fail"
