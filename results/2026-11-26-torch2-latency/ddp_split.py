"""ddp_split.py -- where a DDP training step's time goes: the same step without DDP (forward,
backward, SGD; nothing to communicate), with DDP on weft, and with DDP on gloo, alternating.

    python -m torch.distributed.run --nproc-per-node 2 ddp_split.py

The model and batch are bench.py's (8 Linear layers of 256, batch 64). Each figure is the median
over 5 alternations of the median of 20 steps after a barrier, on rank 0."""
import statistics
import time

import torch
import torch.distributed as dist
import torch.nn as nn

import weft.torch  # noqa: F401 -- registers "weft"


def mlp():
    torch.manual_seed(0)
    mods = []
    for _ in range(8):
        mods += [nn.Linear(256, 256), nn.ReLU()]
    return nn.Sequential(*mods)


def stepper(model, rank):
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    g = torch.Generator().manual_seed(rank)
    x, y = torch.randn(64, 256, generator=g), torch.randn(64, 256, generator=g)

    def step():
        opt.zero_grad()
        nn.functional.mse_loss(model(x), y).backward()
        opt.step()

    return step


def median_ms(step, steps=20):
    for _ in range(3):
        step()
    times = []
    for _ in range(steps):
        dist.barrier()
        t0 = time.perf_counter()
        step()
        times.append(time.perf_counter() - t0)
    return statistics.median(times) * 1e3


def main():
    dist.init_process_group("weft")
    rank, size = dist.get_rank(), dist.get_world_size()
    gloo = dist.new_group(list(range(size)), backend="gloo")
    steps = {
        "no DDP (compute only)": stepper(mlp(), rank),
        "DDP on weft": stepper(nn.parallel.DistributedDataParallel(mlp()), rank),
        "DDP on gloo": stepper(nn.parallel.DistributedDataParallel(mlp(), process_group=gloo),
                               rank),
    }
    got = {name: [] for name in steps}
    for _ in range(5):
        for name, step in steps.items():
            got[name].append(median_ms(step))
    if rank == 0:
        base = statistics.median(got["no DDP (compute only)"])
        print(f"| step ({size} ranks, torch {torch.__version__}) | ms | over compute only |")
        print("|---|---|---|")
        for name, values in got.items():
            m = statistics.median(values)
            print(f"| {name} | {m:.1f} | {m - base:+.1f} ms |")
    dist.barrier()
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
