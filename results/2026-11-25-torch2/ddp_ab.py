"""ddp_ab.py -- the DDP step of bench.py only, longer: 5 alternations of 20 steps, weft then gloo,
the median of each; prints one line on rank 0 with WEFT_SPIN_US.

    WEFT_SPIN_US=0 OMP_NUM_THREADS=1 python -m torch.distributed.run --nproc-per-node 4 ddp_ab.py
"""
import os
import statistics
import sys

import torch.distributed as dist

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import bench  # noqa: E402

dist.init_process_group("weft")
rank, size = dist.get_rank(), dist.get_world_size()
gloo = dist.new_group(list(range(size)), backend="gloo")
w, g = [], []
sw, sg = bench.ddp_step(None, rank), bench.ddp_step(gloo, rank)
for _ in range(5):
    w.append(bench.timed(sw, None, 20))
    g.append(bench.timed(sg, gloo, 20))
if rank == 0:
    print(f"WEFT_SPIN_US={os.environ.get('WEFT_SPIN_US', '(default)')}: DDP step weft "
          f"{statistics.median(w) * 1e3:.1f} ms, gloo {statistics.median(g) * 1e3:.1f} ms", flush=True)
dist.destroy_process_group()
