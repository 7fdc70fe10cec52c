"""One rank of test_torch_p2p.py: sends and receives large enough that no socket buffer holds
them, in the orders that deadlock when each send and receive is a weft operation of its own: a
ring through batch_isend_irecv (over gloo too, as the reference), isends left unwaited before a
collective or while the rank sleeps, and a batch whose partner receives one op at a time.

Pairs are ranks 2k and 2k+1; with an odd world the last rank has no partner and sits those out.
"""
import gc
import os
import time

import harness

import torch
import torch.distributed as dist

import weft.torch  # registers "weft"
import weft.torch.p2p

N = (16 << 20) // 4  # float32 elements in 16 MiB


def ring(rank, size, group, receive_first=False):
    nxt, prv = (rank + 1) % size, (rank - 1) % size
    send, recv = torch.full((N,), float(rank)), torch.zeros(N)
    ops = [dist.P2POp(dist.isend, send, nxt, group=group),
           dist.P2POp(dist.irecv, recv, prv, group=group)]
    for w in dist.batch_isend_irecv(ops[::-1] if receive_first else ops):
        w.wait()
    assert torch.equal(recv, torch.full((N,), float(prv))), group


def partner(c):
    p = c["rank"] ^ 1
    return p if p < c["size"] else None


def pattern(k, salt, dtype=torch.float32):
    return torch.arange(salt, salt + k, dtype=dtype)  # exact in float32 up to 2**24


def check_gloo_ring(c):
    ring(c["rank"], c["size"], c["gloo"])


def check_ring(c):
    t0 = time.monotonic()
    ring(c["rank"], c["size"], None)
    # A deadlock ends only with WEFT_TIMEOUT_MS (5 s here); the ring itself takes a fraction.
    assert time.monotonic() - t0 < 4, time.monotonic() - t0


def check_ring_with_slow_handover(c):
    # A rank held up between two ops of a batch (descheduled on a loaded host) for longer than
    # the group waits before issuing on its own: the batch must still go out whole.
    pg = dist.distributed_c10d._get_default_group()
    hold = weft.torch.p2p._HOLD_S

    def slowly(method):
        def call(*args, **kwargs):
            time.sleep(10 * hold)
            return method(*args, **kwargs)
        return call

    pg.send, pg.recv = slowly(pg.send), slowly(pg.recv)
    try:
        ring(c["rank"], c["size"], None)
    finally:
        del pg.send, pg.recv


def check_ring_receives_listed_first(c):
    ring(c["rank"], c["size"], None, receive_first=True)


def check_both_directions(c):
    # Each rank sends to both neighbours and receives from both; at 2 ranks both are one peer,
    # told apart by the tags.
    rank, size = c["rank"], c["size"]
    nxt, prv = (rank + 1) % size, (rank - 1) % size
    from_prv, from_nxt = torch.zeros(N), torch.zeros(N)
    ops = [dist.P2POp(dist.isend, pattern(N, 10 * rank + 1), nxt, tag=1),
           dist.P2POp(dist.isend, pattern(N, 10 * rank + 2), prv, tag=2),
           dist.P2POp(dist.irecv, from_prv, prv, tag=1),
           dist.P2POp(dist.irecv, from_nxt, nxt, tag=2)]
    for w in dist.batch_isend_irecv(ops):
        w.wait()
    assert torch.equal(from_prv, pattern(N, 10 * prv + 1))
    assert torch.equal(from_nxt, pattern(N, 10 * nxt + 2))


def check_isends_before_a_collective(c):
    # The even rank leaves two isends unwaited and enters an all_reduce; its partner receives
    # them first. The sends must be issued before the all_reduce.
    rank, peer = c["rank"], partner(c)
    a, b = pattern(N, 3), pattern(1000, 4, torch.int64)
    works = []
    if peer is not None and rank % 2 == 0:
        works = [dist.isend(a, peer), dist.isend(b, peer)]
    elif peer is not None:
        got_a, got_b = torch.zeros(N), torch.zeros(1000, dtype=torch.int64)
        dist.recv(got_a, peer)
        dist.recv(got_b, peer)
        assert torch.equal(got_a, a) and torch.equal(got_b, b)
    x = torch.ones(4)
    dist.all_reduce(x)
    assert torch.equal(x, torch.full((4,), float(c["size"])))
    for w in works:
        w.wait()


