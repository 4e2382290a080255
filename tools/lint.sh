#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
#
# tools/lint.sh: static checks of foresight's C/CUDA sources (seconds).
#
#   bash tools/lint.sh [--format-only | --cppcheck-only]
#
#  1. clang-format --dry-run --Werror (style: .clang-format) over *.c *.h
#     *.cu *.cuh under common/ proto/ daemon/ client/ kernels/ bench/
#     tests/ tools/.  Fix a flagged file with: clang-format -i FILE
#     (a line that must keep its layout: // clang-format off ... on).
#  2. cppcheck (--enable=warning,portability,performance, --library=posix)
#     on the *.c files of the same directories: those in
#     $FS_BUILD_DIR/compile_commands.json (default build/; tools/test.sh's
#     normal build writes it) with its include paths and defines, the
#     others with -Iproto -Icommon -Iclient/include -Idaemon.  Criterion's
#     test macros are described to cppcheck by a generated .cfg.  Silence a
#     reviewed finding with `// cppcheck-suppress <id>` on the line before.
#
# Environment: CLANG_FORMAT (default clang-format), CPPCHECK (default
# cppcheck), FS_BUILD_DIR (default build).  Both checks always run; exits
# non-zero when either flags anything.
set -euo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$ROOT"

do_format=1
do_cppcheck=1
case "${1:-}" in
"") ;;
--format-only) do_cppcheck=0 ;;
--cppcheck-only) do_format=0 ;;
-h | --help)
	sed -n '4,22p' "${BASH_SOURCE[0]}" | sed 's/^# \{0,1\}//'
	exit 0
	;;
*)
	echo "lint.sh: unknown argument '$1' (try --help)" >&2
	exit 2
	;;
esac

CLANG_FORMAT=${CLANG_FORMAT:-clang-format}
CPPCHECK=${CPPCHECK:-cppcheck}
DIRS=(common proto daemon client kernels bench tests tools integrations)

existing_dirs=()
for d in "${DIRS[@]}"; do
	[[ -d "$d" ]] && existing_dirs+=("$d")
done

