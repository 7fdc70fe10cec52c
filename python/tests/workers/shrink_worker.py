"""One rank of test_shrink.py: 4 ranks of weft.Comm, rank 1 dies after a first all-reduce
(os._exit, as a crash would end it). The 3 others see the next all-reduce fail, agree that rank 1
failed, shrink, and finish all-reduces on the shrunk Comm with the right sums."""
import os

import numpy as np

import harness

import weft
from weft.errors import WeftError

DEAD = 1


def check_survivors_shrink_and_carry_on(c):
    comm = weft.Comm()
    rank, size = comm.rank, comm.size
    x = np.full(1000, rank + 1, dtype=np.float32)
    comm.all_reduce(x)
    assert x[0] == size * (size + 1) / 2, x[0]
    if rank == DEAD:
        os._exit(17)
    try:
        comm.all_reduce(np.ones(1 << 18, dtype=np.float32))
        raise AssertionError("an all-reduce without rank 1 succeeded")
    except WeftError as e:
        print(f"rank {rank}: all_reduce failed as it should: {e}", flush=True)
    assert comm.failed_ranks() == [DEAD], comm.failed_ranks()
    small = comm.shrink()
    assert small.size == size - 1, small.size
    assert small.rank == (rank if rank < DEAD else rank - 1), small.rank
    y = np.full(1 << 16, rank, dtype=np.int64)  # the old ranks' sum, without rank 1's
    small.all_reduce(y)
    want = sum(r for r in range(size) if r != DEAD)
    assert (y == want).all(), (y[:4], want)
    # A second shrink, naming the dead rank: nobody has to be found out again.
    again = comm.shrink(exclude=[DEAD])
    assert again.size == size - 1
    z = np.ones(10, dtype=np.int32)
    again.all_reduce(z)
    assert (z == size - 1).all(), z
    again.destroy()
    small.destroy()
    comm.abort()


def main():
    harness.run(globals(), {})
    os._exit(0)


if __name__ == "__main__":
    main()
