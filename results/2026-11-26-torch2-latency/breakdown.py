"""breakdown.py -- where a synchronous 1-element all_reduce's time goes, on weft's torch backend.

    python -m torch.distributed.run --nproc-per-node 2 breakdown.py

Times, on rank 0, each layer a call goes through, from torch's dist.all_reduce down to weft's
blocking call, each the mean of 3000 calls after a barrier. The layers that communicate run on
every rank together; the others are local."""
import time

import torch
import torch.distributed as dist
from torch._C._distributed_c10d import AllreduceOptions

import weft.torch  # noqa: F401 -- registers "weft"
from weft.torch import tensors as tz
from weft.torch.process_group import _op, _Staged

N = 3000


def mean_us(fn):
    for _ in range(50):
        fn()
    dist.barrier()
    t0 = time.perf_counter()
    for _ in range(N):
        fn()
    return (time.perf_counter() - t0) / N * 1e6


def main():
    dist.init_process_group("weft")
    pg = dist.distributed_c10d._get_default_group()
    t = torch.ones(1)
    buf = tz.as_buffer(t, "all_reduce")
    sync = AllreduceOptions()
    sync.asyncOp = False
    rows = [
        ("dist.all_reduce(t)", lambda: dist.all_reduce(t)),
        ("pg.allreduce([t], asyncOp=False).wait()", lambda: pg.allreduce([t], sync).wait()),
        ("the same, async (asyncOp=True)", lambda: pg.allreduce([t]).wait()),
        ("weft Comm.all_reduce, blocking", lambda: pg._comm.all_reduce(buf)),
        ("weft Comm.all_reduce, async_op=True, wait()",
         lambda: pg._comm.all_reduce(buf, async_op=True).wait()),
        ("local: tensor -> weft Buffer", lambda: tz.as_buffer(t, "all_reduce")),
        ("local: _Staged (dtype check, buffer)", lambda: _Staged(t, "all_reduce")),
        ("local: _op (ReduceOp -> weft op)", lambda: _op(sync, t, "all_reduce")),
        ("local: a completed Work, waited on",
         lambda: pg._completion.completed([t], "x").wait()),
    ]
    out = [(name, mean_us(fn)) for name, fn in rows]
    if dist.get_rank() == 0:
        print(f"| layer ({dist.get_world_size()} ranks, torch {torch.__version__}) | us per call |")
        print("|---|---|")
        for name, us in out:
            print(f"| {name} | {us:.1f} |")
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
