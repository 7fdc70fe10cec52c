"""compare_table.py -- joins compare.sh's raw logs into compare.csv and a printed table with ratios and limits.

Usage: compare_table.py OUTDIR MEMCPY_GBPS REDUCE_GBPS TCP_GBPS TCP_CORES_BUSY CORES KNOB(yes|no) [FLOOR_FILE]
       [COLD_TCP_GBPS COLD_CORES_BUSY] [SHM_FLOOR_FILE]
FLOOR_FILE: lines "RANKS US" -- the raw-TCP 4 KiB all-reduce floor per rank count (tcp_latency_floor).
SHM_FLOOR_FILE: lines "RANKS BYTES GBPS" -- the busbw bound of shm_floor (the least memory work).
"""
import csv
import glob
import os
import re
import sys

out, memcpy, reduce, tcp, busy, cores, knob = (sys.argv[1], float(sys.argv[2]), float(sys.argv[3]),
                                               float(sys.argv[4]), float(sys.argv[5]), int(sys.argv[6]),
                                               sys.argv[7])
floor = {}
if len(sys.argv) > 8 and os.path.exists(sys.argv[8]):
    for line in open(sys.argv[8]):
        k, v = line.split()
        floor[int(k)] = float(v)
per_core = tcp / busy  # loopback bytes/s one core moves, both kernel copies included


cold_per_core = float(sys.argv[9]) / float(sys.argv[10]) if len(sys.argv) > 10 else None
shm_floor = {}
if len(sys.argv) > 11 and os.path.exists(sys.argv[11]):
    for line in open(sys.argv[11]):
        k, b, v = line.split()
        shm_floor[(int(k), int(b))] = float(v)


def tcp_limit(p, core_rate=per_core):
    """Ring all-reduce busbw this machine allows over loopback (printed below with its derivation)."""
    return 2 * cores / (p * (2 / core_rate + 1 / reduce))



COLS = ["weft-auto", "weft-tcp", "weft-shm", "gloo-ring", "gloo-ring_chunked", "gloo-halving_doubling",
        "openmpi-default", "openmpi-tcp"]
TCP_PEERS = ["gloo-ring", "gloo-ring_chunked", "gloo-halving_doubling", "openmpi-tcp"]
ALL_PEERS = TCP_PEERS + ["openmpi-default"]
ROW = re.compile(r"^\s+(\d+)\s+(\d+)\s+([\d.]+)\s+([\d.]+)\s+([\d.]+)\s+(\d+)\s*$")

# busbw[(ranks, size)][column] = GB/s, or "wrong" when the result check failed; usec likewise, time.
# Each point is the median over the runs (--repeat: raw/NAME_Pranks.rK.log); a wrong result in
# any run makes the point "wrong".
runs = {}
for path in sorted(glob.glob(os.path.join(out, "raw", "*_*ranks*.log"))):
    n = int(re.search(r"_(\d+)ranks(\.r\d+)?\.log$", path).group(1))
    col = None
    for line in open(path, errors="replace"):
        head = re.match(r"^# (\S+) (\S+) all_reduce", line)
        if head:
            col = head.group(1) + "-" + head.group(2)
        m = ROW.match(line)
        if m and col:
            size, wrong = int(m.group(1)), int(m.group(6))
            cell = runs.setdefault((n, size), {}).setdefault(col, [])
            cell.append("wrong" if wrong else (float(m.group(5)), float(m.group(3))))


