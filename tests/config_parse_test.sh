#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
#
# tests/config_parse_test.sh FORESIGHTD: the config file parser is strict and
# says where (issue 21, problem 8; daemon/fsd_config.c).  Each file below
# was accepted, or refused without a position, before: now each is refused
# (exit 2) with FILE:LINE:COL and the key as written in the file; a flag's
# error names the flag; integer ranges print as integers.
set -euo pipefail
daemon=$1
# shellcheck source=tests/fs_daemon_lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/fs_daemon_lib.sh"
fs_test_init config_parse_test
cfg=$work/c.json
n=0

refused() # CONTENT(printf %b) EXPECTED-MESSAGE-TAIL [FLAGS...]
{
	local body=$1 want=$2 rc=0
	shift 2
	printf '%b' "$body" >"$cfg"
	"$daemon" --check-config "$cfg" --socket "$work/s" "$@" >"$work/out" 2>&1 || rc=$?
	[[ $rc -eq 2 ]] || fail "$(printf '%q' "$body"): exit $rc, not 2: $(cat "$work/out")"
	grep -qF -- "foresightd: $want" "$work/out" ||
		fail "$(printf '%q' "$body"): want 'foresightd: $want', got: $(cat "$work/out")"
	n=$((n + 1))
}

refused '{"slots": "128"}' "$cfg:1:2: key 'slots': \"128\" is a string; slots takes an integer, 1 to 16777216"
refused '{\n  "slots": 12,\n  "slots": 13\n}' "$cfg:3:3: key 'slots': given twice (first at line 2, column 3)"
refused '{\n  "slots": 12,\n}\n' "$cfg:3:1: a ',' before '}': JSON has no trailing comma"
refused '[1, 2]' "$cfg:1:1: an array: the file must hold one JSON object"
refused '' "$cfg:1:1: empty: the file must hold one JSON object"
refused '\n\n' "$cfg:3:1: empty: the file must hold one JSON object"
refused '{"backend": "gpu"}' "$cfg:1:2: key 'backend': 'gpu'"
refused '{"slots": 0}' "$cfg:1:2: key 'slots': 0 is out of range (1 to 16777216)"
refused '{"pool_mib": 99999999}' "$cfg:1:2: key 'pool_mib': 99999999 is out of range (0 to 16777216)"
refused '{"slots": 1.5}' "$cfg:1:2: key 'slots': '1.5' is not an integer (1 to 16777216)"
refused '{"cards": true}' "$cfg:1:2: key 'cards': true is a boolean; cards takes an integer, 1 to 16"
refused '{"group": 5}' "$cfg:1:2: key 'group': 5 is a number; group takes a string"
refused '{"allow_unlocked": "true"}' "$cfg:1:2: key 'allow_unlocked': \"true\" is a string; allow_unlocked takes true or false"
refused '{"slots": null}' "$cfg:1:11: key 'slots': null is not a value it takes"
refused '{"slots": [1]}' "$cfg:1:11: key 'slots': an array is not a value it takes"
refused '{"slots": 3} {}' "$cfg:1:14: more after the object's closing '}'"
refused '{"slots": 3' "$cfg:1:12: the file ends inside the object"
refused "{'slots': 3}" "$cfg:1:2: ''' where a key should be"
refused '{"experts": 8, "experts_used": 9}' "$cfg:1:16: key 'experts_used': 9 exceeds $cfg:1:2: key 'experts': 8"
refused '{"slots": 3}' "--slots: 'x' is not an integer (1 to 16777216)" --slots x
refused '{"slots": 3}' "--experts-used: 99 exceeds experts (default): 64" --experts-used 99
refused '{"seed": 18446744073709551616}' "$cfg:1:2: key 'seed': 18446744073709551616 is out of range (0 to 18446744073709551615)"

# what must still pass: every value type, a BOM, escapes, the widest seed
printf '\xef\xbb\xbf{\n\t"socket_mode": "0660", "peer": "on", "allow_unlocked": true,\n\t"freq_decay": 0.5, "seed": 18446744073709551615, "model_name": "a\\u00e9\\"b"\n}\n' >"$cfg"
"$daemon" --check-config "$cfg" --socket "$work/s" >"$work/out" 2>&1 || fail "a valid file was refused: $(cat "$work/out")"
echo "config_parse_test: PASS ($n files and flags refused with their place)"
