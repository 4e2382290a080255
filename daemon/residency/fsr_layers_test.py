#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""fsr_layers_test.py: the residency core's files stay layered.

1. No circle of calls among the files of daemon/residency/: a file calls a
   non-static fsr_* function of another file only downwards (calls through
   the tier table, fsr_tier_ops, are function pointers and not counted).
2. The tier-agnostic machinery names no tier: FSR_TIER_<NAME> of a row of
   proto/fs_tiers.h appears only in the tier files (fsr_tier_*.c: a tier's
   own file, and the order across tiers, which is the tiers' policy: a used
   prediction joins the recency tier, a displaced static slot moves down to
   it, a hot miss goes to the static tier), fsr_tiers.c (the split of a
   card's slots into reserved sizes) and fsr_check.c (the static tier's
   cached coldest); the scheduler, candidates, slots, tier lists, records,
   placement and the rest ask the table, and so do the core's hosts
   (daemon/*.c, tools/replay/*.c).  Tests (*_test.c) may name tiers.

Prints the file graph with -v.  Exit 0 when both hold, 1 with the reasons.
Reads the sources (comments removed); needs python3 only.
"""
import glob
import os
import re
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
# Files that may name a tier besides the tier's own file.
TIER_NAMERS = {"fsr_tiers.c", "fsr_check.c"}


def strip_comments(s):
    return re.sub(r"/\*.*?\*/|//[^\n]*", " ", s, flags=re.S)


def main():
    verbose = "-v" in sys.argv
    files = sorted(f for f in glob.glob(os.path.join(HERE, "*.c")) if not f.endswith("_test.c"))
    src = {os.path.basename(f): strip_comments(open(f, encoding="utf-8").read()) for f in files}
    defs = {}
    for name, s in src.items():
        for m in re.finditer(r"^(?!static\b)[a-z][^\n;=(]*\b(fsr_\w+)\s*\([^;{]*\)\s*\{", s, flags=re.M):
            defs[m.group(1)] = name
    if len(defs) < 20:
        print(f"fsr_layers_test: found only {len(defs)} function definitions: the parser is broken")
        return 1
    edges = {n: set() for n in src}
    why = {}
    for name, s in src.items():
        for m in re.finditer(r"\b(fsr_\w+)\s*\(", s):
            to = defs.get(m.group(1))
            if to and to != name:
                edges[name].add(to)
                why.setdefault((name, to), m.group(1))
    bad = []
    # Tarjan's strongly connected components: any with two files is a circle.
    index, low, stack, on, comps = {}, {}, [], set(), []

    def visit(v):
        index[v] = low[v] = len(index)
        stack.append(v)
        on.add(v)
        for w in sorted(edges[v]):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on.discard(w)
                comp.append(w)
                if w == v:
                    break
            comps.append(comp)

    sys.setrecursionlimit(10000)
    for v in sorted(src):
        if v not in index:
            visit(v)
    for comp in comps:
        if len(comp) > 1:
            calls = [f"{a} -> {b} ({why[(a, b)]})" for a in sorted(comp) for b in sorted(edges[a]) if b in comp]
            bad.append("circle of calls: " + "; ".join(calls))

    tiers = strip_comments(open(os.path.join(ROOT, "proto", "fs_tiers.h"), encoding="utf-8").read())
    rows = re.findall(r"X\(A, (\w+), (\w+),", tiers)
    if len(rows) < 1:
        bad.append("no tier rows found in proto/fs_tiers.h")
    # The hosts of the core name no tier either (the daemon, fs-replay).
    named = dict(src)
    for d in ("daemon", os.path.join("tools", "replay")):
        for f in sorted(glob.glob(os.path.join(ROOT, d, "*.c"))):
            if not f.endswith("_test.c"):
                named[os.path.join(d, os.path.basename(f))] = strip_comments(open(f, encoding="utf-8").read())
    for name, s in named.items():
        for upper, lower in rows:
            if name.startswith("fsr_tier_") or name in TIER_NAMERS:
                continue
            if re.search(rf"\bFSR_TIER_{upper}\b", s):
                bad.append(f"{name} names FSR_TIER_{upper}: ask the tier table (fsr_tier_ops) instead")
    if verbose:
        for a in sorted(edges):
            print(a, "->", " ".join(sorted(edges[a])))
    for b in bad:
        print("fsr_layers_test:", b)
    if not bad:
        print(f"fsr_layers_test: {len(src)} files, {sum(len(e) for e in edges.values())} edges, "
              f"no circle; {len(rows)} tiers named only where allowed")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
