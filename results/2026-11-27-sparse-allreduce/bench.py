"""bench.py -- ms per dist.all_reduce of a torch.sparse_coo tensor (SUM), weft against gloo, same
ranks, same run; and weft with the alternative it does not use, an all_gather padded to the
largest rank's block in place of the all_to_allv ("weft-padded", patched in below).

The input is an embedding table's gradient: shape (ROWS, DIM) float32, sparse_dim 1, nnz rows
per rank (rank-dependent indices, uncoalesced: every tenth row twice); with --skew, rank 0 holds
nnz rows and the others nnz // 100. Per nnz: ITERS rounds, in each one call per backend on a
fresh copy of the input after a barrier; the figure is the median over the timed calls of rank 0
(the max over ranks of each call's time would include the barrier's skew). Run with torch's
launcher:

  python -m torch.distributed.run --nproc-per-node 3 bench.py [--nnz 10,1000,10000]
"""
import argparse
import statistics
import time

import torch
import torch.distributed as dist

import weft.torch  # noqa: F401 -- registers "weft"
from weft.torch import process_group as pgmod, sparse, tensors as tz

ROWS, DIM = 100_000, 32


def grad(rank, nnz):
    g = torch.Generator().manual_seed(rank)
    rows = torch.randint(0, ROWS, (nnz,), generator=g)
    if nnz:
        rows[::10] = rows[0]
    return torch.sparse_coo_tensor(rows.unsqueeze(0), torch.randn(nnz, DIM, generator=g),
                                   (ROWS, DIM))


def padded_sparse_allreduce(self, t, opts):
    """ProcessGroupWeft._sparse_allreduce with an all_gather of blocks padded to the largest."""
    plan = sparse.Plan(t, self.rank(), self.size(), "all_reduce")
    self._calls.all_gather(tz.as_buffer(plan.record, "x"), tz.as_buffer(plan.records, "x"),
                           async_op=False)
    plan.agree()
    block = max(max(plan.recv_counts), 8)
    send = torch.zeros(block, dtype=torch.uint8)
    mine = plan.recv_counts[self.rank()]
    send[:mine] = plan.sendbuf[:mine]
    plan.recvbuf = torch.empty(block * self.size(), dtype=torch.uint8)
    plan.recv_displs = [r * block for r in range(self.size())]
    req = self._calls.all_gather(tz.as_buffer(send, "x"), tz.as_buffer(plan.recvbuf, "x"),
                                 async_op=pgmod._async(opts))
    return self._completion.submit(req, plan.finish, [t])


def _select(name, real):
    pgmod.ProcessGroupWeft._sparse_allreduce = (
        padded_sparse_allreduce if name == "weft-padded" else real)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--nnz", default="10,1000,10000")
    ap.add_argument("--iters", type=int, default=60)
    ap.add_argument("--skew", action="store_true")
    args = ap.parse_args()
    dist.init_process_group("weft")
    rank, size = dist.get_rank(), dist.get_world_size()
    groups = {"weft": None, "weft-padded": None, "gloo": dist.new_group(backend="gloo")}
    real = pgmod.ProcessGroupWeft._sparse_allreduce
    times = {}
    for nnz in [int(n) for n in args.nnz.split(",")]:
        src = grad(rank, nnz if rank == 0 or not args.skew else nnz // 100)
        for name, group in groups.items():  # warm-up
            _select(name, real)
            dist.all_reduce(src.clone(), group=group)
        # Backends alternate call by call, so that the host's load drifts over all alike.
        for _ in range(args.iters):
            for name, group in groups.items():
                _select(name, real)
                t = src.clone()
                dist.barrier(group=group)
                t0 = time.perf_counter()
                dist.all_reduce(t, group=group)
                times.setdefault((nnz, name), []).append(time.perf_counter() - t0)
        if rank == 0:
            w, p, g = (statistics.median(times[(nnz, k)]) * 1e3
                       for k in ("weft", "weft-padded", "gloo"))
            skew = "skewed" if args.skew else "even"
            print(f"| {size} | {nnz} {skew} | {w:.3f} | {p:.3f} | {g:.3f} | {g / w:.2f}x |",
                  flush=True)
    dist.barrier()
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
