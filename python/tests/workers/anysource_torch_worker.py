"""One rank of test_any_source.py, the torch backend's side: dist.recv without src returns the
sender (recv_anysource and the Work's _source_rank), dist.irecv without src works, tags match,
the autograd and torch profilers change nothing, and a count mismatch names both counts. Rank 0 receives,
every other rank sends."""
import os

import harness

import torch
import torch.distributed as dist

import weft.torch  # registers "weft"

K = 3  # messages per sender


def checked(fn):
    """Ends the check with a barrier: a receive from any source would otherwise, rightly, take a
    message the next check already sent."""
    def run(c):
        fn(c)
        dist.barrier()
    run.__name__ = fn.__name__
    return run


def stamp(rank, k, n=6):
    return torch.arange(n, dtype=torch.float32) + rank * 1000 + k * 10


@checked
def check_recv_without_src_returns_the_sender(c):
    rank, size = c["rank"], c["size"]
    if rank > 0:
        for k in range(K):
            dist.send(stamp(rank, k), 0)
        return
    seen = [0] * size
    for _ in range(K * (size - 1)):
        got = torch.zeros(6)
        src = dist.recv(got)
        assert 0 < src < size, src
        assert torch.equal(got, stamp(src, seen[src])), (src, seen[src], got)
        seen[src] += 1


@checked
def check_irecv_without_src(c):
    rank, size = c["rank"], c["size"]
    if rank > 0:
        dist.isend(stamp(rank, 7), 0).wait()
        return
    for _ in range(size - 1):
        got = torch.zeros(6)
        w = dist.irecv(got)
        w.wait()
        src = w._source_rank()
        assert torch.equal(got, stamp(src, 7)), (src, got)


@checked
def check_tag_must_match(c):
    rank, size = c["rank"], c["size"]
    if rank > 0:
        dist.send(torch.full((2,), float(rank)), 0, tag=5)
        return
    for _ in range(size - 1):
        got = torch.zeros(2)
        src = dist.recv(got, tag=5)
        assert torch.equal(got, torch.full((2,), float(src))), (src, got)


@checked
def check_strided_tensor(c):
    rank, size = c["rank"], c["size"]
    if rank > 0:
        dist.send(stamp(rank, 3, 8), 0)
        return
    for _ in range(size - 1):
        got = torch.zeros(8, 2)[:, 0]  # not contiguous: received through a staging copy
        src = dist.recv(got)
        assert torch.equal(got, stamp(src, 3, 8)), (src, got)


@checked
def check_under_the_autograd_profiler(c):
    rank, size = c["rank"], c["size"]
    with torch.autograd.profiler.profile():
        if rank > 0:
            dist.send(stamp(rank, 9), 0)
        else:
            for _ in range(size - 1):
                got = torch.zeros(6)
                src = dist.recv(got)
                assert torch.equal(got, stamp(src, 9)), (src, got)
    x = torch.ones(3)
    dist.all_reduce(x)
    assert torch.equal(x, torch.full((3,), float(size)))


@checked
def check_under_the_torch_profiler(c):
    rank, size = c["rank"], c["size"]
    with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CPU]):
        if rank > 0:
            dist.send(stamp(rank, 10), 0)
        else:
            for _ in range(size - 1):
                got = torch.zeros(6)
                work = dist.irecv(got)
                work.wait()
                src = work._source_rank()
                assert torch.equal(got, stamp(src, 10)), (src, got)


def check_count_mismatch_names_both(c):
    # Last: it fails rank 0's communicator.
    rank = c["rank"]
    if rank == 1:
        dist.send(torch.zeros(5), 0)
    elif rank == 0:
        try:
            dist.recv(torch.zeros(4))
        except Exception as e:  # noqa: BLE001 -- the type is weft's, the text is what counts
            text = str(e)
            assert "sends 5 elements to rank 0" in text and "expects 4" in text, text
            assert "any source" in text, text
        else:
            raise AssertionError("a receive of the wrong count succeeded")


def main():
    dist.init_process_group("weft")
    harness.run(globals(), {"rank": dist.get_rank(), "size": dist.get_world_size()})
    os._exit(0)  # rank 0's communicator failed on purpose: no orderly destroy


if __name__ == "__main__":
    main()
