"""table.py -- run.sh's logs as a table: per size, the median over rounds of each bare-socket
schedule, of weft over TCP and of Open MPI over TCP (us), and each against Open MPI.
Usage: python3 table.py DIR"""
import collections
import glob
import os
import re
import statistics
import sys

t = collections.defaultdict(list)
for path in sorted(glob.glob(os.path.join(sys.argv[1], "*.log"))):
    m = re.match(r"(floor|weft|ompi)\.(\d+)ranks\.r\d+\.log$", os.path.basename(path))
    if not m:
        continue
    for line in open(path):
        f = line.split()
        if m.group(1) == "floor" and f and f[0] == "tcp_floor_us":
            size = int(f[4].strip(","))
            t[(size, f"sockets, {f[6].strip(',')}, {f[7]} waits")].append(float(f[1]))
        elif m.group(1) != "floor" and len(f) >= 3 and f[0].isdigit() and f[0] in ("8", "4096"):
            t[(int(f[0]), {"weft": "weft over TCP", "ompi": "Open MPI over TCP"}[m.group(1)])].append(
                float(f[2]))

for size in sorted({s for s, _ in t}):
    ompi = statistics.median(t[(size, "Open MPI over TCP")])
    print(f"\n{size} B\n| series | median us [runs] | / Open MPI |\n|---|---|---|")
    for (s, name), v in sorted(t.items(), key=lambda kv: statistics.median(kv[1])):
        if s == size:
            med = statistics.median(v)
            print(f"| {name} | {med:.1f} [{', '.join(f'{x:.1f}' for x in v)}] | {med / ompi:.2f} |")
