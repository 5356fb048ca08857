"""Allocator calls in a callgrind dump, counted from its call records (`calls=` lines).

    python3 bench/callgrind_allocs.py <dump> <n> [<idle dump> <idle seconds> <busy seconds>] [sites]

Prints the calls of each allocator entry point (mimalloc's `mi_malloc`, `mi_free`, ...;
the C library's or jemalloc's `malloc`, `free`, ...) made from outside the allocator,
divided by n; with an idle dump, the idle rate over the same time is subtracted first.
`sites` also lists the callers (after inlining: the function that holds the call) with
at least 0.05 calls each per n. Used by bench/blocking_roundtrip.sh (allocations per
round trip)."""

import collections
import re
import sys

ALLOCATOR = {
    "mi_malloc", "mi_malloc_aligned", "mi_zalloc", "mi_zalloc_aligned", "mi_calloc",
    "mi_realloc", "mi_realloc_aligned", "mi_free",
    "malloc", "calloc", "realloc", "free",
    "je_malloc", "je_calloc", "je_realloc", "je_free",
}


def calls(path):
    names, by_site = {}, collections.Counter()

    def name(s):
        m = re.match(r"\((\d+)\)(?: (.*))?", s)
        if not m:
            return s
        if m.group(2):
            names[m.group(1)] = m.group(2)
        return names.get(m.group(1), m.group(1))

    fn = cfn = None
    with open(path, errors="replace") as f:
        for line in f:
            if line.startswith("fn="):
                fn = name(line[3:].strip())
            elif line.startswith("cfn="):
                cfn = name(line[4:].strip())
            elif line.startswith("calls=") and cfn is not None:
                if cfn in ALLOCATOR and fn not in ALLOCATOR:
                    by_site[(cfn, fn)] += int(line[6:].split()[0])
                cfn = None
    return by_site


def main():
    args = sys.argv[1:]
    sites = bool(args) and args[-1] == "sites"
    if sites:
        args = args[:-1]
    busy, n = calls(args[0]), int(args[1])
    idle, scale = collections.Counter(), 0.0
    if len(args) == 5:
        idle, scale = calls(args[2]), float(args[4]) / float(args[3])
    per = {k: (busy[k] - idle[k] * scale) / n for k in busy.keys() | idle.keys()}
    totals = collections.Counter()
    for (entry, _), v in per.items():
        totals[entry] += v
    print(", ".join(f"{e} {v:.2f}" for e, v in sorted(totals.items()) if abs(v) >= 0.005))
    if sites:
        for (entry, site), v in sorted(per.items(), key=lambda kv: -kv[1]):
            if v >= 0.05:
                print(f"  {v:6.2f}  {entry:12s} <- {site[:160]}")


if __name__ == "__main__":
    main()
