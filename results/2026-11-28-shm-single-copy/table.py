#!/usr/bin/env python3
"""table.py RAW_DIR -- Markdown tables of out-of-place busbw (GB/s), median over the repeats:
weft over shm before / after the single-copy path (and Open MPI's default for all_reduce)."""
import glob, os, re, statistics, sys

raw = sys.argv[1]

def rows(path):
    out = {}
    for line in open(path, errors="replace"):
        f = line.split()
        if not f or line.startswith("#") or not f[0].isdigit():
            continue
        try:
            out[int(f[0])] = float(f[7] if len(f) >= 9 else f[4])  # weft-bench busbw; mpi_bench
        except ValueError:
            pass
    return out

def med(pattern):
    runs = [rows(p) for p in sorted(glob.glob(os.path.join(raw, pattern)))]
    sizes = sorted({s for r in runs for s in r})
    return {s: (statistics.median([r[s] for r in runs if s in r]), len([r for r in runs if s in r]))
            for s in sizes}

def human(n):
    return f"{n >> 20} MiB" if n >= 1 << 20 else f"{n >> 10} KiB"

for coll in ["all_reduce", "broadcast", "all_gather", "sendrecv"]:
    for n in [2, 4]:
        b = med(f"{coll}_{n}ranks_before.r*.log")
        a = med(f"{coll}_{n}ranks_after.r*.log")
        m = med(f"mpi_all_reduce_{n}ranks.r*.log") if coll == "all_reduce" else {}
        print(f"\n### {coll}, {n} ranks\n")
        hdr = "| size | before | after | after/before |"
        if m:
            hdr += " Open MPI | before/MPI | after/MPI |"
        print(hdr)
        print("|" + "---|" * (hdr.count("|") - 1))
        for s in sorted(set(b) | set(a)):
            bb, aa = b.get(s, (float("nan"), 0))[0], a.get(s, (float("nan"), 0))[0]
            line = f"| {human(s)} | {bb:.2f} | {aa:.2f} | {aa / bb if bb else float('nan'):.2f} |"
            if m:
                mm = m.get(s, (float("nan"), 0))[0]
                line += f" {mm:.2f} | {bb / mm if mm else float('nan'):.2f} | {aa / mm if mm else float('nan'):.2f} |"
            print(line)
