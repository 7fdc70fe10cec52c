"""ddp_floor.py -- DDP step of the 8x256 MLP (bench.py's) with weft, with gloo, and the same step
without DDP (no all-reduce at all): 5 alternations of 20 steps each, medians, one line on rank 0.

    WEFT_LIBRARY=.../libweft.so OMP_NUM_THREADS=1 python -m torch.distributed.run --nproc-per-node 4 ddp_floor.py
"""
import os, statistics, sys, time
import torch, torch.nn as nn
import torch.distributed as dist
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "2026-11-25-torch2"))
import bench
dist.init_process_group("weft")
rank, size = dist.get_rank(), dist.get_world_size()
gloo = dist.new_group(list(range(size)), backend="gloo")
def local_step(group, rank):
    model = bench.mlp(); opt = torch.optim.SGD(model.parameters(), lr=0.01)
    g = torch.Generator().manual_seed(rank)
    x, y = torch.randn(64, 256, generator=g), torch.randn(64, 256, generator=g)
    def step(_):
        opt.zero_grad(); nn.functional.mse_loss(model(x), y).backward(); opt.step()
    return step
sw, sg, sl = bench.ddp_step(None, rank), bench.ddp_step(gloo, rank), local_step(None, rank)
w, g, l = [], [], []
for _ in range(5):
    w.append(bench.timed(sw, None, 20)); g.append(bench.timed(sg, gloo, 20)); l.append(bench.timed(sl, None, 20))
if rank == 0:
    m = lambda v: statistics.median(v) * 1e3
    print(f"ranks {size}: weft {m(w):.1f} ms, gloo {m(g):.1f} ms, no all-reduce {m(l):.1f} ms; gloo/weft {m(g)/m(w):.2f}", flush=True)
dist.destroy_process_group()
