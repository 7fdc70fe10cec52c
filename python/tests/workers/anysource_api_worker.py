"""One rank of test_any_source.py, weft.Comm's side: recv without a peer (or with weft.ANY_SOURCE)
returns the rank it received from; the async form's Request tells it once complete. Rank 0
receives, every other rank sends."""
import os

import numpy as np

import harness

import weft

K = 3  # messages per sender


def checked(fn):
    """Ends the check with a barrier: a receive from any source would otherwise, rightly, take a
    message the next check already sent."""
    def run(c):
        fn(c)
        c["comm"].barrier()
    run.__name__ = fn.__name__
    return run


def stamp(rank, k, n):
    return np.arange(n, dtype=np.int32) + rank * 100000 + k * 1000


@checked
def check_senders_race_into_one_receiver(c):
    comm, rank, size = c["comm"], c["rank"], c["size"]
    for n in (1, 5000, 100000):
        if rank > 0:
            for k in range(K):
                comm.send(stamp(rank, k, n), 0)
        else:
            seen = [0] * size
            for _ in range(K * (size - 1)):
                got = np.zeros(n, np.int32)
                src = comm.recv(got)
                assert 0 < src < size, src
                assert np.array_equal(got, stamp(src, seen[src], n)), (src, seen[src], got[:3])
                seen[src] += 1
            assert seen[1:] == [K] * (size - 1), seen
        comm.barrier()  # before the next size: its messages would (rightly) match these receives


@checked
def check_tag_and_constant(c):
    comm, rank, size = c["comm"], c["rank"], c["size"]
    if rank > 0:
        comm.send(np.full(2, rank, np.int64), 0, tag=7)
        return
    for _ in range(size - 1):
        got = np.zeros(2, np.int64)
        src = comm.recv(got, weft.ANY_SOURCE, tag=7)
        assert np.array_equal(got, np.full(2, src, np.int64)), (src, got)


@checked
def check_async_request_tells_the_source(c):
    comm, rank, size = c["comm"], c["rank"], c["size"]
    if rank > 0:
        comm.send(np.full(3, rank, np.float32), 0)
        if rank == 1:
            comm.send(np.full(2, 9, np.int8), 0, tag=9)
        return
    bufs = [np.zeros(3, np.float32) for _ in range(size - 1)]
    reqs = [comm.recv(b, async_op=True) for b in bufs]
    sources = []
    for b, r in zip(bufs, reqs):
        assert r.wait() is b
        assert np.array_equal(b, np.full(3, r.source, np.float32)), (r.source, b)
        sources.append(r.source)
    assert sorted(sources) == list(range(1, size)), sources
    got = np.zeros(2, np.int8)
    named = comm.recv(got, 1, tag=9, async_op=True)  # a named receive's source is its peer
    named.wait()
    assert named.source == 1 and list(got) == [9, 9], (named.source, got)


def check_collective_after(c):
    x = np.ones(4, np.float32)
    c["comm"].all_reduce(x)
    assert np.array_equal(x, np.full(4, c["size"], np.float32)), x


def main():
    comm = weft.Comm()  # RANK, WORLD_SIZE, MASTER_ADDR, MASTER_PORT from the launcher
    harness.run(globals(), {"comm": comm, "rank": comm.rank, "size": comm.size})
    comm.destroy()
    os._exit(0)


if __name__ == "__main__":
    main()
