"""fsdp_ab.py -- FSDP2 step of the 8x256 MLP (bench.py's), weft then gloo, 5 alternations of 10
steps, medians, one line on rank 0. Launched like ddp_floor.py."""
import os, statistics, sys
import torch.distributed as dist
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "2026-11-25-torch2"))
import bench
dist.init_process_group("weft")
rank = dist.get_rank()
gloo = dist.new_group(list(range(dist.get_world_size())), backend="gloo")
sf, sg = bench.fsdp_step(None, rank), bench.fsdp_step(gloo, rank)
f, g = [], []
for _ in range(5):
    f.append(bench.timed(sf, None, 10)); g.append(bench.timed(sg, gloo, 10))
if rank == 0:
    print(f"FSDP2 weft {statistics.median(f)*1e3:.1f} ms gloo {statistics.median(g)*1e3:.1f} ms", flush=True)
dist.destroy_process_group()
