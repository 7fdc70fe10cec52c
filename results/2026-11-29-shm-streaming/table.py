#!/usr/bin/env python3
"""table.py OUT -- busbw medians per phase, series and rank count from paired.sh's logs, with the
ratios new/old and new/mpi. A run counts toward a phase only if the host was in it when the run
started and when it ended (pipe.c's reading: below 5 GB/s slow, above 20 fast)."""
import collections, glob, os, statistics, sys

data = collections.defaultdict(lambda: collections.defaultdict(list))
runs = collections.Counter()
for f in glob.glob(os.path.join(sys.argv[1], '*.log')):
    series, n = os.path.basename(f).split('.r')[0].split('-')
    lines = open(f).read().splitlines()
    pipes = [float(l.split()[-1]) for l in lines if l.startswith('# ') and ' pipe ' in l]
    if len(pipes) != 2:
        continue
    if max(pipes) < 5:
        phase = 'slow'
    elif min(pipes) > 20:
        phase = 'fast'
    else:
        continue
    runs[(phase, series, n)] += 1
    for l in lines:
        p = l.split()
        if len(p) >= 6 and p[0].isdigit():
            data[(phase, series, n)][int(p[0])].append(float(p[4]))
for phase in ('fast', 'slow'):
    for n in ('2', '4'):
        if not data[(phase, 'new', n)]:
            continue
        print(f'{phase} phase, {n} ranks: runs old {runs[(phase, "old", n)]}, '
              f'new {runs[(phase, "new", n)]}, mpi {runs[(phase, "mpi", n)]} (busbw GB/s, medians)')
        print(f'{"size":>10} {"old":>8} {"new":>8} {"mpi":>8} {"new/old":>8} {"new/mpi":>8}')
        for s in sorted(data[(phase, 'new', n)]):
            m = {v: statistics.median(data[(phase, v, n)][s]) if data[(phase, v, n)][s] else float('nan')
                 for v in ('old', 'new', 'mpi')}
            print(f'{s:>10} {m["old"]:>8.3f} {m["new"]:>8.3f} {m["mpi"]:>8.3f} '
                  f'{m["new"] / m["old"]:>8.2f} {m["new"] / m["mpi"]:>8.2f}')
        print()
