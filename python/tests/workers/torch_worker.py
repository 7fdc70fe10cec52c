"""One rank of test_torch_backend.py: the "weft" torch.distributed backend next to gloo.

weft is the default group; a gloo group of the same ranks gives the reference results (where
gloo lacks an operation or dtype, e.g. reduce_scatter in torch 1.13, the result is checked against
the reduction computed locally from every rank's known input). Inputs are small integers, exact in
every dtype, so results compare exactly whatever order the algorithms add in.
"""
import os
import threading
import time

import harness
from harness import Skip

import torch
import torch.distributed as dist

import weft
import weft.torch  # registers "weft"

R = dist.ReduceOp
DTYPES = [torch.int8, torch.uint8, torch.int32, torch.int64, torch.float16, torch.bfloat16,
          torch.float32, torch.float64]
OPS = [R.SUM, R.PRODUCT, R.MIN, R.MAX]
N = 29
TORCH2 = int(torch.__version__.split(".")[0]) >= 2


def data(rank, dtype, op=R.SUM, n=N):
    i = torch.arange(n)
    if op == R.PRODUCT:
        v = (rank + i) % 3 + 1
    elif dtype == torch.uint8:
        v = (rank * 7 + i) % 11
    else:
        v = (rank * 7 + i) % 11 - 5
    return v.to(dtype)


def local_reduce(size, dtype, op, n=N):
    parts = torch.stack([data(r, dtype, op, n).double() for r in range(size)])
    if op == R.SUM:
        out = parts.sum(0)
    elif op == R.PRODUCT:
        out = parts.prod(0)
    elif op == R.MIN:
        out = parts.min(0).values
    elif op == R.MAX:
        out = parts.max(0).values
    else:
        out = parts.sum(0) / size
    return out.to(dtype)


def reference(c, gloo_call, local):
    """gloo's answer, or (if gloo does not support it) the local one."""
    try:
        return gloo_call(c["gloo"])
    except RuntimeError as e:  # gloo: "does not support", or "Invalid scalar type" (bfloat16)
        text = str(e).lower()
        if "support" not in text and "invalid scalar type" not in text:
            raise
        return local()


def same(a, b, what):
    assert a.dtype == b.dtype and a.shape == b.shape, (what, a.dtype, b.dtype, a.shape, b.shape)
    assert torch.equal(a, b), (what, a, b)


def check_backend_registered(c):
    assert dist.get_backend() == "weft", dist.get_backend()
    assert hasattr(dist.Backend, "WEFT")
    pg = dist.distributed_c10d._get_default_group()
    assert isinstance(pg, weft.torch.ProcessGroupWeft), type(pg)
    assert (pg.rank(), pg.size()) == (c["rank"], c["size"])
    assert (pg.comm.rank, pg.comm.size) == (c["rank"], c["size"])
    assert dist.get_rank() == c["rank"] and dist.get_world_size() == c["size"]


def check_all_reduce_dtypes_ops(c):
    for dtype in DTYPES:
        for op in OPS:
            t = data(c["rank"], dtype, op)
            dist.all_reduce(t, op=op)

            def gloo(g, dtype=dtype, op=op):
                u = data(c["rank"], dtype, op)
                dist.all_reduce(u, op=op, group=g)
                return u

            same(t, reference(c, gloo, lambda: local_reduce(c["size"], dtype, op)), (dtype, op))


def check_all_reduce_avg(c):
    size = c["size"]
    for dtype in (torch.float16, torch.bfloat16, torch.float32, torch.float64):
        t = data(c["rank"], dtype)
        dist.all_reduce(t, op=R.AVG)
        # gloo has no AVG: its SUM, divided here.
        def gloo(g, dtype=dtype):
            u = data(c["rank"], dtype)
            dist.all_reduce(u, group=g)
            return u

        total = reference(c, gloo, lambda: local_reduce(size, dtype, R.SUM))
        want = (total.double() / size).to(dtype)
        tol = {torch.float16: 1e-3, torch.bfloat16: 8e-3}.get(dtype, 1e-12)
        assert torch.allclose(t.double(), want.double(), rtol=tol, atol=0), (dtype, t, want)
    for dtype in (torch.int8, torch.uint8, torch.int32, torch.int64):
        try:
            dist.all_reduce(torch.ones(3, dtype=dtype), op=R.AVG)
        except TypeError as e:
            assert "AVG" in str(e) and str(dtype) in str(e), e
        else:
            raise AssertionError(f"AVG on {dtype} was accepted")


