#!/usr/bin/env python3
"""dtype_table.py DIR: out-of-place busbw medians of weft-bench logs named
<variant>_<dtype>_<ranks><transport>.<pair>.log, before (pre) and after (f16), per dtype, series
and size, with the ratio and the pairs in which after was faster."""
import collections, glob, os, re, statistics, sys

d = collections.defaultdict(lambda: collections.defaultdict(dict))
for f in glob.glob(os.path.join(sys.argv[1], "*.log")):
    v, dt, cfg, pair = re.match(r"(\w+?)_(\w+?)_(\w+)\.(\d+)\.log$", os.path.basename(f)).groups()
    for line in open(f):
        p = line.split()
        if len(p) >= 13 and p[0].isdigit():
            d[(dt, cfg, int(p[0]))][v][pair] = float(p[7])
print("| dtype | series | size | before (GB/s) | after (GB/s) | after / before | pairs after faster |")
print("|---|---|---|---|---|---|---|")
for k in sorted(d):
    b, a = d[k].get("pre", {}), d[k].get("f16", {})
    if not b or not a:
        continue
    mb, ma = statistics.median(b.values()), statistics.median(a.values())
    wins = sum(1 for p in b if p in a and a[p] > b[p])
    size = f"{k[2] // 1048576} MiB" if k[2] >= 1048576 else f"{k[2] // 1024} KiB"
    print(f"| {k[0]} | {k[1]} | {size} | {mb:.2f} | {ma:.2f} | {ma / mb:.2f} | {wins} of {len(b)} |")
