"""One rank of test_torch_p2p.py's dead-peer test, at 2 ranks: after an exchange that works,
rank 1 exits (os._exit, as a crash would end it); rank 0's next batch must fail on every one of
its Works, naming rank 1, instead of hanging."""
import os

import harness

import torch
import torch.distributed as dist

import weft
import weft.torch  # noqa: F401 -- registers "weft"

N = (16 << 20) // 4


def check_batch_fails_on_every_work(c):
    rank, peer = c["rank"], 1 - c["rank"]
    got = torch.zeros(1000)
    works = dist.batch_isend_irecv([dist.P2POp(dist.isend, torch.ones(1000), peer),
                                    dist.P2POp(dist.irecv, got, peer)])
    for w in works:
        w.wait()
    dist.barrier()
    if rank == 1:
        os._exit(17)
    works = dist.batch_isend_irecv([dist.P2POp(dist.isend, torch.ones(N), peer),
                                    dist.P2POp(dist.irecv, torch.zeros(N), peer)])
    errors = []
    for w in works:
        try:
            w.wait()
        except weft.WeftError as e:
            errors.append(str(e))
        else:
            raise AssertionError("a send and receive with a dead peer completed")
    assert len(errors) == 2 and errors[0] == errors[1], errors
    assert "rank 1" in errors[0], errors[0]


def main():
    rank, size = int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"])
    dist.init_process_group("weft")
    harness.run(globals(), {"rank": rank, "size": size})
    os._exit(0)  # the group cannot be destroyed in order without its peer


if __name__ == "__main__":
    main()
