# table.py -- medians over the runs of run.sh's logs, per size, and their ratios.
# Usage: python3 table.py DIR...   (several DIRs: their runs are pooled)
import glob, os, statistics, sys

dirs = sys.argv[1:]
sizes = [8, 64, 1024, 4096, 65536]


def read(pattern):
    vals = {}
    for f in [f for d in dirs for f in glob.glob(os.path.join(d, pattern))]:
        for line in open(f):
            p = line.split()
            if len(p) >= 3 and p[0].isdigit():
                vals.setdefault(int(p[0]), []).append(float(p[2]))
    return {k: statistics.median(v) for k, v in vals.items()}


def row(label, m):
    print(f"| {label} | " + " | ".join(f"{m[s]:.1f}" if s in m else "n/a" for s in sizes) + " |")


def ratio(label, a, b):
    print(f"| {label} | " + " | ".join(
        f"{a[s] / b[s]:.2f}" if s in a and s in b and b[s] > 0 else "n/a" for s in sizes) + " |")


for n in (2, 4):
    print(f"\n{n} ranks (us, median of the runs)")
    print("| series | " + " | ".join(str(s) for s in sizes) + " |")
    print("|---|" + "---|" * len(sizes))
    r = {k: read(f"{k}-{n}-*.log") for k in
         ("weft-before-shm", "weft-after-shm", "pinned-before-shm", "pinned-after-shm", "mpi-shm",
          "weft-before-tcp", "weft-after-tcp")}
    row("weft before, shm", r["weft-before-shm"])
    row("weft after, shm", r["weft-after-shm"])
    if r["pinned-after-shm"]:
        row("weft before, shm, pinned a core per rank", r["pinned-before-shm"])
        row("weft after, shm, pinned a core per rank", r["pinned-after-shm"])
    row("Open MPI, shm (its default binding)", r["mpi-shm"])
    row("weft before, tcp", r["weft-before-tcp"])
    row("weft after, tcp", r["weft-after-tcp"])
    ratio("after / before, shm", r["weft-after-shm"], r["weft-before-shm"])
    ratio("after / Open MPI, shm", r["weft-after-shm"], r["mpi-shm"])
    ratio("before / Open MPI, shm", r["weft-before-shm"], r["mpi-shm"])
    if r["pinned-after-shm"]:
        ratio("after pinned / Open MPI, shm", r["pinned-after-shm"], r["mpi-shm"])
    ratio("after / before, tcp", r["weft-after-tcp"], r["weft-before-tcp"])

print("\nshort runs, 2 ranks, 8 B (us, each run's median; sorted)")
for v in ("before", "after"):
    vals = sorted(read(f"short-{v}-{i}.log").get(8, float("nan")) for i in range(1, 13))
    print(f"| {v} | " + " ".join(f"{x:.1f}" for x in vals) + " |")