def median(xs):
    xs = sorted(xs)
    k = len(xs)
    return xs[k // 2] if k % 2 else (xs[k // 2 - 1] + xs[k // 2]) / 2


busbw, usec, nruns = {}, {}, 0
for key, cols in runs.items():
    for col, cells in cols.items():
        nruns = max(nruns, len(cells))
        ok = [c for c in cells if c != "wrong"]
        bad = len(ok) < len(cells)
        busbw.setdefault(key, {})[col] = "wrong" if bad else median([c[0] for c in ok])
        usec.setdefault(key, {})[col] = "wrong" if bad else median([c[1] for c in ok])


def num(v):
    return v if isinstance(v, float) else None


def best(row, names):
    vals = [(row[c], c) for c in names if num(row.get(c))]
    return max(vals) if vals else (None, "n/a")


def ratio(a, b):
    return f"{a / b:.2f}" if a and b else "n/a"


# With the knob unknown, auto is weft's only transport (TCP): it stands in for the TCP fraction.
tcp_path = "weft-tcp" if knob == "yes" else "weft-auto"
header = ["ranks", "size"] + COLS + ["best_tcp_peer", "weft-tcp/best_tcp", "weft-shm/best", "weft-auto/best",
                                     "tcp_limit_busbw", f"{tcp_path}/tcp_limit", "shm_floor_busbw",
                                     "weft-shm/shm_floor"]
rows = []
for (n, size), row in sorted(busbw.items()):
    bt, bt_name = best(row, TCP_PEERS)
    ba, _ = best(row, ALL_PEERS)
    limit = tcp_limit(n)
    sf = shm_floor.get((n, size))
    rows.append([n, size] + [f"{row[c]:.3f}" if num(row.get(c)) else row.get(c, "n/a") for c in COLS] +
                [bt_name, ratio(num(row.get("weft-tcp")), bt), ratio(num(row.get("weft-shm")), ba),
                 ratio(num(row.get("weft-auto")), ba), f"{limit:.3f}", ratio(num(row.get(tcp_path)), limit),
                 f"{sf:.3f}" if sf else "n/a", ratio(num(row.get("weft-shm")), sf)])

with open(os.path.join(out, "compare.csv"), "w", newline="") as f:
    csv.writer(f).writerows([header] + rows)

def cold_text():
    if not cold_per_core:
        return ""
    return (f"\n  The same stream from and into 256 MiB buffers (beyond the caches, like a large all-reduce's)"
            f"\n  moves {cold_per_core:.2f} GB/s per core, which makes the limit "
            + ", ".join(f"{tcp_limit(p, cold_per_core):.2f} GB/s at p={p}" for p in sorted({k[0] for k in busbw}))
            + ".")


print(f"""
Limits (this machine: {cores} cores, memcpy {memcpy:.2f} GB/s, reduction R = {reduce:.2f} GB/s; one loopback
TCP stream: T = {tcp:.2f} GB/s with U = {busy:.2f} cores busy (sender + receiver CPU time / wall time))
  Each byte crossing loopback costs two kernel copies (into the sender's socket buffer, out of the
  receiver's); the single stream pays exactly those, so one core moves T/U = {per_core:.2f} GB/s across.
  Ring all-reduce of n bytes on p ranks: each rank sends 2(p-1)/p*n and reduces (p-1)/p*n, so
  2(p-1)*n bytes cross and (p-1)*n are reduced in all, on `cores` cores:
      t >= (p-1)*n * (2U/T + 1/R) / cores   =>   busbw = (n/t) * 2(p-1)/p <= 2*cores / (p*(2U/T + 1/R))
  = {', '.join(f'{tcp_limit(p):.2f} GB/s at p={p}' for p in sorted({k[0] for k in busbw}))}.
  It assumes all cores are free for this job, and that the socket copies run as fast from and to
  buffers the size of the message as the single stream runs from its 1 MiB buffer (optimistic);
  for scale, the copies alone at memcpy speed would allow cores*M/(2p).{cold_text()}
  weft's fraction uses {tcp_path}{'' if knob == 'yes' else ' (WEFT_TRANSPORT unknown to this weft: auto is its TCP transport)'}.
""")
if shm_floor:
    print("""Shared memory (shm-floor, from 1 MiB; shm_floor.c): every all-reduce reads each rank's input and
  writes each rank's output at least once. p processes that each read and write their own buffer of
  the size once, all at once, take the time that busbw column converts; no library's all-reduce
  over shared memory can beat it. It leaves out the peers' bytes and the reductions, so it is loose:
  a ring also copies (p-1)/p of the size into a peer's reach and reduces as much.
""")
short = {"weft-auto": "w-auto", "weft-tcp": "w-tcp", "weft-shm": "w-shm", "gloo-ring": "g-ring",
         "gloo-ring_chunked": "g-chunk", "gloo-halving_doubling": "g-hd", "openmpi-default": "mpi-def",
         "openmpi-tcp": "mpi-tcp", "weft-tcp/best_tcp": "tcp/bTCP", "weft-shm/best": "shm/best",
         "weft-auto/best": "auto/best", "tcp_limit_busbw": "limit", f"{tcp_path}/tcp_limit": "of-limit",
         "best_tcp_peer": "best_tcp", "shm_floor_busbw": "shm-floor", "weft-shm/shm_floor": "of-floor"}
print(f"busbw in GB/s (median over iterations{f', then over {nruns} runs' if nruns > 1 else ''});"
      " ratios are weft / peer")
print(" ".join(f"{short.get(h, h):>9}" for h in header))
for r in rows:
    cells = [str(c).replace("gloo-", "g-").replace("openmpi-", "mpi-").replace("halving_doubling", "hd")
             .replace("ring_chunked", "chunk") for c in r]
    print(" ".join(f"{c:>9}" for c in cells))

# Latency at the smallest size: the targets compare weft over TCP with Open MPI over TCP
# (at most half), weft over shm with Open MPI's default (at most equal).
lat_cols = ["weft-tcp", "weft-shm", "weft-auto", "openmpi-tcp", "openmpi-default", "gloo-ring",
            "gloo-halving_doubling"]
for n in sorted({k[0] for k in usec}):
    size = min(k[1] for k in usec if k[0] == n)
    row = usec[(n, size)]
    cells = [f"{short.get(c, c)} {row[c]:.1f}" if num(row.get(c)) else f"{short.get(c, c)} n/a" for c in lat_cols]
    print(f"\n{n} ranks, {size} bytes, time in us: " + ", ".join(cells))
    print(f"  w-tcp/mpi-tcp {ratio(num(row.get('weft-tcp')), num(row.get('openmpi-tcp')))}"
          f" (target <= 0.5), w-shm/mpi-def {ratio(num(row.get('weft-shm')), num(row.get('openmpi-default')))}"
          f" (target <= 1)")
    if n in floor:
        print(f"  raw-TCP floor (tcp_latency_floor: the fastest of its schedules on bare sockets, no library) "
              f"{floor[n]:.1f} us; w-tcp/floor {ratio(num(row.get('weft-tcp')), floor[n])}")
