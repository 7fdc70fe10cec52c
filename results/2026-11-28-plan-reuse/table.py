"""table.py -- run.sh's logs as a table: per rank count and size, each series' median of its runs'
medians (us) with the lowest and highest run, and the ratios. Usage: python3 table.py DIR"""
import collections
import glob
import os
import re
import statistics
import sys

runs = collections.defaultdict(lambda: collections.defaultdict(list))
for path in glob.glob(os.path.join(sys.argv[1], "*.log")):
    m = re.match(r"(\w+)\.(\d+)ranks\.r\d+\.log$", os.path.basename(path))
    if not m:
        continue
    series, ranks = m.group(1), int(m.group(2))
    for line in open(path):
        f = line.split()
        if len(f) >= 3 and f[0].isdigit():
            runs[(ranks, int(f[0]))][series].append(float(f[2]))

print("| ranks | size (B) | before | after | Open MPI | after / before | after / Open MPI |")
print("|---|---|---|---|---|---|---|")
for ranks, size in sorted(runs):
    row = runs[(ranks, size)]
    med = {s: statistics.median(v) for s, v in row.items()}
    cell = lambda s: f"{med[s]:.1f} [{min(row[s]):.1f}-{max(row[s]):.1f}]" if s in med else "n/a"
    ratio = lambda a, b: f"{med[a] / med[b]:.2f}" if a in med and b in med and med[b] else "n/a"
    print(f"| {ranks} | {size} | {cell('before')} | {cell('after')} | {cell('ompi')} | "
          f"{ratio('after', 'before')} | {ratio('after', 'ompi')} |")
