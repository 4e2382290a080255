#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""fsd_includes_test.py: only foresightd's loop thread sees libuv and nng.

fsd.h is split by job (fsd.h: the daemon struct, regions, arena, log;
fsd_loop.h: the loop thread's libuv and nng handles and its files' calls;
fsd_hot.h: the hot thread; fsd_backend.h: the backends).  The hot thread's
files (fsd_hot.c, fsd_cards.c, fsd_idle.c, fsd_stamps.c, fsd_region.c), the
backends (fsd_backend_*.c, fsd_backends.c) and the hot engine
(daemon/engine/*.c) must not reach <uv.h>, <nng/...> or fsd_loop.h through
any chain of the project's headers.  Exit 0 when that holds, 1 with the
chain that breaks it.  Needs python3 only.
"""
import glob
import os
import re
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
DIRS = ["daemon", "daemon/engine", "daemon/residency", "proto", "common", "client/include"]
HOT = ["fsd_hot.c", "fsd_cards.c", "fsd_idle.c", "fsd_stamps.c", "fsd_region.c", "fsd_backends.c"]
INC = re.compile(r'^\s*#\s*include\s*([<"])([^>"]+)[>"]', re.M)


def find(name):
    for d in DIRS:
        p = os.path.join(ROOT, d, name)
        if os.path.isfile(p):
            return p
    return None


def banned(kind, name):
    return (kind == "<" and (name == "uv.h" or name.startswith("nng/"))) or name == "fsd_loop.h"


def chain(path, seen):
    """The include chain from path to a banned header, or None."""
    if path in seen:
        return None
    seen.add(path)
    with open(path, encoding="utf-8") as f:
        text = f.read()
    for kind, name in INC.findall(text):
        if banned(kind, name):
            return [name]
        if kind == '"':
            sub = find(name)
            if sub:
                c = chain(sub, seen)
                if c:
                    return [name] + c
    return None


def main():
    files = [os.path.join(HERE, f) for f in HOT]
    files += glob.glob(os.path.join(HERE, "fsd_backend_*.c"))
    files += [f for f in glob.glob(os.path.join(HERE, "engine", "*.c")) if not f.endswith("_test.c")]
    bad = 0
    for f in sorted(files):
        if not os.path.isfile(f):
            print("fsd_includes_test: missing %s" % os.path.relpath(f, ROOT))
            bad = 1
            continue
        c = chain(f, set())
        if c:
            print("fsd_includes_test: %s reaches %s" % (os.path.relpath(f, ROOT), " -> ".join(c)))
            bad = 1
    if not bad:
        print("fsd_includes_test: %d hot-thread, backend and engine files reach no libuv/nng" % len(files))
    return bad


if __name__ == "__main__":
    sys.exit(main())
