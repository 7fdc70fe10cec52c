"""One rank of test_api.py: the ctypes API (weft.Comm) on numpy arrays and buffer-protocol
objects, every collective, dtype and op, async requests, split/dup, and the error paths."""
import array
import os
import re
import threading
import time

import numpy as np

import harness
from harness import Skip

import weft

NUMPY_DTYPES = ["int8", "uint8", "int32", "uint32", "int64", "uint64", "float16", "float32",
                "float64"]
OPS = ["sum", "prod", "min", "max", "avg"]
N = 37  # elements: not a multiple of anything the algorithms slice by


def values(rank, dtype, op, n=N):
    """What `rank` contributes: small integers, exact in every dtype, products that fit int8."""
    i = np.arange(n)
    if op == "prod":
        v = (rank + i) % 3 + 1
    elif np.dtype(dtype).kind == "u":
        v = (rank * 7 + i) % 11
    else:
        v = (rank * 7 + i) % 11 - 5
    return v.astype(dtype)


def expected(size, dtype, op, n=N):
    per_rank = [values(r, dtype, op, n).astype(np.float64) for r in range(size)]
    if op == "sum":
        out = sum(per_rank)
    elif op == "prod":
        out = np.prod(per_rank, axis=0)
    elif op == "min":
        out = np.min(per_rank, axis=0)
    elif op == "max":
        out = np.max(per_rank, axis=0)
    else:
        out = sum(per_rank) / size
        if np.dtype(dtype).kind in "iu":
            out = np.trunc(out)  # weft's integer average truncates toward zero, as NCCL's
    return out.astype(dtype)


def check_identity(c):
    comm = c["comm"]
    assert comm.rank == int(os.environ["RANK"]) and comm.size == int(os.environ["WORLD_SIZE"])
    # Every rank runs on this host and no LOCAL_RANK is set: weft derives it from host identities.
    assert (comm.local_rank, comm.local_size) == (comm.rank, comm.size)
    assert weft.version() >= (0, 1, 0)
    assert "libweft.so" in weft.library_path()


