# SPDX-License-Identifier: Apache-2.0
"""Comparing runs and printing the results table (no torch needed)."""

COLUMNS = [
    ("mode", "mode"),
    ("slots", "slots"),
    ("pass", "pass"),
    ("tokens", "tokens = stock"),
    ("bits", "logits bit-identical"),
    ("hit_rate", "hit rate"),
    ("daemon_hit_rate", "daemon hit rate (since attach)"),
    ("predictions", "predictions"),
    ("miss_mib", "CPU-path MiB"),
    ("tok_s", "tok/s"),
    ("vs_stock", "vs stock"),
    ("note", "note"),
]


def first_difference(a, b):
    """Index of the first differing token, or None when equal (a length
    difference counts at the shorter length)."""
    for i, (x, y) in enumerate(zip(a, b)):
        if x != y:
            return i
    return None if len(a) == len(b) else min(len(a), len(b))


def cell(key, v):
    if v is None:
        return "-"
    if key in ("hit_rate", "daemon_hit_rate"):
        return "%.1f %%" % (100.0 * v)
    if key == "tok_s":
        return "%.1f" % v
    if key == "vs_stock":
        return "%.2fx" % v
    if key == "miss_mib":
        return "%.1f" % v
    if isinstance(v, bool):
        return "yes" if v else "NO"
    return str(v)


def table(rows):
    """A markdown table of result rows (dicts keyed like COLUMNS)."""
    out = ["| " + " | ".join(h for _, h in COLUMNS) + " |", "|" + "---|" * len(COLUMNS)]
    for r in rows:
        out.append("| " + " | ".join(cell(k, r.get(k)) for k, _ in COLUMNS) + " |")
    return "\n".join(out)


def verdict(rows):
    """(ok, message): every row's tokens equal the stock model's.

    The cpu-path rows compute misses with the CPU's kernels, whose float
    sums differ from the GPU's: their tokens may drift from the stock
    model's after some steps, so they are reported, not judged."""
    bad = [r for r in rows if r.get("tokens") is False and r.get("mode") != "cpu-path"]
    if bad:
        return False, "token mismatch in: " + ", ".join("%s/%s/%s" % (r["mode"], r.get("slots"), r.get("pass"))
                                                        for r in bad)
    ran = [r for r in rows if r.get("tokens") is True]
    if not ran:
        return False, "no served run completed"
    return True, "all %d served runs produced the stock model's tokens" % len(ran)
