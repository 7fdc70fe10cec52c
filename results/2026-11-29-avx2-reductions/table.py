#!/usr/bin/env python3
"""table.py OUT: busbw medians over the pairs of ab.sh's logs, before and after, per series and
size, with after/before and the number of pairs in which after was faster."""
import glob, os, re, statistics, sys

out = sys.argv[1]
row = re.compile(r"^\s+(\d+)\s+(\d+)\s+([\d.]+)\s+([\d.]+)\s+([\d.]+)\s+(\d+)\s*$")
data = {}  # (series, size) -> variant -> {pair: busbw}
for path in glob.glob(os.path.join(out, "*_*.*.log")):
    variant, series, pair = re.match(r"(\w+?)_(\w+)\.(\d+)\.log$", os.path.basename(path)).groups()
    for line in open(path):
        m = row.match(line)
        if m:
            data.setdefault((series, int(m.group(1))), {}).setdefault(variant, {})[pair] = float(m.group(5))
print("| series | size | before (GB/s) | after (GB/s) | after / before | pairs after faster |")
print("|---|---|---|---|---|---|")
for (series, size) in sorted(data):
    v = data[(series, size)]
    b, a = v.get("before", {}), v.get("after", {})
    if not b or not a:
        continue
    mb, ma = statistics.median(b.values()), statistics.median(a.values())
    wins = sum(1 for p in b if p in a and a[p] > b[p])
    label = f"{size // 1048576} MiB" if size >= 1048576 else f"{size // 1024} KiB"
    print(f"| {series} | {label} | {mb:.2f} | {ma:.2f} | {ma / mb:.2f} | {wins} of {len(b)} |")
