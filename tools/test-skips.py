#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""tools/test-skips.py STAGE JUNIT.xml: what a ctest run did not run, by name.

tools/test.sh runs every ctest with --output-junit and calls this after it.
Prints the tests ctest reports skipped (exit 77 / SKIP_RETURN_CODE, or a
SKIP_REGULAR_EXPRESSION match) with their first SKIP line, then the skipped
parts of tests that ran: criterion tests (tests/fs_skip_report.c prints
"SKIP: suite::test: why"), Python unittest ("... skipped 'why'") and shell
tests ("SKIP: ...").  With --summary it prints one line of counts only.
"""
import re
import sys
import xml.etree.ElementTree as ET

summary = "--summary" in sys.argv
args = [a for a in sys.argv[1:] if a != "--summary"]
stage, path = args[0], args[1]
try:
    root = ET.parse(path).getroot()
except (OSError, ET.ParseError) as e:
    print(f"test-skips: {stage}: no ctest JUnit report ({e})")
    sys.exit(0)

PY = re.compile(r"^(\S+) \((\S+)\) \.\.\. skipped '(.*)'$")


def py_name(m):
    return m.group(2) if m.group(2).endswith("." + m.group(1)) else f"{m.group(2)}.{m.group(1)}"


whole, parts = [], []
for tc in root.iter("testcase"):
    name = tc.get("name")
    out = (tc.findtext("system-out") or "").splitlines()
    skip_lines = [l[len("SKIP:"):].strip() for l in out if l.startswith("SKIP:")]
    py = [f"{py_name(m)}: {m.group(3)}" for m in map(PY.match, out) if m]
    if tc.get("status") == "notrun" or tc.find("skipped") is not None:
        why = next((s for s in skip_lines if not s.startswith("all ")), None)
        if why is None:
            sk = tc.find("skipped")
            why = sk.get("message") if sk is not None else "not run"
        whole.append((name, why))
    else:
        parts += [(name, s) for s in skip_lines + py if not s.startswith("all ")]

print(f"== {stage}: {len(whole)} test(s) skipped, {len(parts)} skipped part(s) of tests that ran")
if summary:
    sys.exit(0)
for name, why in whole:
    print(f"   skipped  {name}: {why}")
for name, why in parts:
    print(f"   part     {name}: {why}")