def check_init_explicit(c):
    comm = c["comm"]
    p1, p2 = harness.extra_ports()[:2]
    a = weft.Comm(rank=comm.rank, size=comm.size, master_addr="127.0.0.1", master_port=p1)
    b = weft.Comm(url=f"tcp://127.0.0.1:{p2}", rank=comm.rank, size=comm.size)
    for sub in (a, b):
        assert (sub.rank, sub.size) == (comm.rank, comm.size)
        x = np.full(5, comm.rank + 1, np.int64)
        sub.all_reduce(x)
        assert (x == comm.size * (comm.size + 1) // 2).all(), x
        sub.destroy()
        assert sub.closed
    try:
        weft.Comm(rank=0, size=2)
    except ValueError as e:
        assert "master_addr" in str(e), e
    else:
        raise AssertionError("Comm(rank, size) without a master did not raise")


def check_all_reduce_dtypes_ops(c):
    comm = c["comm"]
    for dtype in NUMPY_DTYPES:
        for op in OPS:
            want = expected(comm.size, dtype, op)
            x = values(comm.rank, dtype, op)
            assert comm.all_reduce(x, op=op) is x
            assert np.array_equal(x, want), (dtype, op, x, want)
            send = values(comm.rank, dtype, op)
            out = np.zeros_like(send)
            assert comm.all_reduce(send, out, op=getattr(weft, op.upper())) is out
            assert np.array_equal(out, want), (dtype, op, "out of place", out, want)
            assert np.array_equal(send, values(comm.rank, dtype, op)), "sendbuf was written"


def _to_bf16(a):
    return (np.asarray(a, np.float32).view(np.uint32) >> 16).astype(np.uint16)


def _from_bf16(bits):
    return (bits.astype(np.uint32) << 16).view(np.float32)


def check_bfloat16(c):
    comm = c["comm"]
    for op in OPS:
        x = _to_bf16(values(comm.rank, "float32", op))
        comm.all_reduce(x, op=op, dtype="bfloat16")
        want = expected(comm.size, "float32", op)
        # Integers this small are exact in bfloat16; an average is rounded to 8 mantissa bits.
        assert np.allclose(_from_bf16(x), want, rtol=1 / 256, atol=0), (op, _from_bf16(x), want)
    x = np.zeros(4, np.uint16)
    buf = weft.as_buffer(x, dtype=weft.BFLOAT16)
    assert buf.dtype == weft.Dtype.BFLOAT16 and buf.count == 4


def _fp8_value(b, mant, bias):
    """An fp8 byte's value from its fields (finite patterns only)."""
    exp, m = (b & 0x7f) >> mant, b & ((1 << mant) - 1)
    v = m * 2.0 ** (1 - bias - mant) if exp == 0 else (1 + m / 2 ** mant) * 2.0 ** (exp - bias)
    return -v if b & 0x80 else v


def check_fp8(c):
    comm = c["comm"]
    size = comm.size
    for dtype, one, top, mant, bias in (("float8_e4m3", 0x38, 0x7e, 3, 7),
                                        ("float8_e5m2", 0x3c, 0x7b, 2, 15)):
        x = np.full(6, one, np.uint8)  # 1.0 from every rank: a sum of size (exact up to 8)
        comm.all_reduce(x, dtype=dtype)
        assert all(_fp8_value(int(b), mant, bias) == size for b in x), (dtype, x)
        x = np.full(3, top, np.uint8)  # the largest finite value from every rank: saturates
        comm.all_reduce(x, dtype=dtype)
        assert list(x) == [top] * 3, (dtype, x)
    buf = weft.as_buffer(np.zeros(4, np.uint8), dtype=weft.FLOAT8_E5M2)
    assert buf.dtype == weft.Dtype.FLOAT8_E5M2 and buf.count == 4 and buf.nbytes == 4


def check_buffer_protocol(c):
    comm = c["comm"]
    size, rank = comm.size, comm.rank
    tri = size * (size + 1) // 2
    b = bytearray([rank + 1] * 6)
    comm.all_reduce(b)
    assert list(b) == [tri] * 6, list(b)
    for code, dtype in (("b", "int8"), ("B", "uint8"), ("i", "int32"), ("I", "uint32"),
                        ("l", "int64"), ("q", "int64"), ("Q", "uint64"), ("f", "float32"),
                        ("d", "float64")):
        a = array.array(code, [rank + 1] * 9)
        assert weft.as_buffer(a).dtype == weft.Dtype[dtype.upper()], code
        comm.all_reduce(a, op="max")
        assert list(a) == [size] * 9, (code, a)
    m = np.arange(12, dtype=np.float32).reshape(3, 4) * (rank + 1)
    mv = memoryview(m)  # two-dimensional, format "f"
    comm.all_reduce(mv)
    assert np.array_equal(m, np.arange(12, dtype=np.float32).reshape(3, 4) * tri), m
    raw = bytearray(np.full(4, rank + 1, np.int32).tobytes())
    comm.all_reduce(raw, dtype="int32")  # bytes reinterpreted as int32
    assert list(np.frombuffer(bytes(raw), np.int32)) == [tri] * 4
    # bytes are read-only: fine to send from, refused as a destination.
    out = bytearray(3)
    comm.all_reduce(bytes([1, 2, 3]), out)
    assert list(out) == [size, 2 * size, 3 * size], list(out)


def check_broadcast(c):
    comm = c["comm"]
    for root in range(comm.size):
        x = np.full(N, comm.rank * 10, np.float64)
        comm.broadcast(x, root=root)
        assert (x == root * 10).all(), (root, x)
        src = np.arange(N, dtype=np.int32) + root
        out = np.zeros(N, np.int32)
        comm.broadcast(src, out, root=root)
        assert np.array_equal(out, np.arange(N, dtype=np.int32) + root)


def check_reduce(c):
    comm = c["comm"]
    for root in range(comm.size):
        for op in ("sum", "max"):
            x = values(comm.rank, "int32", op)
            out = np.zeros(N, np.int32)
            comm.reduce(x, out, op=op, root=root)
            if comm.rank == root:
                assert np.array_equal(out, expected(comm.size, "int32", op)), (root, op, out)


def check_all_gather(c):
    comm = c["comm"]
    size, rank = comm.size, comm.rank
    send = np.arange(5, dtype=np.int64) + 100 * rank
    out = np.zeros(5 * size, np.int64)
    assert comm.all_gather(send, out) is out
    want = np.concatenate([np.arange(5) + 100 * r for r in range(size)])
    assert np.array_equal(out, want), out
    # In place, NCCL's layout: this rank's part already sits at rank * count.
    buf = np.zeros(5 * size, np.int64)
    buf[5 * rank:5 * rank + 5] = send
    comm.all_gather(buf[5 * rank:5 * rank + 5], buf)
    assert np.array_equal(buf, want), buf


def check_reduce_scatter(c):
    comm = c["comm"]
    size, rank = comm.size, comm.rank
    send = np.arange(4 * size, dtype=np.float32) * (rank + 1)
    out = np.zeros(4, np.float32)
    comm.reduce_scatter(send, out)
    want = np.arange(4 * rank, 4 * rank + 4, dtype=np.float32) * (size * (size + 1) // 2)
    assert np.array_equal(out, want), (out, want)
    send = values(rank, "int64", "min", 3 * size)
    out = np.zeros(3, np.int64)
    comm.reduce_scatter(send, out, op="min")
    assert np.array_equal(out, expected(size, "int64", "min", 3 * size)[3 * rank:3 * rank + 3])


def check_gather(c):
    comm = c["comm"]
    size, rank = comm.size, comm.rank
    want = np.concatenate([np.arange(5) + 100 * r for r in range(size)])
    for root in range(size):
        for algo in (None, "linear", "tree"):
            send = np.arange(5, dtype=np.int64) + 100 * rank
            # The other ranks pass no recvbuf and get None back.
            out = np.zeros(5 * size, np.int64) if rank == root else None
            assert comm.gather(send, out, root=root, algo=algo) is out
            if rank == root:
                assert np.array_equal(out, want), (root, algo, out)
        # In place on the root, as all_gather's layout; a recvbuf elsewhere is left alone.
        buf = np.full(5 * size, -1, np.int64)
        part = buf[5 * rank:5 * rank + 5]
        part[:] = np.arange(5) + 100 * rank
        comm.gather(part, buf, root=root)
        if rank == root:
            assert np.array_equal(buf, want), (root, buf)
        else:
            assert (buf[:5 * rank] == -1).all() and (buf[5 * rank + 5:] == -1).all(), buf


def check_scatter(c):
    comm = c["comm"]
    size, rank = comm.size, comm.rank
    for root in range(size):
        for algo in (None, "linear", "tree"):
            # The other ranks pass no sendbuf.
            send = np.arange(3 * size, dtype=np.float32) + root if rank == root else None
            out = np.zeros(3, np.float32)
            assert comm.scatter(send, out, root=root, algo=algo) is out
            assert np.array_equal(out, np.arange(3 * rank, 3 * rank + 3) + root), (root, algo, out)
        # In place on the root, as reduce_scatter's layout.
        buf = np.arange(3 * size, dtype=np.float32) * (root + 1)
        if rank != root:
            buf[:] = -1
        comm.scatter(buf if rank == root else None, buf[3 * rank:3 * rank + 3], root=root)
        assert np.array_equal(buf[3 * rank:3 * rank + 3],
                              np.arange(3 * rank, 3 * rank + 3) * (root + 1)), (root, buf)


def check_all_to_all(c):
    comm = c["comm"]
    size, rank = comm.size, comm.rank
    for algo in (None, "pairwise", "bruck"):
        for n in (0, 1, 3, 1000):
            for dt in (np.int64, np.float32, np.uint8):
                # Element k of the block rank r sends to rank j names (r, j, k), modulo what the
                # dtype holds, so that a block from the wrong rank or for the wrong rank shows.
                j, k = np.divmod(np.arange(size * n), n) if n else (np.zeros(0), np.zeros(0))
                send = ((rank * 31 + j * 7 + k) % 97).astype(dt)
                out = np.full(size * n, 255, dt)
                assert comm.all_to_all(send, out, algo=algo) is out
                i = j  # block i of out came from rank i, and was its block `rank`
                want = ((i * 31 + rank * 7 + k) % 97).astype(dt)
                assert np.array_equal(out, want), (algo, n, dt, out[:8], want[:8])
    send = np.arange(4 * size, dtype=np.float64) + 1000 * rank
    out = np.zeros(4 * size)
    req = comm.all_to_all(send, out, async_op=True)
    assert req.wait() is out
    assert np.array_equal(out[4 * rank:4 * rank + 4], send[4 * rank:4 * rank + 4])


def check_all_to_allv(c):
    comm = c["comm"]
    size, rank = comm.size, comm.rank

    def part(i, j, n):  # what rank i sends rank j: 0 .. 3n/2 elements, differing each way
        return n * ((i + 2 * j + n) % 4) // 2

    for n in (0, 1, 5, 300):
        for dt in (np.int32, np.float64, np.uint8):
            sc = [part(rank, j, n) for j in range(size)]
            rc = [part(i, rank, n) for i in range(size)]
            send = np.concatenate([((rank * 37 + j * 11 + np.arange(sc[j])) % 100).astype(dt)
                                   for j in range(size)])
            want = np.concatenate([((i * 37 + rank * 11 + np.arange(rc[i])) % 100).astype(dt)
                                   for i in range(size)])
            out = np.full(sum(rc), 255, dt)
            assert comm.all_to_allv(send, sc, out, rc) is out
            assert np.array_equal(out, want), (n, dt, out[:8], want[:8])
            # Explicit displacements: parts in reverse rank order, a gap after each.
            rd, at = [0] * size, 0
            for i in reversed(range(size)):
                rd[i], at = at, at + rc[i] + 1
            out = np.full(at, 255, dt)
            req = comm.all_to_allv(send, sc, out, rc, recv_displs=rd, async_op=True)
            assert req.wait() is out
            for i in range(size):
                got = out[rd[i]:rd[i] + rc[i]]
                assert np.array_equal(got, want[sum(rc[:i]):sum(rc[:i + 1])]), (i, got)
                assert out[rd[i] + rc[i]] == 255, "a gap was written"


def check_mismatch_all_to_allv(c):
    comm = c["comm"]
    if comm.size < 2:
        raise Skip("needs 2 ranks")
    # Rank 0 sends rank 1 three elements, rank 1 expects two: both fail, naming both.

    def call(d):
        sc, rc = [1] * d.size, [1] * d.size
        if d.rank == 0:
            sc[1] = 3
        if d.rank == 1:
            rc[0] = 2
        d.all_to_allv(np.ones(sum(sc), np.int32), sc, np.zeros(sum(rc), np.int32), rc)

    # Ranks 0 and 1 alone, on a communicator of their own that the failure may take down.
    d = comm.split(0 if comm.rank < 2 else None)
    if d is None:
        return
    try:
        try:
            call(d)
        except weft.WeftError as e:
            assert e.code == weft.Result.MISMATCH, e
            assert "rank 0 sends 3 elements to rank 1" in e.message, e.message
            assert "expects 2" in e.message, e.message
        else:
            raise AssertionError("a mismatched all_to_allv returned")
    finally:
        d.abort()


def check_p2p_group(c):
    comm = c["comm"]
    size, rank = comm.size, comm.rank
    if size < 2:
        raise Skip("needs 2 ranks")
    nxt, prv = (rank + 1) % size, (rank - 1) % size
    # Every rank sends first to both neighbours, then receives, in one group: no turn-taking, at
    # sizes past any socket buffer. With two ranks both neighbours are one peer: tags tell apart.
    for n in (0, 1, 1 << 20):
        a, b = np.full(n, rank, np.int32), np.full(n, 100 + rank, np.float64)
        from_prv, from_nxt = np.full(n, -1, np.int32), np.full(n, -1.0)
        ops = [weft.P2POp("send", a, nxt, tag=1), weft.P2POp("send", b, prv, tag=2),
               weft.P2POp("recv", from_prv, prv, tag=1), weft.P2POp("recv", from_nxt, nxt, tag=2)]
        assert comm.p2p_group(ops) is None
        assert (from_prv == prv).all() and (from_nxt == 100 + nxt).all(), (n, from_prv[:4])
    # Tags pair ops whatever order each side lists them in; async as a Request.
    tags = [5, 1, 3]
    sends = [weft.P2POp("send", np.full(t, 10 * rank + t, np.int64), nxt, tag=t) for t in tags]
    outs = {t: np.zeros(t, np.int64) for t in tags}
    recvs = [weft.P2POp("recv", outs[t], prv, tag=t) for t in sorted(tags, reverse=True)]
    req = comm.p2p_group(sends + recvs, async_op=True)
    req.wait()
    for t in tags:
        assert (outs[t] == 10 * prv + t).all(), (t, outs[t])
    # send/recv take a tag; a group of one each.
    if rank == 0:
        comm.send(np.arange(3, dtype=np.int32), 1, tag=4)
    elif rank == 1:
        got = comm.recv(np.zeros(3, np.int32), 0, tag=4)
        assert np.array_equal(got, np.arange(3)), got
    with pytest_raises(ValueError, "'send' or 'recv'"):
        weft.P2POp("sned", a, nxt)


def pytest_raises(exc, text):
    class _Ctx:
        def __enter__(self):
            return self

        def __exit__(self, et, e, tb):
            if et is None:
                raise AssertionError(f"no {exc.__name__} raised")
            assert issubclass(et, exc) and text in str(e), (et, e)
            return True
    return _Ctx()


def check_mismatch_tag(c):
    comm = c["comm"]
    if comm.size < 2:
        raise Skip("needs 2 ranks")
    d = comm.split(0 if comm.rank < 2 else None)
    try:
        if d is not None and d.rank == 0:
            d.send(np.ones(4, np.float32), 1, tag=1)
        elif d is not None:
            try:
                d.recv(np.zeros(4, np.float32), 0, tag=2)
            except weft.WeftError as e:
                assert e.code == weft.Result.MISMATCH, e
                assert "tag 1" in e.message and "tag 2" in e.message, e.message
            else:
                raise AssertionError("a receive with another tag returned")
    finally:
        comm.barrier()  # the sender gives up its communicator only once the receiver has looked
        if d is not None:
            d.abort()


def check_barrier(c):
    comm = c["comm"]
    for _ in range(3):
        assert comm.barrier() is None


def check_send_recv(c):
    comm = c["comm"]
    if comm.size < 2:
        raise Skip("needs 2 ranks")
    size, rank = comm.size, comm.rank
    nxt, prv = (rank + 1) % size, (rank - 1) % size
    msg = np.arange(1000, dtype=np.float64) + rank
    got = np.zeros(1000, np.float64)
    # Even ranks send first, odd ranks receive first: a ring of blocking calls cannot deadlock.
    if rank % 2 == 0:
        comm.send(msg, nxt)
        comm.recv(got, prv)
    else:
        comm.recv(got, prv)
        comm.send(msg, nxt)
    assert np.array_equal(got, np.arange(1000, dtype=np.float64) + prv), got[:4]
    # Asynchronous, both directions issued at once.
    got2 = np.zeros(10, np.int32)
    reqs = [comm.send(np.full(10, rank, np.int32), nxt, async_op=True),
            comm.recv(got2, prv, async_op=True)] if rank % 2 == 0 else [
        comm.recv(got2, prv, async_op=True), comm.send(np.full(10, rank, np.int32), nxt,
                                                       async_op=True)]
    for r in reqs:
        r.wait(timeout=20)
    assert (got2 == prv).all(), got2


def check_async(c):
    comm = c["comm"]
    size = comm.size
    arrays = [np.full(2000, k + comm.rank, np.float32) for k in range(5)]
    reqs = [comm.all_reduce(a, async_op=True) for a in arrays]
    assert all(isinstance(r, weft.Request) for r in reqs)
    # Wait in reverse: requests complete in issue order, whichever is waited first.
    for k in reversed(range(5)):
        assert reqs[k].wait() is arrays[k]
        assert reqs[k].done and reqs[k].test()
        assert (arrays[k] == size * k + size * (size - 1) / 2).all()
    r = comm.broadcast(np.zeros(3), root=0, async_op=True)
    deadline = time.monotonic() + 20
    while not r.test():
        assert time.monotonic() < deadline, "test() never saw the broadcast complete"
        time.sleep(0.001)
    assert r.wait(timeout=1) is not None
    # Waited on by another thread while this one issues the next call.
    x = np.ones(100, np.int64)
    r = comm.all_reduce(x, async_op=True)
    box = []
    t = threading.Thread(target=lambda: box.append(r.wait()))
    t.start()
    comm.barrier()
    t.join(20)
    assert box and (x == size).all()
    # A barrier that cannot complete yet: wait(timeout) says so and the request stays valid.
    # Rank 1 enters it only after a message that rank 0 sends on another communicator once its
    # wait has timed out (on the same one, the send would queue behind the barrier).
    if size > 1:
        d = comm.dup()
        if comm.rank == 0:
            r = d.barrier(async_op=True)
            try:
                r.wait(timeout=0.05)
            except TimeoutError as e:
                assert "Timed out" in str(e), str(e)
            else:
                raise AssertionError("barrier completed before rank 1 entered it")
            assert not r.done
            comm.send(np.zeros(1, np.int8), 1)
            r.wait(timeout=20)
        else:
            if comm.rank == 1:
                comm.recv(np.zeros(1, np.int8), 0)
            d.barrier()
        d.destroy()


def check_algorithms(c):
    comm = c["comm"]
    for algo in ("ring", "tree", "double_tree", "recursive_doubling", "rabenseifner"):
        x = values(comm.rank, "float32", "sum", 1000)
        comm.all_reduce(x, algo=algo)
        assert np.array_equal(x, expected(comm.size, "float32", "sum", 1000)), algo
    try:
        comm.all_reduce(np.ones(3), algo="spiral")
    except ValueError as e:
        assert "spiral" in str(e)
    else:
        raise AssertionError("unknown algorithm accepted")


def check_split_dup(c):
    comm = c["comm"]
    size, rank = comm.size, comm.rank
    sub = comm.split(rank % 2, key=-rank)  # reversed order inside each color
    members = [r for r in range(size) if r % 2 == rank % 2]
    assert sub.size == len(members), (sub.size, members)
    assert sub.rank == len(members) - 1 - members.index(rank), sub.rank
    x = np.array([rank], np.int64)
    sub.all_reduce(x)
    assert x[0] == sum(members)
    sub.destroy()
    none = comm.split(None if rank == 0 else 1)
    assert (none is None) == (rank == 0)
    if none is not None:
        assert none.size == size - 1
        none.destroy()
    with comm.dup() as d:
        assert (d.rank, d.size) == (rank, size)
        y = np.ones(3, np.float64)
        d.all_reduce(y)
        assert (y == size).all()
    assert d.closed


def check_zero_count(c):
    comm = c["comm"]
    x = np.zeros(0, np.float32)
    comm.all_reduce(x)
    comm.broadcast(x, root=0)
    comm.gather(x, np.zeros(0, np.float32) if comm.rank == 0 else None, root=0)
    comm.scatter(x if comm.rank == 0 else None, np.zeros(0, np.float32), root=0)


def _mismatch(comm, call_for_rank):
    """Runs a collective whose arguments differ by rank on a dup; returns the WeftError."""
    d = comm.dup()
    # Every rank holds the dup before any aborts it: a rank still joining would fail its dup.
    comm.barrier()
    try:
        t0 = time.monotonic()
        try:
            call_for_rank(d)
        except weft.WeftError as e:
            err = e
        else:
            raise AssertionError("a mismatched collective returned")
        assert time.monotonic() - t0 < 14, "the mismatch took the whole WEFT_TIMEOUT_MS to fail"
        # The communicator is failed from now on; later calls say so at once.
        try:
            d.barrier()
        except weft.WeftError as e:
            assert e.code in (weft.Result.COMM_FAILED, weft.Result.REMOTE), e
        else:
            raise AssertionError("a failed communicator ran a barrier")
        return err
    finally:
        d.abort()


def _gather_codes(comm, err):
    codes = np.zeros(comm.size, np.int32)
    codes[comm.rank] = int(err.code)
    comm.all_reduce(codes)
    return codes


def check_mismatch_count(c):
    comm = c["comm"]
    if comm.size < 2:
        raise Skip("needs 2 ranks")
    err = _mismatch(comm, lambda d: d.all_reduce(np.ones(4 + d.rank, np.float32)))
    assert isinstance(err.message, str) and f"rank {comm.rank}" in err.message, err.message
    codes = _gather_codes(comm, err)
    assert weft.Result.MISMATCH in codes, codes  # at least the rank that noticed says why
    if err.code == weft.Result.MISMATCH:
        # Either the call descriptions disagreed (both counts named), or a transport saw a
        # message of the wrong length first (both byte counts named): 4 floats more per rank.
        counts = set(re.findall(r"count (\d+)", err.message))
        sizes = re.search(r"sent (\d+) bytes where this rank expected (\d+)", err.message)
        if sizes:
            assert int(sizes.group(1)) != int(sizes.group(2)), err.message
        else:
            assert str(4 + comm.rank) in counts and len(counts) >= 2, err.message


def check_mismatch_dtype(c):
    comm = c["comm"]
    if comm.size < 2:
        raise Skip("needs 2 ranks")
    dtypes = [np.float32, np.int32]
    err = _mismatch(comm, lambda d: d.all_reduce(np.ones(8, dtypes[d.rank % 2])))
    codes = _gather_codes(comm, err)
    assert weft.Result.MISMATCH in codes, codes
    if err.code == weft.Result.MISMATCH:
        assert "float32" in err.message and "int32" in err.message, err.message


def check_abort_unblocks_peers(c):
    comm = c["comm"]
    if comm.size < 2:
        raise Skip("needs 2 ranks")
    d = comm.dup()
    # Peers learn of an abort through their connections to the aborting rank; weft connects
    # lazily, so the same collective runs once first to open them.
    d.all_reduce(np.ones(10, np.float32))
    comm.barrier()
    if comm.rank == 0:
        d.abort()
        return
    t0 = time.monotonic()
    try:
        d.all_reduce(np.ones(10, np.float32))
    except weft.WeftError as e:
        assert e.code != weft.Result.SUCCESS and e.message, e
    else:
        raise AssertionError("all_reduce with an aborted rank 0 returned")
    finally:
        d.abort()
    assert time.monotonic() - t0 < 14, "peers waited for the timeout instead of failing promptly"


def check_abort_from_another_thread(c):
    """What torch's watchdog does to a hung collective: abort from its own thread."""
    comm = c["comm"]
    if comm.size < 2:
        raise Skip("needs 2 ranks")
    d = comm.dup()
    if comm.rank != 0:
        time.sleep(1.5)  # never joins rank 0's all_reduce on d
        d.abort()
        comm.barrier()
        return
    outcome = {}

    def call():
        try:
            d.all_reduce(np.ones(1000, np.float32))
            outcome["error"] = None
        except weft.WeftError as e:
            outcome["error"] = e
        outcome["at"] = time.monotonic()

    caller = threading.Thread(target=call)
    caller.start()
    time.sleep(0.3)
    assert "at" not in outcome, "the all_reduce returned before the abort"
    t0 = time.monotonic()
    d.abort()
    caller.join(10)
    assert not caller.is_alive(), "the blocked all_reduce did not return after the abort"
    e = outcome["error"]
    assert e is not None and e.code == weft.Result.ABORTED and "aborted" in str(e), e
    assert outcome["at"] - t0 < 2, f"the call returned {outcome['at'] - t0:.1f} s after abort"
    d.abort()  # again: harmless
    comm.barrier()


def check_local_argument_errors(c):
    comm = c["comm"]
    cases = [
        (lambda: comm.broadcast(np.ones(2), root=comm.size + 3), weft.WeftError, "root"),
        (lambda: comm.all_reduce(np.ones(2), np.ones(3)), ValueError, "recvbuf"),
        (lambda: comm.all_gather(np.ones(2), np.ones(2 * comm.size + 1)), ValueError, "all_gather"),
        (lambda: comm.gather(np.ones(2), np.ones(2 * comm.size + 1), root=comm.rank), ValueError,
         "gather"),
        (lambda: comm.gather(np.ones(2), root=comm.rank), ValueError, "root needs a recvbuf"),
        (lambda: comm.scatter(np.ones(2 * comm.size - 1), np.ones(2), root=comm.rank), ValueError,
         "scatter"),
        (lambda: comm.scatter(None, np.ones(2), root=comm.rank), ValueError,
         "root needs a sendbuf"),
        (lambda: comm.gather(np.ones(2), np.ones(2), root=comm.size + 3), weft.WeftError, "root"),
        (lambda: comm.all_to_all(np.ones(2 * comm.size), np.ones(2 * comm.size + 1)), ValueError,
         "all_to_all"),
        (lambda b=np.ones(2 * comm.size): comm.all_to_all(b, b), weft.WeftError, "overlap"),
        (lambda: comm.all_reduce(np.ones(2, np.int16)), TypeError, "int16"),
        (lambda: comm.all_reduce(np.ones(2, np.complex64)), TypeError, "complex64"),
        (lambda: comm.all_reduce(np.ones((4, 4))[:, 1]), ValueError, "contiguous"),
        (lambda: comm.all_reduce(bytes(4)), ValueError, "read-only"),
        (lambda: comm.all_reduce(np.ones(2), op="xor"), ValueError, "xor"),
        (lambda: comm.all_reduce(array.array("h", [1])), TypeError, "format"),
        (lambda: comm.all_reduce(object()), TypeError, "buffer protocol"),
    ]
    for fn, exc, text in cases:
        try:
            fn()
        except exc as e:
            assert text in str(e), (text, str(e))
            if isinstance(e, weft.WeftError):
                assert e.code == weft.Result.INVALID_ARGUMENT, e
        else:
            raise AssertionError(f"no {exc.__name__} mentioning {text!r}")
    # None of these reached the other ranks: the communicator still works.
    x = np.ones(3, np.int32)
    comm.all_reduce(x)
    assert (x == comm.size).all()


def check_destroyed_comm(c):
    comm = c["comm"]
    d = comm.dup()
    d.destroy()
    d.destroy()  # twice is harmless
    try:
        d.all_reduce(np.ones(1))
    except weft.WeftError as e:
        assert "destroyed" in str(e)
    else:
        raise AssertionError("a destroyed communicator ran a collective")


def main():
    comm = weft.Comm()  # RANK, WORLD_SIZE, MASTER_ADDR, MASTER_PORT from the launcher
    harness.run(globals(), {"comm": comm})
    comm.destroy()


if __name__ == "__main__":
    main()
