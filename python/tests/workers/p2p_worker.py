"""One rank of test_torch_p2p.py: a ring in which every rank sends 16 MiB to the next before
receiving from the previous, through batch_isend_irecv, over weft and over gloo."""
import datetime
import os

import harness

import torch
import torch.distributed as dist

import weft.torch  # noqa: F401 -- registers "weft"

N = (16 << 20) // 4  # float32 elements in 16 MiB


def ring(rank, size, group):
    send, recv = torch.full((N,), float(rank)), torch.zeros(N)
    ops = [dist.P2POp(dist.isend, send, (rank + 1) % size, group=group),
           dist.P2POp(dist.irecv, recv, (rank - 1) % size, group=group)]
    for w in dist.batch_isend_irecv(ops):
        w.wait()
    assert torch.equal(recv, torch.full((N,), float((rank - 1) % size))), group


def check_gloo_ring(c):
    ring(c["rank"], c["size"], c["gloo"])


def check_weft_ring(c):  # last: a failure leaves the weft group failed
    ring(c["rank"], c["size"], None)


def main():
    rank, size = int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"])
    dist.init_process_group("weft", timeout=datetime.timedelta(seconds=10))
    gloo = dist.new_group(backend="gloo")
    harness.run(globals(), {"rank": rank, "size": size, "gloo": gloo})
    os._exit(0)  # a failed weft group cannot be destroyed in order


if __name__ == "__main__":
    main()
