#!/usr/bin/env python3
"""tabt.py OUT -- time (us) per series from lat.sh's logs: the median over rounds and each round's
value, fastest series first."""
import collections, glob, os, statistics, sys

data = collections.defaultdict(list)
for f in glob.glob(os.path.join(sys.argv[1], '*.log')):
    series = os.path.basename(f).split('.r')[0]
    for line in open(f):
        p = line.split()
        if len(p) >= 3 and p[0].isdigit():
            data[series].append(float(p[2]))
for s in sorted(data, key=lambda s: statistics.median(data[s])):
    print(f'{s:<20} {statistics.median(data[s]):7.1f}  [{" ".join(f"{x:.1f}" for x in sorted(data[s]))}]')
