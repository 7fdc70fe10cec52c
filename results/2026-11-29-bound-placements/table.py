#!/usr/bin/env python3
"""Median of the runs' times (us) per series, placement and size: table.py RAW_DIR."""
import glob, os, re, statistics, sys

raw = sys.argv[1] if len(sys.argv) > 1 else os.path.join(os.path.dirname(__file__), "raw")
times = {}
for path in glob.glob(os.path.join(raw, "*.log")):
    m = re.match(r"(\w+)-(\w+)\.r\d+\.log", os.path.basename(path))
    for line in open(path):
        f = line.split()
        if len(f) >= 3 and f[0].isdigit():
            times.setdefault((m[1], m[2], int(f[0])), []).append(float(f[2]))
sizes = sorted({k[2] for k in times})
print("| series | placement (core of rank 0..3) | " + " | ".join(f"{s} B" for s in sizes) + " |")
print("|---|---|" + "---|" * len(sizes))
order = ["one", "fast", "linar", "linbar", "linboth", "plan", "bound", "bound2", "clk", "bell", "mpi"]
for series in sorted({k[0] for k in times}, key=order.index):
    for pl in sorted({k[1] for k in times if k[0] == series}, key=lambda p: (p == "none", p)):
        cells = []
        for s in sizes:
            v = times.get((series, pl, s))
            cells.append(f"{statistics.median(v):.1f} [{min(v):.1f}-{max(v):.1f}]" if v else "-")
        print(f"| {series} | {pl} | " + " | ".join(cells) + " |")
