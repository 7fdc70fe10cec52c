"""bench.py -- ms per dist.all_reduce of a torch.sparse_coo tensor (SUM), weft against gloo, same
ranks, same run; weft as it chooses the collective for the blocks ("weft"), and always
all_to_allv ("weft-a2av") or always an all_gather padded to the largest block ("weft-padded"), set
through sparse.PAD_LIMIT_BYTES.

The input is an embedding table's gradient: shape (ROWS, DIM) float32, sparse_dim 1, nnz rows
per rank (rank-dependent indices, uncoalesced: every tenth row twice); with --skew, rank 0 holds
nnz rows and the others nnz // 100. Per nnz: ITERS rounds, in each one call per backend (in an
order drawn anew each round) on a fresh copy of the input after a barrier; the figure is the
median over the timed calls of rank 0 (the max over ranks of each call's time would include the
barrier's skew). Columns: ranks, nnz, weft, weft-a2av, weft-padded, gloo (ms), gloo / weft.
Run with torch's launcher:

  python -m torch.distributed.run --nproc-per-node 3 bench.py [--nnz 10,1000,10000]
"""
import argparse
import random
import statistics
import time

import torch
import torch.distributed as dist

import weft.torch  # noqa: F401 -- registers "weft"
from weft.torch import sparse

ROWS, DIM = 100_000, 32


def grad(rank, nnz):
    g = torch.Generator().manual_seed(rank)
    rows = torch.randint(0, ROWS, (nnz,), generator=g)
    if nnz:
        rows[::10] = rows[0]
    return torch.sparse_coo_tensor(rows.unsqueeze(0), torch.randn(nnz, DIM, generator=g),
                                   (ROWS, DIM))


# sparse.PAD_LIMIT_BYTES per variant: weft's choice, all_to_allv always, padded all_gather always.
LIMITS = {"weft": sparse.PAD_LIMIT_BYTES, "weft-a2av": -1, "weft-padded": 1 << 62}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--nnz", default="10,1000,10000")
    ap.add_argument("--iters", type=int, default=60)
    ap.add_argument("--skew", action="store_true")
    args = ap.parse_args()
    dist.init_process_group("weft")
    rank, size = dist.get_rank(), dist.get_world_size()
    gloo = dist.new_group(backend="gloo")
    groups = {"weft": None, "weft-a2av": None, "weft-padded": None, "gloo": gloo}
    times = {}
    for nnz in [int(n) for n in args.nnz.split(",")]:
        src = grad(rank, nnz if rank == 0 or not args.skew else nnz // 100)
        for name, group in groups.items():  # warm-up
            sparse.PAD_LIMIT_BYTES = LIMITS.get(name, 0)
            dist.all_reduce(src.clone(), group=group)
        # Backends alternate call by call, so that the host's load drifts over all alike, in an
        # order drawn anew each round (the same on every rank): a call right after gloo's was
        # slower, so none may always follow it.
        names = list(groups)
        for i in range(args.iters):
            random.Random(i).shuffle(names)
            for name in names:
                group = groups[name]
                sparse.PAD_LIMIT_BYTES = LIMITS.get(name, 0)
                t = src.clone()
                dist.barrier(group=group)
                t0 = time.perf_counter()
                dist.all_reduce(t, group=group)
                times.setdefault((nnz, name), []).append(time.perf_counter() - t0)
        if rank == 0:
            w, a, p, g = (statistics.median(times[(nnz, k)]) * 1e3
                          for k in ("weft", "weft-a2av", "weft-padded", "gloo"))
            skew = "skewed" if args.skew else "even"
            print(f"| {size} | {nnz} {skew} | {w:.3f} | {a:.3f} | {p:.3f} | {g:.3f} | "
                  f"{g / w:.2f}x |", flush=True)
    dist.barrier()
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
