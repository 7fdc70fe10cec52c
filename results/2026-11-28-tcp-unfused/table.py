# table.py DIR -- medians over runs of each series (file name up to .rN) per size, time column (us).
import glob, statistics, sys, collections
d = sys.argv[1] if len(sys.argv) > 1 else '/tmp/ab/out'
series = collections.defaultdict(lambda: collections.defaultdict(list))
for f in sorted(glob.glob(d + '/*.log')):
    name = f.split('/')[-1].rsplit('.r', 1)[0]
    for line in open(f):
        if line.startswith('#') or not line.strip(): continue
        parts = line.split()
        try: size = int(parts[0]); t = float(parts[2])
        except: continue
        series[name][size].append(t)
names = sorted(series)
sizes = sorted(set(s for n in names for s in series[n]))
print('| size | ' + ' | '.join(names) + ' |')
print('|---' * (len(names) + 1) + '|')
for s in sizes:
    row = [f"{statistics.median(series[n][s]):.2f}" if series[n][s] else '-' for n in names]
    print(f'| {s} | ' + ' | '.join(row) + ' |')
