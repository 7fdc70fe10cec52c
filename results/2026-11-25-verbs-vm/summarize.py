#!/usr/bin/env python3
"""Reads run.sh's log: per repetition, ib_write_bw's average MB/s (one way; both ways, as the sum
of the two directions) and weft-bench's time per call; prints MB/s per direction for each, the
median over repetitions, and weft's ratios to ib_write_bw."""
import re, statistics, sys

rows = {}  # name -> [MB/s per direction, one per repetition]
cur = None
size = None
for line in open(sys.argv[1]):
    if not line.startswith("[rank 0]"):
        continue
    line = line[len("[rank 0]"):].strip()
    m = re.match(r"== rep \d+ (.*)", line)
    if m:
        cur = m.group(1)
        continue
    f = line.split()
    if cur and cur.startswith("ib_write_bw") and len(f) >= 4 and f[0].isdigit():
        mbs = float(f[3]) * 1.048576  # perftest's MB is 2^20 bytes
        size = int(f[0])
        rows.setdefault(cur, []).append(mbs / 2 if "both" in cur else mbs)
    elif cur and cur.startswith("weft") and len(f) >= 7 and f[0].isdigit():
        nbytes, us = int(f[0]), float(f[5])
        # 2 ranks: all-reduce busbw = algbw (each rank sends and receives `size` bytes, both
        # directions at once); sendrecv: even ranks send first, so one direction at a time, each
        # for half the call: 2 x size / time.
        rate = nbytes / us  # bytes/us = MB/s
        rows.setdefault(cur, []).append(2 * rate if "sendrecv" in cur else rate)
med = {k: statistics.median(v) for k, v in rows.items()}
print(f"message/call size {size} bytes; MB/s (1e6 bytes) per direction; median of {max(len(v) for v in rows.values())}")
print(f"| what | runs | median | ratio to ib_write_bw one way | ratio to ib_write_bw both ways |")
print("|---|---|---|---|---|")
one = med.get("ib_write_bw one-way"); both = med.get("ib_write_bw both-ways")
for k, v in rows.items():
    r1 = f"{med[k] / one:.2f}" if one else "-"
    r2 = f"{med[k] / both:.2f}" if both else "-"
    print(f"| {k} | {' '.join(f'{x:.2f}' for x in v)} | {med[k]:.2f} | {r1} | {r2} |")