# list_sources EXT...: the files with those extensions, sorted, build dirs
# and hidden dirs skipped.
list_sources()
{
	local names=() e
	for e in "$@"; do
		[[ ${#names[@]} -gt 0 ]] && names+=(-o)
		names+=(-name "*.$e")
	done
	[[ ${#existing_dirs[@]} -gt 0 ]] || return 0
	find "${existing_dirs[@]}" \( -type d \( -name 'build*' -o -name '.*' \) -prune \) -o \
		-type f \( "${names[@]}" \) -print | LC_ALL=C sort
}

fail=0

# ---- clang-format ----------------------------------------------------------
if [[ $do_format -eq 1 ]]; then
	echo "lint: clang-format ($("$CLANG_FORMAT" --version | sed 's/.*version \([0-9.]*\).*/\1/'))"
	mapfile -t fmt_files < <(list_sources c h cu cuh)
	if [[ ${#fmt_files[@]} -eq 0 ]]; then
		echo "lint: clang-format: no sources"
	else
		log=$(mktemp)
		trap 'rm -f "$log"' EXIT
		if "$CLANG_FORMAT" --dry-run --Werror "${fmt_files[@]}" >"$log" 2>&1; then
			echo "lint: clang-format: OK (${#fmt_files[@]} files)"
		else
			mapfile -t bad < <(sed -n 's/^\([^:]*\):[0-9]*:[0-9]*: error: code should be clang-formatted.*/\1/p' "$log" | sort -u)
			if [[ ${#bad[@]} -eq 0 ]]; then
				# clang-format itself failed (bad .clang-format, unreadable file, ...)
				cat "$log"
				echo "lint: clang-format: FAILED to run"
			else
				head -n 120 "$log"
				[[ $(wc -l <"$log") -le 120 ]] || echo "... ($(wc -l <"$log") lines, truncated)"
				echo "lint: clang-format: FAIL: ${#bad[@]} of ${#fmt_files[@]} files need formatting" \
					"(fix: clang-format -i FILE):"
				printf '  %s\n' "${bad[@]}"
			fi
			fail=1
		fi
	fi
fi

# ---- cppcheck --------------------------------------------------------------
if [[ $do_cppcheck -eq 1 ]]; then
	echo "lint: cppcheck ($("$CPPCHECK" --version))"
	mapfile -t c_files < <(list_sources c)
	if [[ ${#c_files[@]} -eq 0 ]]; then
		echo "lint: cppcheck: no sources"
	else
		# shellcheck disable=SC2054 # the commas belong to --enable
		args=(
			--enable=warning,portability,performance
			--error-exitcode=1
			--inline-suppr
			--quiet
			--std=c11
			--language=c
			--library=posix
			--suppress=missingIncludeSystem
			--suppress=unmatchedSuppression
			--suppress=varFuncNullUB # execl(..., NULL): NULL is (void *)0 on Linux
			--template='{file}:{line}:{column}: {severity}: {message} [{id}]'
			-j "$(nproc 2>/dev/null || echo 2)"
			-D__GNUC__ -D_GNU_SOURCE -D__x86_64__ -D__linux__
		)
		# cppcheck does not read system headers: teach it criterion's
		# file-scope test macros (else: unknownMacro on every test file).
		cfg=$(mktemp --suffix=.cfg)
		trap 'rm -f "${log:-}" "$cfg"' EXIT
		cat >"$cfg" <<'EOF'
<?xml version="1.0"?>
<def format="2">
  <define name="Test(suite, name, ...)" value="void suite##_##name(void)"/>
  <define name="TestSuite(name, ...)" value="static const int name##_suite = 0"/>
  <define name="ParameterizedTest(param, suite, name, ...)" value="void suite##_##name(param)"/>
  <define name="ParameterizedTestParameters(suite, name)" value="struct criterion_test_params suite##_##name##_params(void)"/>
  <define name="Theory(args, suite, name, ...)" value="void suite##_##name args"/>
  <define name="TheoryDataPoints(suite, name)" value="static struct criterion_datapoints suite##_##name##_dps[]"/>
  <define name="ReportHook(kind)" value="void report_hook_##kind"/>
  <!-- posix.cfg of cppcheck 2.10 rejects fd -1, which MAP_ANONYMOUS wants -->
  <function name="mmap,mmap64">
    <use-retval/>
    <returnValue type="void *"/>
    <noreturn>false</noreturn>
    <leak-ignore/>
    <arg nr="1" direction="in"><not-uninit/></arg>
    <arg nr="2" direction="in"><not-uninit/><not-bool/><valid>1:</valid></arg>
    <arg nr="3" direction="in"><not-uninit/><not-bool/></arg>
    <arg nr="4" direction="in"><not-uninit/><not-bool/></arg>
    <arg nr="5" direction="in"><not-uninit/><not-bool/><valid>-1:</valid></arg>
    <arg nr="6" direction="in"><not-uninit/><not-bool/></arg>
  </function>
</def>
EOF
		args+=("--library=$cfg")
		db=${FS_BUILD_DIR:-build}/compile_commands.json
		rc=0
		in_db=()
		extra=()
		for f in "${c_files[@]}"; do
			if [[ -f "$db" ]] && grep -qF "\"$ROOT/$f\"" "$db"; then
				in_db+=("$f")
			else
				extra+=("$f")
			fi
		done
		if [[ ${#in_db[@]} -gt 0 ]]; then
			# Only our C files from the database (not nvcc's .cu entries, not
			# files outside the linted directories).  cppcheck matches the
			# filters against paths relative to the current directory.
			filters=()
			for f in "${in_db[@]}"; do
				filters+=("--file-filter=$f")
			done
			echo "lint: cppcheck: ${#in_db[@]} files with the flags of $db"
			set +e
			"$CPPCHECK" "${args[@]}" --project="$db" "${filters[@]}" 2>&1
			rc=$?
			set -e
		fi
		if [[ ${#extra[@]} -gt 0 ]]; then
			echo "lint: cppcheck: ${#extra[@]} files with default include paths (not in $db)"
			set +e
			"$CPPCHECK" "${args[@]}" -Iproto -Icommon -Iclient/include -Idaemon "${extra[@]}" 2>&1
			rc2=$?
			set -e
			[[ $rc2 -eq 0 ]] || rc=$rc2
		fi
		if [[ $rc -eq 0 ]]; then
			echo "lint: cppcheck: OK (${#c_files[@]} files)"
		else
			echo "lint: cppcheck: FAIL (see the findings above; a reviewed false positive:" \
				"// cppcheck-suppress <id> on the line before)"
			fail=1
		fi
	fi
fi

if [[ $fail -ne 0 ]]; then
	echo "lint: FAILED"
	exit 1
fi
echo "lint: OK"
