"""best_of.py -- each series' best run of the --repeat runs (raw/), per size, as ratios against
the peers' best runs: the view of a host whose slow phases (results/2026-11-28-cross-core-phases)
put whole sweeps of one series out of step. Usage: python3 best_of.py [DIR]"""
import collections
import glob
import re
import sys

d = sys.argv[1] if len(sys.argv) > 1 else "."
ROW = re.compile(r"^\s+(\d+)\s+(\d+)\s+([\d.]+)\s+([\d.]+)\s+([\d.]+)\s+(\d+)\s*$")
runs = collections.defaultdict(list)
for path in sorted(glob.glob(d + "/raw/*_*ranks.r*.log")):
    n = int(re.search(r"_(\d+)ranks", path).group(1))
    col = None
    for line in open(path, errors="replace"):
        h = re.match(r"^# (\S+) (\S+) all_reduce", line)
        if h:
            col = h.group(1) + "-" + h.group(2)
        m = ROW.match(line)
        if m and col:
            runs[(n, int(m.group(1)), col)].append(float(m.group(5)))
slow = sum(sum(x < 0.3 * max(v) for x in v) for k, v in runs.items() if k[2].startswith(("weft", "openmpi")))
total = sum(len(v) for k, v in runs.items() if k[2].startswith(("weft", "openmpi")))
print(f"weft and Open MPI points below 0.3x their series' best run: {slow} of {total}")
TCP = ["openmpi-tcp", "gloo-ring", "gloo-ring_chunked", "gloo-halving_doubling"]
print("ranks size w-shm/mpi-def w-auto/mpi-def w-tcp/best-TCP | best runs, busbw GB/s: w-shm w-auto mpi-def w-tcp best-TCP")
for n, s in sorted({(k[0], k[1]) for k in runs}):
    b = {c: max(runs[(n, s, c)]) for c in ["weft-shm", "weft-auto", "weft-tcp", "openmpi-default"] + TCP if runs.get((n, s, c))}
    bt = max(b.get(c, 0) for c in TCP)
    print(f"{n} {s} {b['weft-shm'] / b['openmpi-default']:.2f} {b['weft-auto'] / b['openmpi-default']:.2f} "
          f"{b['weft-tcp'] / bt:.2f} | {b['weft-shm']:.2f} {b['weft-auto']:.2f} {b['openmpi-default']:.2f} "
          f"{b['weft-tcp']:.2f} {bt:.2f}")
