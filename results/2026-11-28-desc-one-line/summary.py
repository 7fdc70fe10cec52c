"""summary.py -- pairs.txt as medians and wins: lines "plan|tiny ALLREDUCE_US BARRIER_US", the
two binaries in strict alternation. Usage: python3 summary.py pairs.txt"""
import statistics
import sys

rows = [line.split() for line in open(sys.argv[1]) if line.strip()]
before = [r for r in rows if r[0] == "plan"]
after = [r for r in rows if r[0] == "tiny"]
for col, name in ((1, "all-reduce 8 B"), (2, "barrier")):
    a = [float(r[col]) for r in before]
    b = [float(r[col]) for r in after]
    wins = sum(y < x for x, y in zip(a, b))
    ties = sum(y == x for x, y in zip(a, b))
    print(f"{name}: before median {statistics.median(a):.3f} (lowest {min(a):.2f}), "
          f"one line {statistics.median(b):.3f} (lowest {min(b):.2f}); one line faster in "
          f"{wins}, level in {ties}, slower in {len(a) - wins - ties} of {len(a)} pairs")