def check_all_reduce_fp8(c):
    """float8_e4m3fn and float8_e5m2 (torch >= 2.1): sums of small integers are exact; past the
    largest finite value a sum saturates (torch's own conversion would give NaN or inf)."""
    size = c["size"]
    if getattr(torch, "float8_e4m3fn", None) is None:
        raise Skip(f"torch {torch.__version__} has no float8 dtypes")
    for name, top in (("float8_e4m3fn", 448.0), ("float8_e5m2", 57344.0)):
        dtype = getattr(torch, name)
        t = torch.ones(5, dtype=torch.float32).to(dtype)
        dist.all_reduce(t)
        assert torch.equal(t.float(), torch.full((5,), float(size))), (name, t)
        big = torch.full((3,), top).to(dtype)
        dist.all_reduce(big)
        assert torch.equal(big.float(), torch.full((3,), top)), (name, big)
        m = torch.tensor([float(c["rank"]), -float(c["rank"])]).to(dtype)
        dist.all_reduce(m, op=R.MAX)
        assert torch.equal(m.float(), torch.tensor([size - 1.0, 0.0])), (name, m)


def check_broadcast(c):
    for dtype in DTYPES:
        for root in range(c["size"]):
            t = data(c["rank"], dtype) if c["rank"] == root else torch.zeros(N, dtype=dtype)
            dist.broadcast(t, src=root)
            same(t, data(root, dtype), (dtype, root))
    shaped = torch.arange(24, dtype=torch.float32).reshape(2, 3, 4) * (c["rank"] + 1)
    dist.broadcast(shaped, src=c["size"] - 1)
    same(shaped, torch.arange(24, dtype=torch.float32).reshape(2, 3, 4) * c["size"], "3-d")


def check_reduce(c):
    for root in range(c["size"]):
        for op in (R.SUM, R.MAX, R.PRODUCT):
            t = data(c["rank"], torch.int64, op)
            dist.reduce(t, dst=root, op=op)
            if c["rank"] == root:
                u = data(c["rank"], torch.int64, op)
                dist.reduce(u, dst=root, op=op, group=c["gloo"])
                same(t, u, (root, op))
                same(t, local_reduce(c["size"], torch.int64, op), (root, op, "local"))
            else:
                dist.reduce(data(c["rank"], torch.int64, op), dst=root, op=op, group=c["gloo"])


def check_all_gather(c):
    size, rank = c["size"], c["rank"]
    for dtype in DTYPES:
        outs = [torch.zeros(3, 5, dtype=dtype) for _ in range(size)]
        dist.all_gather(outs, data(rank, dtype, n=15).reshape(3, 5))
        for r in range(size):
            same(outs[r], data(r, dtype, n=15).reshape(3, 5), (dtype, r))
    into = getattr(dist, "all_gather_into_tensor", None) or dist._all_gather_base
    out = torch.zeros(size * 7, dtype=torch.float64)
    into(out, data(rank, torch.float64, n=7))
    ref = torch.zeros(size * 7, dtype=torch.float64)
    try:
        into(ref, data(rank, torch.float64, n=7), group=c["gloo"])
    except RuntimeError:
        ref = torch.cat([data(r, torch.float64, n=7) for r in range(size)])
    same(out, ref, "all_gather_into_tensor")
    same(out, torch.cat([data(r, torch.float64, n=7) for r in range(size)]), "local")


def check_reduce_scatter(c):
    size, rank = c["size"], c["rank"]
    for dtype in (torch.int32, torch.float32, torch.bfloat16):
        for op in (R.SUM, R.MAX):
            full = data(rank, dtype, op, n=4 * size)
            out = torch.zeros(4, dtype=dtype)
            dist.reduce_scatter(out, list(full.chunk(size)), op=op)
            want = local_reduce(size, dtype, op, n=4 * size)[4 * rank:4 * rank + 4]
            same(out, want, (dtype, op))
    tensor_form = getattr(dist, "reduce_scatter_tensor", None) or dist._reduce_scatter_base
    out = torch.zeros(3, dtype=torch.int64)
    tensor_form(out, data(rank, torch.int64, n=3 * size))
    same(out, local_reduce(size, torch.int64, R.SUM, n=3 * size)[3 * rank:3 * rank + 3], "tensor")


