"""bench.py -- ms per dist.all_reduce of a torch.sparse_coo tensor (SUM), weft against gloo, same
ranks, same run.

The input is an embedding table's gradient: shape (ROWS, DIM) float32, sparse_dim 1, nnz rows
per rank (rank-dependent indices, uncoalesced: every tenth row twice). Per (nnz, backend): a
barrier, then ITERS timed calls on fresh copies of the input; backends alternate in ROUNDS
rounds; the figure is the median over all timed calls of rank 0 (the max over ranks of each
call's time would include the barrier's skew). Run with torch's launcher:

  python -m torch.distributed.run --nproc-per-node 3 bench.py [--nnz 10,1000,10000]
"""
import argparse
import os
import statistics
import time

import torch
import torch.distributed as dist

import weft.torch  # noqa: F401 -- registers "weft"

ROWS, DIM = 100_000, 32


def grad(rank, nnz):
    g = torch.Generator().manual_seed(rank)
    rows = torch.randint(0, ROWS, (nnz,), generator=g)
    rows[::10] = rows[0]
    return torch.sparse_coo_tensor(rows.unsqueeze(0), torch.randn(nnz, DIM, generator=g),
                                   (ROWS, DIM))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--nnz", default="10,1000,10000")
    ap.add_argument("--iters", type=int, default=20)
    ap.add_argument("--rounds", type=int, default=3)
    args = ap.parse_args()
    dist.init_process_group("weft")
    rank, size = dist.get_rank(), dist.get_world_size()
    groups = {"weft": None, "gloo": dist.new_group(backend="gloo")}
    times = {}
    for nnz in [int(n) for n in args.nnz.split(",")]:
        src = grad(rank, nnz)
        for _ in range(args.rounds):
            for name, group in groups.items():
                inputs = [src.clone() for _ in range(args.iters + 1)]
                dist.all_reduce(inputs[-1], group=group)  # warm-up
                for t in inputs[:-1]:
                    dist.barrier(group=group)
                    t0 = time.perf_counter()
                    dist.all_reduce(t, group=group)
                    times.setdefault((nnz, name), []).append(time.perf_counter() - t0)
        if rank == 0:
            w = statistics.median(times[(nnz, "weft")]) * 1e3
            g = statistics.median(times[(nnz, "gloo")]) * 1e3
            print(f"| {size} | {nnz} | {w:.3f} | {g:.3f} | {g / w:.2f}x |", flush=True)
    dist.barrier()
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