def check_unwaited_isend_goes_out(c):
    # The even rank isends and sleeps without calling into the group; its partner's receive
    # completes meanwhile.
    rank, peer = c["rank"], partner(c)
    dist.barrier()
    if peer is not None and rank % 2 == 0:
        w = dist.isend(pattern(1000, 5), peer)
        time.sleep(1.5)
        w.wait()
    elif peer is not None:
        got = torch.zeros(1000)
        t0 = time.monotonic()
        dist.recv(got, peer)
        took = time.monotonic() - t0
        assert torch.equal(got, pattern(1000, 5))
        assert took < 1.2, f"the receive took {took:.2f} s: the send waited for the sleep"
    dist.barrier()


def check_polled_works(c):
    # is_completed() issues what is held, like wait().
    rank, peer = c["rank"], partner(c)
    if peer is None:
        return
    got = torch.zeros(N)
    ops = [dist.P2POp(dist.isend, pattern(N, 6 + rank), peer),
           dist.P2POp(dist.irecv, got, peer)]
    works = dist.batch_isend_irecv(ops)
    deadline = time.monotonic() + 4
    while not all(w.is_completed() for w in works):
        assert time.monotonic() < deadline, "works never completed"
        time.sleep(0.001)
    assert torch.equal(got, pattern(N, 6 + peer))


def check_batch_against_single_receives(c):
    # The even rank's batch holds two sends to its partner, of different sizes, dtypes and
    # descending tags, and a receive; the partner isends, then receives one op at a time.
    rank, peer = c["rank"], partner(c)
    big, small, back = pattern(3 << 18, 7), pattern(10, 8, torch.int64), pattern(2 << 20, 9)
    if peer is None:
        return
    if rank % 2 == 0:
        got = torch.zeros(2 << 20)
        ops = [dist.P2POp(dist.isend, big, peer, tag=5),
               dist.P2POp(dist.isend, small, peer, tag=3),
               dist.P2POp(dist.irecv, got, peer)]
        for w in dist.batch_isend_irecv(ops):
            w.wait()
        assert torch.equal(got, back)
    else:
        w = dist.isend(back, peer)
        got_big, got_small = torch.zeros(3 << 18), torch.zeros(10, dtype=torch.int64)
        dist.recv(got_big, peer, tag=5)
        dist.recv(got_small, peer, tag=3)
        w.wait()
        assert torch.equal(got_big, big) and torch.equal(got_small, small)


def check_coalescing_by_hand(c):
    # What torch 1.13's batch_isend_irecv calls, and 2.x's for a C++ group, with a device.
    rank, size = c["rank"], c["size"]
    pg = dist.distributed_c10d._get_default_group()
    got = torch.zeros(N)
    on_2x = not torch.__version__.startswith("1.")
    pg._start_coalescing(*([torch.device("cpu")] if on_2x else []))
    works = [dist.irecv(got, (rank - 1) % size), dist.isend(pattern(N, rank), (rank + 1) % size)]
    batch = pg._end_coalescing(torch.device("cpu") if on_2x else [])
    if on_2x:
        batch.wait()
        assert all(w.is_completed() for w in works)
    for w in works:
        w.wait()
    assert torch.equal(got, pattern(N, (rank - 1) % size))


def check_destroy_with_ops_held(c):
    # Last: destroy_process_group right after an isend and an irecv nobody waited on issues
    # them, then destroys the group (torch 2.x calls shutdown(); on 1.13 the group's finalizer
    # does it once the group is collected).
    rank, peer = c["rank"], partner(c)
    got, w = torch.zeros(N), None
    if peer is not None:
        w = dist.isend(pattern(N, 11), peer) if rank % 2 == 0 else dist.irecv(got, peer)
    dist.destroy_process_group()
    gc.collect()
    if w is not None:
        w.wait()
        assert rank % 2 == 0 or torch.equal(got, pattern(N, 11))


def main():
    rank, size = int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"])
    dist.init_process_group("weft")
    gloo = dist.new_group(backend="gloo")
    results = harness.run(globals(), {"rank": rank, "size": size, "gloo": gloo})
    if dist.is_initialized() and all(r["ok"] for r in results.values()):
        dist.destroy_process_group()
    os._exit(0)  # a failed weft group cannot be destroyed in order


if __name__ == "__main__":
    main()
