#!/usr/bin/env python3
"""tab.py OUT -- busbw (GB/s) per series and size from grid.sh's logs: the median over rounds and
each round's value, lowest first."""
import collections, glob, os, statistics, sys

data = collections.defaultdict(lambda: collections.defaultdict(list))
for f in glob.glob(os.path.join(sys.argv[1], '*.log')):
    series = os.path.basename(f).split('.r')[0]
    for line in open(f):
        p = line.split()
        if len(p) >= 6 and p[0].isdigit():
            data[series][int(p[0])].append(float(p[4]))
for series in sorted(data):
    print(series)
    for size in sorted(data[series]):
        v = sorted(data[series][size])
        print(f'  {size:>10} {statistics.median(v):7.3f}  [{" ".join(f"{x:.2f}" for x in v)}]')
