#!/usr/bin/env python3
"""Fused ring steps, before and after, side by side: weft-bench ring all-reduce busbw (GB/s,
out of place, nccl-tests' columns) over shared memory (2 and 4 ranks, 64 KiB .. 256 MiB) and
TCP (4 ranks, 16 .. 256 MiB), each arm run in turn in every repetition, the median reported.

Arms: `before` is weft at 6fc9db1 (the commit before this work), `after` this tree, `two-pass`
this tree with WEFT_FUSED_STEPS=0. Usage (from the repository root, nothing else running):

  git worktree add /tmp/weft-before 6fc9db1 && (cd /tmp/weft-before &&
    bazel build -c opt //tools:weft-run //tools/bench:weft-bench)
  bazel build -c opt //tools:weft-run //tools/bench:weft-bench
  results/2026-11-25-fused-steps/run.py BEFORE_BIN_DIR AFTER_BIN_DIR OUT_DIR [REPS]

where each BIN_DIR holds weft-run and weft-bench. Writes OUT_DIR/raw.txt (every table) and
OUT_DIR/table.md; also measures memcpy bandwidth (tools/peers/memcpy_bw.c, one thread and two
at once) in the same run, for the memory-traffic limit.
"""
import os, statistics, subprocess, sys

before, after, out = sys.argv[1], sys.argv[2], sys.argv[3]
reps = int(sys.argv[4]) if len(sys.argv) > 4 else 3
os.makedirs(out, exist_ok=True)
raw = open(os.path.join(out, "raw.txt"), "w")

ARMS = [("before", before, {}), ("after", after, {}), ("two-pass", after, {"WEFT_FUSED_STEPS": "0"})]
CASES = [  # (transport, ranks, sweeps: (min, max, iters, warmup))
    ("shm", 2, [("64K", "4M", 40, 5), ("8M", "256M", 6, 2)]),
    ("shm", 4, [("64K", "4M", 40, 5), ("8M", "256M", 6, 2)]),
    ("tcp", 4, [("16M", "256M", 5, 2)]),
]

def bench(bindir, env, transport, ranks, lo, hi, iters, warm):
    e = dict(os.environ, WEFT_TRANSPORT=transport, WEFT_ALGO="ring", **env)
    cmd = [f"{bindir}/weft-run", "-n", str(ranks), "--no-prefix", "--", f"{bindir}/weft-bench",
           "-b", lo, "-e", hi, "-f", "2", "-n", str(iters), "-w", str(warm), "-c", "0"]
    r = subprocess.run(cmd, env=e, capture_output=True, text=True, timeout=900)
    raw.write(f"### {' '.join(cmd)} {env} {transport}\n{r.stdout}{r.stderr}\n")
    raw.flush()
    rows = {}
    for line in r.stdout.splitlines():
        f = line.split()
        if len(f) >= 8 and f[0].isdigit():
            rows[int(f[0])] = float(f[7])  # out-of-place busbw
    return rows

def memcpy_gbps(parallel):
    src = os.path.join(os.path.dirname(os.path.abspath(__file__)), "../../tools/peers/memcpy_bw.c")
    exe = os.path.join(out, "memcpy_bw")
    subprocess.run(["gcc", "-O2", "-I", os.path.dirname(src), "-o", exe, src], check=True)
    procs = [subprocess.Popen([exe], stdout=subprocess.PIPE, text=True) for _ in range(parallel)]
    return sum(float(p.communicate()[0].split()[1]) for p in procs)

mem = {1: [], 2: []}
results = {}  # (transport, ranks, arm) -> size -> [busbw]
for rep in range(reps):
    for p in (1, 2):
        mem[p].append(memcpy_gbps(p))
    for transport, ranks, sweeps in CASES:
        for name, bindir, env in ARMS:
            for lo, hi, iters, warm in sweeps:
                for size, bw in bench(bindir, env, transport, ranks, lo, hi, iters, warm).items():
                    results.setdefault((transport, ranks, name), {}).setdefault(size, []).append(bw)
    print(f"rep {rep + 1}/{reps} done", flush=True)

def human(b):
    return f"{b >> 20} MiB" if b >= 1 << 20 else f"{b >> 10} KiB"

md = open(os.path.join(out, "table.md"), "w")
m1, m2 = statistics.median(mem[1]), statistics.median(mem[2])
md.write(f"memcpy (256 MiB buffers, GB/s copied): one thread {m1:.2f} (runs {mem[1]}), "
         f"two at once {m2:.2f} in all (runs {mem[2]})\n\n")
for transport, ranks, _ in CASES:
    p = ranks
    # Per-rank memory traffic per all-reduce, in units of n (ring_allreduce.c's top comment).
    fused, twopass = (6 * p - 4) / p, 9 * (p - 1) / p
    # All ranks share the memory: busbw <= 2(p-1)/p n / (p * traffic * n / B), B = 2 * memcpy.
    limit = 2 * (p - 1) / p / (p * fused) * 2 * m2
    md.write(f"## {transport}, {p} ranks: busbw GB/s, median of {reps}\n\n"
             f"traffic per rank per all-reduce: fused {fused:.2f} n, two passes {twopass:.2f} n; "
             f"memory-traffic limit for shm (two memcpy streams' {m2:.2f} GB/s x 2 bytes moved): "
             f"{limit:.2f} GB/s busbw\n\n")
    md.write("| size | before | after | two-pass | after/before | after/two-pass |"
             + (" after / limit |" if transport == "shm" else "") + "\n")
    md.write("|---|---|---|---|---|---|" + ("---|" if transport == "shm" else "") + "\n")
    sizes = sorted(results.get((transport, ranks, "after"), {}))
    for s in sizes:
        med = {a: statistics.median(results[(transport, ranks, a)].get(s, [0]) or [0])
               for a, _, _ in ARMS}
        ratio = med["after"] / med["before"] if med["before"] else 0
        r2 = med["after"] / med["two-pass"] if med["two-pass"] else 0
        row = (f"| {human(s)} | {med['before']:.2f} | {med['after']:.2f} | {med['two-pass']:.2f} "
               f"| {ratio:.2f} | {r2:.2f} |")
        if transport == "shm":
            row += f" {med['after'] / limit:.2f} |"
        md.write(row + "\n")
    md.write("\n")
md.close()
print(open(os.path.join(out, "table.md")).read())
