"""bench.py -- weft against gloo under torch.distributed, in one run on the same ranks.

    python -m torch.distributed.run --nproc-per-node 2 bench.py [--iters 200] [--out table.md]

weft is the default group, gloo a group of the same ranks; every measurement alternates between
the two (weft, gloo, weft, gloo, ...) so both see the same load on the machine. Each figure is
the median over rounds, of times taken on rank 0 after a barrier; the ranks are one host's
processes.

  all_reduce latency: float32, 1 and 1024 elements, synchronous;
  all_reduce bandwidth: 1 MiB and 16 MiB of float32, synchronous (algbw = bytes / time);
  100 async all_reduces: 100 all_reduces of 1024 float32 issued with async_op=True, then waited;
  DDP step: DistributedDataParallel over an 8-layer, 256-wide MLP, batch 64: forward, backward
    (the reducer's all_reduces), SGD step;
  FSDP2 step: fully_shard on each layer and the whole model, over init_device_mesh("cpu") for
    weft and DeviceMesh.from_group for gloo, the same MLP and batch.
"""
import argparse
import statistics
import time

import torch
import torch.distributed as dist
import torch.nn as nn

import weft.torch  # noqa: F401 -- registers "weft"


def timed(fn, group, rounds, inner=1):
    """Median seconds per call of fn(group) over rounds of `inner` calls, after a warm-up."""
    for _ in range(max(3, inner)):
        fn(group)
    times = []
    for _ in range(rounds):
        dist.barrier(group=group)
        t0 = time.perf_counter()
        for _ in range(inner):
            fn(group)
        times.append((time.perf_counter() - t0) / inner)
    return statistics.median(times)


def all_reduce_of(n):
    t = torch.ones(n, dtype=torch.float32)
    return lambda g: dist.all_reduce(t, group=g)


def async_all_reduces(k, n):
    ts = [torch.ones(n) for _ in range(k)]

    def run(g):
        works = [dist.all_reduce(t, group=g, async_op=True) for t in ts]
        for w in works:
            w.wait()

    return run


def mlp(layers=8, width=256):
    torch.manual_seed(0)
    mods = []
    for _ in range(layers):
        mods += [nn.Linear(width, width), nn.ReLU()]
    return nn.Sequential(*mods)


def ddp_step(group, rank):
    model = nn.parallel.DistributedDataParallel(mlp(), process_group=group)
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    g = torch.Generator().manual_seed(rank)
    x, y = torch.randn(64, 256, generator=g), torch.randn(64, 256, generator=g)

    def step(_):
        opt.zero_grad()
        nn.functional.mse_loss(model(x), y).backward()
        opt.step()

    return step


def fsdp_step(group, rank):
    from torch.distributed.device_mesh import DeviceMesh, init_device_mesh
    from torch.distributed.fsdp import fully_shard

    if group is None:
        mesh = init_device_mesh("cpu", (dist.get_world_size(),))
    else:
        mesh = DeviceMesh.from_group(group, "cpu")
    model = mlp()
    for m in model:
        if isinstance(m, nn.Linear):
            fully_shard(m, mesh=mesh)
    fully_shard(model, mesh=mesh)
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    g = torch.Generator().manual_seed(rank)
    x, y = torch.randn(64, 256, generator=g), torch.randn(64, 256, generator=g)

    def step(_):
        opt.zero_grad()
        nn.functional.mse_loss(model(x), y).backward()
        opt.step()

    return step


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--rounds", type=int, default=15)
    ap.add_argument("--out", default=None)
    args = ap.parse_args()
    dist.init_process_group("weft")
    rank, size = dist.get_rank(), dist.get_world_size()
    gloo = dist.new_group(list(range(size)), backend="gloo")
    r = args.rounds
    cases = [
        ("all_reduce 1 element", "us", lambda: all_reduce_of(1), 100),
        ("all_reduce 1 K elements", "us", lambda: all_reduce_of(1024), 100),
        ("all_reduce 1 MiB", "GB/s", lambda: all_reduce_of(1 << 18), 10),
        ("all_reduce 16 MiB", "GB/s", lambda: all_reduce_of(1 << 22), 1),
        ("100 async all_reduces of 1 K", "ms", lambda: async_all_reduces(100, 1024), 1),
    ]
    rows = []
    for name, unit, make, inner in cases:
        fn = make()
        w, g = [], []
        for _ in range(3):  # alternate so that both see the same load
            w.append(timed(fn, None, r, inner))
            g.append(timed(fn, gloo, r, inner))
        rows.append((name, unit, statistics.median(w), statistics.median(g)))
    for name, make in (("DDP step, 8x256 MLP", ddp_step), ("FSDP2 step, 8x256 MLP", fsdp_step)):
        sw, sg = make(None, rank), make(gloo, rank)
        w, g = [], []
        for _ in range(3):
            w.append(timed(sw, None, r))
            g.append(timed(sg, gloo, r))
        rows.append((name, "ms", statistics.median(w), statistics.median(g)))
    if rank == 0:
        lines = [f"### {size} ranks, torch {torch.__version__}", "",
                 "| measure | weft | gloo | weft vs gloo |", "|---|---|---|---|"]
        for name, unit, w, g in rows:
            if unit == "GB/s":
                nbytes = 4 * (1 << 18 if "1 MiB" in name else 1 << 22)
                fw, fg = nbytes / w / 1e9, nbytes / g / 1e9
                lines.append(f"| {name} | {fw:.2f} GB/s | {fg:.2f} GB/s | {fw / fg:.1f}x |")
            else:
                scale = 1e6 if unit == "us" else 1e3
                lines.append(f"| {name} | {w * scale:.1f} {unit} | {g * scale:.1f} {unit} | "
                             f"{g / w:.1f}x faster |" if w < g else
                             f"| {name} | {w * scale:.1f} {unit} | {g * scale:.1f} {unit} | "
                             f"{w / g:.1f}x slower |")
        text = "\n".join(lines) + "\n"
        print(text, flush=True)
        if args.out:
            with open(args.out, "a") as f:
                f.write(text + "\n")
    dist.barrier()
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