def check_barrier(c):
    for _ in range(3):
        dist.barrier()
    w = dist.barrier(async_op=True)
    w.wait()
    assert w.is_completed()


def check_send_recv(c):
    size, rank = c["size"], c["rank"]
    if size < 2:
        raise Skip("needs 2 ranks")
    nxt, prv = (rank + 1) % size, (rank - 1) % size
    got = torch.zeros(100, dtype=torch.float32)
    if rank % 2 == 0:
        dist.send(torch.arange(100, dtype=torch.float32) + rank, nxt)
        src = dist.recv(got, prv)
    else:
        src = dist.recv(got, prv)
        dist.send(torch.arange(100, dtype=torch.float32) + rank, nxt)
    assert src == prv, src
    same(got, torch.arange(100, dtype=torch.float32) + prv, "recv")
    got = torch.zeros(10, dtype=torch.int64)
    works = [dist.isend(torch.full((10,), rank, dtype=torch.int64), nxt),
             dist.irecv(got, prv)]
    if rank % 2:
        works.reverse()
    for w in works:
        w.wait()
    same(got, torch.full((10,), prv, dtype=torch.int64), "irecv")


def check_async_works(c):
    size, rank = c["size"], c["rank"]
    ts = [torch.full((1000,), float(k + rank)) for k in range(4)]
    works = [dist.all_reduce(t, async_op=True) for t in ts]
    for k in reversed(range(4)):
        assert works[k].wait()
        assert works[k].is_completed()
        same(ts[k], torch.full((1000,), float(size * k + size * (size - 1) // 2)), k)
    # The future completes by itself (DDP's reducer waits on it without calling into Python).
    t = torch.ones(8)
    fut = dist.all_reduce(t, async_op=True).get_future()
    chained = fut.then(lambda f: f.value()[0] * 2)
    deadline = time.monotonic() + 20
    while not fut.done():
        assert time.monotonic() < deadline, "the future never completed on its own"
        time.sleep(0.001)
    assert fut.value()[0] is t or torch.equal(fut.value()[0], t)
    same(chained.wait(), torch.full((8,), 2.0 * size), "then")
    # Several kinds outstanding at once, waited on in issue order.
    b = torch.full((5,), float(rank))
    outs = [torch.zeros(2) for _ in range(size)]
    w1 = dist.broadcast(b, src=0, async_op=True)
    w2 = dist.all_gather(outs, torch.full((2,), float(rank)), async_op=True)
    w3 = dist.barrier(async_op=True)
    for w in (w1, w2, w3):
        w.wait()
    same(b, torch.zeros(5), "async broadcast")
    for r in range(size):
        same(outs[r], torch.full((2,), float(r)), "async all_gather")


def check_noncontiguous(c):
    size, rank = c["size"], c["rank"]
    m = (torch.arange(12, dtype=torch.float32).reshape(3, 4) + rank).t()  # transposed view
    assert not m.is_contiguous()
    dist.all_reduce(m)
    want = (torch.arange(12, dtype=torch.float32).reshape(3, 4) * size
            + size * (size - 1) // 2).t()
    same(m, want, "all_reduce of a transposed tensor")
    base = torch.zeros(6, 2, dtype=torch.int32)
    col = base[:, 1]
    if rank == 0:
        col.copy_(torch.arange(6, dtype=torch.int32))
    dist.broadcast(col, src=0)
    same(base[:, 1], torch.arange(6, dtype=torch.int32), "broadcast of a column")
    same(base[:, 0], torch.zeros(6, dtype=torch.int32), "the other column untouched")
    grid = torch.zeros(2, size * 2)
    outs = [grid[:, 2 * r:2 * r + 2] for r in range(size)]  # strided views into one tensor
    dist.all_gather(outs, torch.full((2, 2), float(rank)).t().t())
    for r in range(size):
        same(grid[:, 2 * r:2 * r + 2], torch.full((2, 2), float(r)), "all_gather views")
    if size > 1:
        strided = torch.zeros(8)[::2]
        if rank == 0:
            dist.send(torch.arange(4.0), 1)
        elif rank == 1:
            dist.recv(strided, 0)
            same(strided, torch.arange(4.0), "recv into a strided view")


def check_unsupported(c):
    cases = [
        (lambda: dist.all_reduce(torch.ones(2, dtype=torch.bool)), TypeError, "torch.bool"),
        # (torch 2.x broadcasts a complex tensor as its real view, 1.13 hands it over as is.)
        (lambda: dist.reduce(torch.ones(2, dtype=torch.bool), 0), TypeError, "torch.bool"),
        (lambda: dist.broadcast(torch.ones(2, dtype=torch.int16), 0), TypeError, "int16"),
        (lambda: dist.all_reduce(torch.ones(2, dtype=torch.int32), op=R.BAND), ValueError, "BAND"),
        (lambda: dist.all_reduce(torch.ones(2, dtype=torch.int64), op=R.AVG), TypeError, "AVG"),
    ]
    for fn, exc, text in cases:
        try:
            fn()
        except exc as e:
            assert text in str(e) and "weft" in str(e), (text, str(e))
        else:
            raise AssertionError(f"no {exc.__name__} mentioning {text!r}")
    # Refused before anything reached the other ranks: the group still works.
    t = torch.ones(3)
    dist.all_reduce(t)
    same(t, torch.full((3,), float(c["size"])), "after refusals")
    # torch itself turns a complex SUM into a float one (view_as_real), which weft carries.
    z = torch.full((2,), complex(1, c["rank"]), dtype=torch.complex64)
    dist.all_reduce(z)
    size = c["size"]
    same(z, torch.full((2,), complex(size, size * (size - 1) / 2), dtype=torch.complex64), "complex")


def check_new_group(c):
    size, rank = c["size"], c["rank"]
    members = sorted({0, size - 1})
    g = dist.new_group(members, backend="weft")
    if rank in members:
        t = torch.tensor([rank + 1.0])
        dist.all_reduce(t, group=g)
        same(t, torch.tensor([float(sum(m + 1 for m in members))]), "subgroup")
        dist.destroy_process_group(g)
    t = torch.ones(1)
    dist.all_reduce(t)
    same(t, torch.tensor([float(size)]), "world after subgroup")


def check_mismatch_raises(c):
    size, rank = c["size"], c["rank"]
    if size < 2:
        raise Skip("needs 2 ranks")
    g = dist.new_group(list(range(size)), backend="weft")
    dist.barrier()
    t0 = time.monotonic()
    try:
        dist.all_reduce(torch.ones(4 + rank), group=g)
    except Exception as e:  # a WeftError, or torch's RuntimeError carrying its text
        msg = str(e)
    else:
        raise AssertionError("an all_reduce with counts that differ by rank returned")
    assert time.monotonic() - t0 < 14, "the mismatch took the whole WEFT_TIMEOUT_MS"
    assert "rank" in msg and ("count" in msg or "abort" in msg or "failed" in msg), msg
    flags = torch.tensor([1.0 if "called all_reduce" in msg else 0.0])
    dist.all_reduce(flags)  # the default group is untouched
    assert flags.item() >= 1, "no rank named the mismatching call"
    try:
        dist.barrier(group=g)
    except Exception as e:
        assert "failed" in str(e) or "abort" in str(e), e
    else:
        raise AssertionError("a failed group ran a barrier")
    g.abort()


def check_abort_from_another_thread(c):
    """torch's watchdog aborts a group whose collective hangs, from its own thread: the call
    blocked in the group raises at once instead of waiting for the timeout."""
    size, rank = c["size"], c["rank"]
    if size < 2:
        raise Skip("needs 2 ranks")
    g = dist.new_group(list(range(size)), backend="weft")
    dist.barrier(group=g)  # every rank's group is connected
    if rank != 0:
        time.sleep(1.5)  # never joins rank 0's all_reduce on g
        g.abort()
        dist.barrier()
        return
    outcome = {}

    def call():
        try:
            dist.all_reduce(torch.ones(1000), group=g)
            outcome["error"] = None
        except Exception as e:  # a WeftError, or torch's RuntimeError carrying its text
            outcome["error"] = e
        outcome["at"] = time.monotonic()

    caller = threading.Thread(target=call)
    caller.start()
    time.sleep(0.3)
    assert "at" not in outcome, "the all_reduce returned before the abort"
    t0 = time.monotonic()
    g.abort()
    caller.join(10)
    assert not caller.is_alive(), "the blocked all_reduce did not return after the abort"
    assert outcome["error"] is not None and "abort" in str(outcome["error"]), outcome["error"]
    assert outcome["at"] - t0 < 2, f"the call returned {outcome['at'] - t0:.1f} s after abort"
    dist.barrier()


class _Recorder:
    """The communicator under a group, recording how each call was issued (async_op)."""

    def __init__(self, comm):
        self.comm, self.calls = comm, []

    def __getattr__(self, name):
        method = getattr(self.comm, name)

        def call(*args, **kwargs):
            self.calls.append((name, kwargs.get("async_op", False)))
            return method(*args, **kwargs)

        return call


def check_who_waits(c):
    # A call torch waits on at once runs on the caller's thread (torch 2.x says so with
    # opts.asyncOp), an async one's request is waited on by whoever waits on its Work first, and
    # only a Work whose future is taken goes to the group's completion thread.
    size, rank = c["size"], c["rank"]
    pg = dist.distributed_c10d._get_default_group()
    recorder = _Recorder(pg._calls._comm)
    runs = []
    run = pg._completion.run

    def recording_run(job):
        runs.append(threading.current_thread())
        run(job)

    pg._calls._comm, pg._completion.run = recorder, recording_run
    try:
        t = torch.full((3,), float(rank))
        dist.all_reduce(t)
        same(t, torch.full((3,), float(size * (size - 1) // 2)), "synchronous all_reduce")
        m = (torch.arange(6.0).reshape(2, 3) + rank).t()  # not contiguous: copied back
        dist.all_reduce(m)
        same(m, (torch.arange(6.0).reshape(2, 3) * size + size * (size - 1) // 2).t(),
             "synchronous all_reduce of a transposed tensor")
        dist.barrier()
        sync = [a for _, a in recorder.calls]
        assert len(sync) == 3, recorder.calls
        if TORCH2:
            assert sync == [False] * 3, recorder.calls
            assert runs == [], "a synchronous call went through a request"
        else:  # torch 1.13 does not say whether it will wait at once
            assert sync == [True] * 3, recorder.calls
            assert runs == [threading.current_thread()] * 3, runs
        del recorder.calls[:], runs[:]
        t = torch.full((4,), float(rank))
        w = dist.all_reduce(t, async_op=True)
        assert w.wait()
        same(t, torch.full((4,), float(size * (size - 1) // 2)), "async all_reduce")
        assert recorder.calls == [("all_reduce", True)], recorder.calls
        assert runs == [threading.current_thread()], runs
        del runs[:]
        fut = dist.all_reduce(torch.ones(2), async_op=True).get_future()
        fut.wait()
        assert len(runs) == 1 and runs[0].name.startswith("weft-pg-rank"), runs
    finally:
        pg._calls._comm, pg._completion.run = recorder.comm, run


def check_works_released(c):
    # Every Work above was waited on (or its future taken): none is left referenced.
    pg = dist.distributed_c10d._get_default_group()
    assert len(pg._completion.keeper) == 0, len(pg._completion.keeper)


def main():
    rank, size = int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"])
    if os.environ.get("WEFT_TEST_INIT") == "tcp":
        url = f"tcp://127.0.0.1:{os.environ['MASTER_PORT']}"
        # tcp:// needs no MASTER_* variables: weft's address comes from the store's host.
        for k in ("MASTER_ADDR", "MASTER_PORT"):
            os.environ.pop(k)
        dist.init_process_group("weft", init_method=url, rank=rank, world_size=size)
    else:
        dist.init_process_group("weft")  # env://
    gloo = dist.new_group(list(range(size)), backend="gloo")
    harness.run(globals(), {"rank": rank, "size": size, "gloo": gloo})
    dist.barrier()
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
