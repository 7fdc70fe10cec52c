# table.py -- medians over the runs of run.sh's logs (DIR), per size, and their ratios.
# Usage: python3 table.py DIR
import sys, glob, re, statistics, os
d = sys.argv[1]
sizes = [8, 64, 1024, 4096, 65536]
def read(pattern):
    vals = {}
    for f in glob.glob(os.path.join(d, pattern)):
        for line in open(f):
            p = line.split()
            if len(p) >= 3 and p[0].isdigit():
                vals.setdefault(int(p[0]), []).append(float(p[2]))
    return {k: statistics.median(v) for k, v in vals.items()}, {k: len(v) for k, v in vals.items()}
rows = sys.argv[2:] or ["weft before shm=weft-before-shm-{n}-*.log", "weft after shm=weft-after-shm-{n}-*.log", "weft before tcp=weft-before-tcp-{n}-*.log", "weft after tcp=weft-after-tcp-{n}-*.log", "mpi shm=mpi-shm-{n}-*.log", "mpi tcp=mpi-tcp-{n}-*.log", "async before shm=async-before-shm-{n}-*.log", "async after shm=async-after-shm-{n}-*.log", "async before tcp=async-before-tcp-{n}-*.log", "async after tcp=async-after-tcp-{n}-*.log"]
for n in (2, 4):
    print(f"\n{n} ranks (us, median of runs)")
    print("| series | " + " | ".join(str(s) for s in sizes) + " |")
    print("|---|" + "---|" * len(sizes))
    res = {}
    for name in rows:
        label, pat = name.split("=")
        m, c = read(pat.replace("{n}", str(n)))
        res[label] = m
        print(f"| {label} | " + " | ".join(f"{m[s]:.1f}" if s in m else "n/a" for s in sizes) + " |")
    yield_pairs = [("after/before shm", "weft after shm", "weft before shm"), ("after/before tcp", "weft after tcp", "weft before tcp"),
                   ("after shm / MPI shm", "weft after shm", "mpi shm"), ("after tcp / MPI tcp", "weft after tcp", "mpi tcp"),
                   ("before shm / MPI shm", "weft before shm", "mpi shm"), ("before tcp / MPI tcp", "weft before tcp", "mpi tcp")]
    for lab, a, b in yield_pairs:
        if a in res and b in res:
            print(f"| {lab} | " + " | ".join(f"{res[a][s]/res[b][s]:.2f}" if s in res[a] and s in res[b] and res[b][s] > 0 else "n/a" for s in sizes) + " |")

def gloo(n):
    per = {}
    for f in glob.glob(os.path.join(d, f"gloo-{n}-*.r0.log")):
        algo = None
        for line in open(f):
            mm = re.match(r"# gloo (\S+) all_reduce", line)
            if mm: algo = mm.group(1); continue
            p = line.split()
            if algo and len(p) >= 3 and p[0].isdigit():
                per.setdefault((algo, int(p[0])), []).append(float(p[2]))
    best = {}
    for (algo, s), v in per.items():
        m = statistics.median(v)
        if s not in best or m < best[s][0]: best[s] = (m, algo)
    return best
for n in (2, 4):
    b = gloo(n)
    print(f"| gloo best ({n} ranks) | " + " | ".join(f"{b[s][0]:.1f} ({b[s][1]})" if s in b else "n/a" for s in sizes) + " |")
