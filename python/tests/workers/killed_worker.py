"""One rank of test_torch_errors.py: DDP training over weft in which the last rank dies at step 3
(os._exit, as a crash or the OOM killer would end it). The others must raise within the group's
timeout, with a message that names the dead rank, instead of hanging."""
import datetime
import os
import time

import harness

import torch
import torch.distributed as dist
import torch.nn as nn

import weft.torch  # noqa: F401 -- registers "weft"

DIES_AT = 3


def check_survivors_raise_naming_the_dead_rank(c):
    rank, size = c["rank"], c["size"]
    dead = size - 1
    torch.manual_seed(0)
    model = nn.parallel.DistributedDataParallel(nn.Sequential(nn.Linear(32, 64), nn.ReLU(),
                                                              nn.Linear(64, 8)))
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    x, y = torch.randn(16, 32), torch.randn(16, 8)
    for step in range(20):
        if step == DIES_AT and rank == dead:
            os._exit(17)
        t0 = time.monotonic()
        try:
            opt.zero_grad()
            nn.functional.mse_loss(model(x), y).backward()
            opt.step()
        except RuntimeError as e:
            took = time.monotonic() - t0
            assert step == DIES_AT, (step, str(e))
            assert f"rank {dead}" in str(e), str(e)
            assert took < 20, f"raised after {took:.1f} s"
            print(f"rank {rank}: step {step} raised after {took:.2f} s: {e}", flush=True)
            return
    raise AssertionError("training went on without the dead rank")


def main():
    rank, size = int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"])
    dist.init_process_group("weft", timeout=datetime.timedelta(seconds=10))
    harness.run(globals(), {"rank": rank, "size": size})
    os._exit(0)  # the group cannot be destroyed in order without its last rank


if __name__ == "__main__":
    main()
