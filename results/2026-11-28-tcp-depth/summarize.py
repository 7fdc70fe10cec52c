#!/usr/bin/env python3
"""summarize.py OUT RANKS -- ab.sh's logs as a table: per size, each series' median and best busbw
(GB/s) over the rounds, Gloo taken at its best algorithm in each round, and the ratios of weft
after to weft before and to the better peer (medians against medians, bests against bests)."""
import glob
import os
import re
import statistics
import sys

out, ranks = sys.argv[1], sys.argv[2]
HEADER = re.compile(r"^# (\S+) (\S+) all_reduce")


def tables(path):
    """{variant: {size: busbw}} of one log (Gloo's has one table per algorithm)."""
    found, variant = {}, None
    for line in open(path):
        m = HEADER.match(line)
        if m:
            variant = m.group(2)
            continue
        f = line.split()
        if variant and len(f) >= 6 and f[0].isdigit() and f[5] == "0":
            found.setdefault(variant, {})[int(f[0])] = float(f[4])
    return found


runs = {}  # series -> size -> [busbw per round]
for path in sorted(glob.glob(os.path.join(out, f"*.{ranks}ranks.r*.log"))):
    series = os.path.basename(path).split(".")[0]
    per_variant = tables(path)
    sizes = set().union(*[t.keys() for t in per_variant.values()]) if per_variant else set()
    for size in sizes:
        best = max(t.get(size, 0.0) for t in per_variant.values())
        runs.setdefault(series, {}).setdefault(size, []).append(best)


def stat(series, size, f):
    v = runs.get(series, {}).get(size)
    return f(v) if v else float("nan")


print(f"{ranks} ranks, busbw GB/s, median / best of {max(len(v) for s in runs.values() for v in s.values())} rounds")
print("| size | before | after | Open MPI TCP | Gloo (best algorithm) | after/before | after/best peer |")
print("|---|---|---|---|---|---|---|")
for size in sorted(runs.get("after", {})):
    cells, ratios = [], []
    for s in ("before", "after", "mpi-tcp", "gloo"):
        cells.append(f"{stat(s, size, statistics.median):.2f} / {stat(s, size, max):.2f}")
    for f in (statistics.median, max):
        a, b = stat("after", size, f), stat("before", size, f)
        p = max(stat("mpi-tcp", size, f), stat("gloo", size, f))
        ratios.append((a / b, a / p))
    label = f"{size >> 20} MiB" if size >= 1 << 20 else f"{size >> 10} KiB"
    print(f"| {label} | " + " | ".join(cells) +
          f" | {ratios[0][0]:.2f} / {ratios[1][0]:.2f} | {ratios[0][1]:.2f} / {ratios[1][1]:.2f} |")
