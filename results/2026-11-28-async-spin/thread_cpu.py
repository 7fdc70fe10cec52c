"""thread_cpu.py -- CPU time per step of each thread of a rank (from /proc/self/task), over N steps
(default 200) of MODE: ddp (weft), local (no DDP, no all-reduce) or noop (DDP with a comm hook that
communicates nothing). BK=gloo runs DDP on gloo instead. Launched like ddp_floor.py."""
import os, sys, time
import torch, torch.nn as nn
import torch.distributed as dist
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "2026-11-25-torch2"))
import bench
dist.init_process_group(os.environ.get("BK", "weft"))
rank, size = dist.get_rank(), dist.get_world_size()
def threads():
    out = {}
    for t in os.listdir("/proc/self/task"):
        try:
            s = open(f"/proc/self/task/{t}/stat").read()
        except OSError: continue
        name = s[s.index("(")+1:s.rindex(")")]; f = s[s.rindex(")")+2:].split()
        out[(t, name)] = (int(f[11]) + int(f[12]), int(f[11]), int(f[12]))
    return out
mode = os.environ.get("MODE", "ddp")
if mode == "ddp":
    step = bench.ddp_step(None, rank)
else:
    import torch.futures
    m = bench.mlp()
    if mode == "noop":
        m = nn.parallel.DistributedDataParallel(m)
        def noop(state, bucket):
            f = torch.futures.Future(); f.set_result(bucket.buffer()); return f
        m.register_comm_hook(None, noop)
    opt = torch.optim.SGD(m.parameters(), lr=0.01)
    g = torch.Generator().manual_seed(rank)
    x, y = torch.randn(64, 256, generator=g), torch.randn(64, 256, generator=g)
    def step(_):
        opt.zero_grad(); nn.functional.mse_loss(m(x), y).backward(); opt.step()
for _ in range(5): step(None)
dist.barrier()
a = threads(); t0 = time.perf_counter(); N = int(os.environ.get("N", "200"))
for _ in range(N): step(None)
wall = time.perf_counter() - t0; b = threads()
tick = os.sysconf("SC_CLK_TCK")
rows = sorted(((b[k][0] - a.get(k, (0,0,0))[0], b[k][1]-a.get(k,(0,0,0))[1], b[k][2]-a.get(k,(0,0,0))[2], k[1]) for k in b), reverse=True)
print(f"rank {rank}: {wall/N*1e3:.2f} ms/step; per step cpu ms (user+sys): " + ", ".join(f"{n} {c/tick/N*1e3:.2f} (u {u/tick/N*1e3:.2f} s {s/tick/N*1e3:.2f})" for c, u, s, n in rows[:5] if c), flush=True)
dist.destroy_process_group()
