"""One rank of test_ddp.py: DistributedDataParallel trains the same model on the same data over
weft and over gloo; the parameters must end the same (bitwise at 2 ranks, where a sum of two
terms does not depend on the order of addition)."""
import os

import harness

import torch
import torch.distributed as dist
import torch.nn as nn

import weft.torch  # noqa: F401 -- registers "weft"

STEPS = 6


class Net(nn.Module):
    def __init__(self, unused_branch=False):
        super().__init__()
        self.body = nn.Sequential(nn.Linear(8, 32), nn.BatchNorm1d(32), nn.ReLU(),
                                  nn.Linear(32, 32), nn.ReLU())
        self.head = nn.Linear(32, 4)
        # Parameters that get no gradient: DDP's find_unused_parameters path.
        self.unused = nn.Linear(32, 4) if unused_branch else None

    def forward(self, x):
        return self.head(self.body(x))


def train(group, rank, *, unused_branch=False, accumulate=False, hook=None, **ddp_kwargs):
    torch.manual_seed(1234)  # the same initial model on every rank and for every backend
    model = Net(unused_branch)
    ddp = nn.parallel.DistributedDataParallel(model, process_group=group, bucket_cap_mb=0.004,
                                              **ddp_kwargs)
    if hook is not None:  # a Python comm hook: the future it returns goes back into C++
        ddp.register_comm_hook(group or dist.distributed_c10d._get_default_group(), hook)
    opt = torch.optim.SGD(ddp.parameters(), lr=0.05, momentum=0.9)
    for step in range(STEPS):
        g = torch.Generator().manual_seed(1000 * step + rank)  # each rank its own batch
        x = torch.randn(16, 8, generator=g)
        y = torch.randn(16, 4, generator=g)
        opt.zero_grad()
        if accumulate:  # one micro-batch without synchronizing, then one with
            with ddp.no_sync():
                nn.functional.mse_loss(ddp(x[:8]), y[:8]).backward()
            nn.functional.mse_loss(ddp(x[8:]), y[8:]).backward()
        else:
            nn.functional.mse_loss(ddp(x), y).backward()
        opt.step()
    return {k: v.detach().clone() for k, v in model.state_dict().items()}


def compare(c, tol=(1e-5, 1e-6), **kw):
    a = train(None, c["rank"], **kw)  # the default group: weft
    b = train(c["gloo"], c["rank"], **kw)
    exact = c["size"] <= 2
    for k in a:
        if exact:
            assert torch.equal(a[k], b[k]), (k, (a[k] - b[k]).abs().max())
        else:
            assert torch.allclose(a[k], b[k], rtol=tol[0], atol=tol[1]), (
                k, (a[k] - b[k]).abs().max())
    # Training moved the model, and every rank holds the same one (what DDP promises).
    fresh = train_free_state()
    assert any(not torch.equal(a[k], fresh[k]) for k in a if a[k].is_floating_point())
    # Parameters only: buffers (BatchNorm's running stats) are broadcast before each forward, so
    # after the last one every rank has updated them from its own batch.
    params = {n for n, _ in Net(kw.get("unused_branch", False)).named_parameters()}
    for k, v in a.items():
        if k not in params:
            continue
        mine = v.reshape(-1).double()
        lo, hi = mine.clone(), mine.clone()
        dist.all_reduce(lo, op=dist.ReduceOp.MIN)
        dist.all_reduce(hi, op=dist.ReduceOp.MAX)
        assert torch.equal(lo, hi), f"{k} differs across ranks"


def train_free_state():
    torch.manual_seed(1234)
    return {k: v.detach().clone() for k, v in Net().state_dict().items()}


def check_ddp_matches_gloo(c):
    compare(c)


def check_ddp_unused_parameters_bucket_views(c):
    compare(c, unused_branch=True, find_unused_parameters=True, gradient_as_bucket_view=True)


def check_ddp_no_sync_accumulation(c):
    compare(c, accumulate=True)


def check_ddp_allreduce_hook(c):
    from torch.distributed.algorithms.ddp_comm_hooks import default_hooks

    compare(c, hook=default_hooks.allreduce_hook)


def check_ddp_fp16_compress_hook(c):
    from torch.distributed.algorithms.ddp_comm_hooks import default_hooks

    # At 3 ranks the float16 sums round once more or less than gloo's, in another order: to
    # float16's precision, not float32's.
    compare(c, tol=(1e-3, 1e-4), hook=default_hooks.fp16_compress_hook)


def check_works_released(c):
    # Every Work DDP and the checks above got was consumed; none is left referenced.
    pg = dist.distributed_c10d._get_default_group()
    assert len(pg._completion.keeper) == 0, len(pg._completion.keeper)


def main():
    rank, size = int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"])
    dist.init_process_group("weft")
    gloo = dist.new_group(list(range(size)), backend="gloo")
    harness.run(globals(), {"rank": rank, "size": size, "gloo": gloo})
    dist.barrier()
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
