"""One rank of test_torch2.py: what torch 2.x reaches the backend through, next to gloo on the
same inputs: the 2.13 method names and the old ones, the coalesced forms, gather and scatter,
all_to_all, AVG and PREMUL_SUM, batch_isend_irecv, the object collectives, the functional
collectives, DTensor's redistribute, FSDP2's fully_shard, DeviceMesh sub-groups, and the refusals.

Checks that need torch 2.x skip on 1.13.
"""
import datetime
import os

import harness
from harness import Skip

import torch
import torch.distributed as dist
import torch.nn as nn

import weft.torch  # noqa: F401 -- registers "weft"

R = dist.ReduceOp
TORCH2 = int(torch.__version__.split(".")[0]) >= 2


def need_torch2():
    if not TORCH2:
        raise Skip(f"needs torch 2.x, this is {torch.__version__}")


def same(a, b, what):
    assert a.dtype == b.dtype and a.shape == b.shape, (what, a.dtype, b.dtype, a.shape, b.shape)
    assert torch.equal(a, b), (what, a, b)


def ints(rank, n, dtype=torch.float32, salt=0):
    return ((torch.arange(n) * 3 + rank * 7 + salt) % 13 - 6).to(dtype)


def both(c, fn, local=None):
    """fn(group) on weft's default group and on gloo's; returns the two results. Where gloo
    lacks the operation (torch 1.13's gloo has no all_gather_into_tensor), local() stands in."""
    mine = fn(None)
    try:
        return mine, fn(c["gloo"])
    except RuntimeError as e:
        if local is None or "support" not in str(e):
            raise
        return mine, local()


def check_new_and_old_names(c):
    size, rank = c["size"], c["rank"]
    pg = dist.distributed_c10d._get_default_group()
    names = [("all_gather_single", "_allgather_base"),
             ("reduce_scatter_single", "_reduce_scatter_base"),
             ("all_to_all_single", "alltoall_base"),
             ("all_gather_single_coalesced", "allgather_into_tensor_coalesced"),
             ("reduce_scatter_single_coalesced", "reduce_scatter_tensor_coalesced")]
    for new, old in names:
        assert getattr(type(pg), new) is getattr(type(pg), old), (new, old)
    inp = ints(rank, 5)
    for name in ("all_gather_single", "_allgather_base"):
        out = torch.zeros(size * 5)
        getattr(pg, name)(out, inp).wait()
        same(out, torch.cat([ints(r, 5) for r in range(size)]), name)
    for name in ("reduce_scatter_single", "_reduce_scatter_base"):
        out = torch.zeros(3)
        getattr(pg, name)(out, ints(rank, 3 * size)).wait()
        want = sum(ints(r, 3 * size) for r in range(size))[3 * rank:3 * rank + 3]
        same(out, want, name)
    # What the dist functions call on this torch, against gloo.
    a, b = both(c, lambda g: _into(g, size, rank),
                lambda: torch.cat([ints(r, 4, torch.float64) for r in range(size)]))
    same(a, b, "all_gather_into_tensor vs gloo")


def _into(group, size, rank):
    into = getattr(dist, "all_gather_into_tensor", None) or dist._all_gather_base
    out = torch.zeros(size * 4, dtype=torch.float64)
    into(out, ints(rank, 4, torch.float64), group=group)
    return out


def check_all_reduce_every_op(c):
    rank = c["rank"]
    ops = [R.SUM, R.PRODUCT, R.MIN, R.MAX, R.AVG]
    for op in ops:
        for dtype in (torch.float32, torch.float64):
            def run(g):
                t = ints(rank, 17, dtype) if op != R.PRODUCT else ints(rank, 17, dtype) % 3 + 1
                dist.all_reduce(t, op=op, group=g)
                return t
            a, b = both(c, run) if op != R.AVG else (run(None), None)
            if b is None:  # gloo has no AVG: the mean of the known inputs
                b = sum(ints(r, 17, torch.float64) for r in range(c["size"])) / c["size"]
                b = b.to(dtype)
            same(a, b, (op, dtype))


def check_premul_sum(c):
    make = getattr(dist, "_make_nccl_premul_sum", None)
    if make is None:
        raise Skip("this torch has no PREMUL_SUM")
    size, rank = c["size"], c["rank"]
    if not hasattr(make(0.5), "factor"):
        # torch 1.13 keeps the factor where a Python backend cannot read it: refused, by name.
        try:
            dist.all_reduce(ints(rank, 9), op=make(0.5))
        except ValueError as e:
            assert "PREMUL_SUM" in str(e) and "torch" in str(e), str(e)
        else:
            raise AssertionError("PREMUL_SUM without a readable factor was not refused")
        return
    want = sum(ints(r, 9) for r in range(size)) * 0.5
    for factor in (0.5, torch.tensor(0.5)):
        t = ints(rank, 9)
        dist.all_reduce(t, op=make(factor))
        same(t, want, ("all_reduce", factor))
        rs = getattr(dist, "reduce_scatter_tensor", None)
        if rs is not None:
            inp = torch.cat([ints(rank, 9)] * size)
            keep = inp.clone()
            out = torch.zeros(9)
            rs(out, inp, op=make(factor))
            same(out, want, ("reduce_scatter_tensor", factor))
            same(inp, keep, "the input is left as it was")


def check_coalesced(c):
    size, rank = c["size"], c["rank"]
    pg = dist.distributed_c10d._get_default_group()
    ins = [ints(rank, 3), ints(rank, 5, salt=1).reshape(5, 1)]
    outs = [torch.zeros(size * 3), torch.zeros(size * 5, 1)]
    pg.all_gather_single_coalesced(outs, ins).wait()
    same(outs[0], torch.cat([ints(r, 3) for r in range(size)]), "ag 0")
    same(outs[1], torch.cat([ints(r, 5, salt=1).reshape(5, 1) for r in range(size)]), "ag 1")
    ins = [ints(rank, 2 * size), ints(rank, 3 * size, salt=2)]
    outs = [torch.zeros(2), torch.zeros(3)]
    opts = dist.ReduceScatterOptions()
    opts.reduceOp = R.MAX
    pg.reduce_scatter_single_coalesced(outs, ins, opts).wait()
    full0 = torch.stack([ints(r, 2 * size) for r in range(size)]).max(0).values
    full1 = torch.stack([ints(r, 3 * size, salt=2) for r in range(size)]).max(0).values
    same(outs[0], full0[2 * rank:2 * rank + 2], "rs 0")
    same(outs[1], full1[3 * rank:3 * rank + 3], "rs 1")

    def arc(g):
        ts = [ints(rank, 4), ints(rank, 6, salt=3)]
        dist.all_reduce_coalesced(ts, group=g)
        return torch.cat(ts)

    a, b = both(c, arc)
    same(a, b, "all_reduce_coalesced vs gloo")

    def agc(g):
        outs = [[torch.zeros(2), torch.zeros(3)] for _ in range(size)]
        dist.all_gather_coalesced(outs, [ints(rank, 2), ints(rank, 3, salt=4)], group=g)
        return torch.cat([t for row in outs for t in row])

    a, b = both(c, agc)
    same(a, b, "all_gather_coalesced vs gloo")


def check_gather_scatter(c):
    size, rank = c["size"], c["rank"]
    for root in range(size):
        def g(grp):
            outs = [torch.zeros(2, 3) for _ in range(size)] if rank == root else None
            dist.gather(ints(rank, 6).reshape(2, 3), outs, dst=_dst(grp, root), group=grp)
            return torch.stack(outs) if outs else torch.zeros(0)

        a, b = both(c, g)
        same(a, b, ("gather", root))

        def s(grp):
            ins = [ints(r, 4, salt=root) for r in range(size)] if rank == root else None
            out = torch.zeros(4)
            dist.scatter(out, ins, src=_dst(grp, root), group=grp)
            return out

        a, b = both(c, s)
        same(a, b, ("scatter", root))
        same(a, ints(rank, 4, salt=root), ("scatter local", root))


def _dst(group, root):
    # gather/scatter take a global rank; both groups here hold every rank in order.
    return root


def check_all_to_all(c):
    size, rank = c["size"], c["rank"]

    def even(g):
        out = torch.zeros(size * 3)
        dist.all_to_all_single(out, ints(rank, size * 3), group=g)
        return out

    a, b = both(c, even)
    same(a, b, "all_to_all_single even")
    # Uneven: rank r sends r + k + 1 rows of 2 to rank k.
    send = [rank + k + 1 for k in range(size)]
    recv = [r + rank + 1 for r in range(size)]

    def uneven(g):
        inp = ints(rank, 2 * sum(send)).reshape(-1, 2)
        out = torch.zeros(sum(recv), 2)
        dist.all_to_all_single(out, inp, output_split_sizes=recv, input_split_sizes=send, group=g)
        return out

    a, b = both(c, uneven)
    same(a, b, "all_to_all_single uneven")

    # Lists of uneven tensors: rank r sends k + 1 elements to rank k. gloo takes lists of equal
    # sizes only (torch 1.13's gloo no lists at all), so the reference is computed here.
    ins = [ints(rank, k + 1, salt=k) for k in range(size)]
    outs = [torch.zeros(rank + 1) for _ in range(size)]
    dist.all_to_all(outs, ins)
    for r in range(size):
        same(outs[r], ints(r, rank + 1, salt=rank), ("all_to_all lists from rank", r))


def check_batch_isend_irecv_ring(c):
    size, rank = c["size"], c["rank"]
    if size == 1:
        raise Skip("a ring needs two ranks")
    for n in (7, 1 << 18):  # a small message and one of 1 MiB
        def ring(g):
            send = ints(rank, n)
            recv = torch.zeros(n)
            ops = [dist.P2POp(dist.isend, send, (rank + 1) % size, group=g),
                   dist.P2POp(dist.irecv, recv, (rank - 1) % size, group=g)]
            for w in dist.batch_isend_irecv(ops):
                w.wait()
            return recv

        a, b = both(c, ring)
        same(a, b, ("ring", n))
        same(a, ints((rank - 1) % size, n), ("ring local", n))


def check_send_recv_tags(c):
    # Tags travel with the messages; separate calls pair up in issue order, so the receiver
    # posts its tags in the order they are sent (see ProcessGroupWeft.send).
    size, rank = c["size"], c["rank"]
    if size == 1:
        raise Skip("send and recv need two ranks")

    def tagged(g):
        got = [torch.zeros(5), torch.zeros(3, dtype=torch.int64), torch.zeros(4)]
        if rank == 0:
            works = [dist.isend(ints(0, 5, salt=1), 1, group=g, tag=1),
                     dist.isend(ints(0, 3, torch.int64, salt=2), 1, group=g, tag=2)]
            dist.send(ints(0, 4, salt=3), 1, group=g, tag=0)
            for w in works:
                w.wait()
        elif rank == 1:
            works = [dist.irecv(got[0], 0, group=g, tag=1), dist.irecv(got[1], 0, group=g, tag=2)]
            for w in works:
                w.wait()
            dist.recv(got[2], 0, group=g, tag=0)
        return got

    mine, gloo = both(c, tagged)
    for k in range(3):
        same(mine[k], gloo[k], ("tag", k))
    if rank == 1:
        same(mine[1], ints(0, 3, torch.int64, salt=2), "tag 2")


def check_object_collectives(c):
    size, rank = c["size"], c["rank"]
    obj = {"rank": rank, "text": "x" * (rank * 100), "list": list(range(rank))}
    out = [None] * size
    dist.all_gather_object(out, obj)
    assert out == [{"rank": r, "text": "x" * (r * 100), "list": list(range(r))}
                   for r in range(size)], out
    objs = [f"from {rank}", 3.5, None] if rank == 0 else [None, None, None]
    dist.broadcast_object_list(objs, src=0)
    assert objs == ["from 0", 3.5, None], objs
    gathered = [None] * size if rank == 0 else None
    dist.gather_object(("g", rank), gathered, dst=0)
    if rank == 0:
        assert gathered == [("g", r) for r in range(size)], gathered
    got = [None]
    dist.scatter_object_list(got, [("s", r) for r in range(size)] if rank == 0 else None, src=0)
    assert got == [("s", rank)], got


def check_functional_collectives(c):
    need_torch2()
    import torch.distributed._functional_collectives as fc

    size, rank = c["size"], c["rank"]
    for g in (dist.group.WORLD, c["gloo"]):
        assert isinstance(g.group_name, str) and g.group_name
    x = ints(rank, 8)
    a, b = both(c, lambda g: fc.all_reduce(x, "sum", g or dist.group.WORLD) + 0)
    same(a, b, "all_reduce")
    a, b = both(c, lambda g: fc.all_gather_tensor(x, 0, g or dist.group.WORLD) + 0)
    same(a, b, "all_gather_tensor")
    y = ints(rank, 4 * size)
    a, b = both(c, lambda g: fc.reduce_scatter_tensor(y, "sum", 0, g or dist.group.WORLD) + 0)
    same(a, b, "reduce_scatter_tensor")
    a, b = both(c, lambda g: fc.all_to_all_single(y, None, None, g or dist.group.WORLD) + 0)
    same(a, b, "all_to_all_single")


def check_dtensor_redistribute(c):
    need_torch2()
    from torch.distributed.device_mesh import init_device_mesh
    from torch.distributed.tensor import Replicate, Shard, distribute_tensor

    size = c["size"]
    mesh = init_device_mesh("cpu", (size,))
    assert mesh.get_group().getBackendName() == "weft"
    full = torch.arange(4.0 * size * 3).reshape(4 * size, 3)
    x = distribute_tensor(full, mesh, [Shard(0)])
    same(x.to_local(), full.chunk(size)[c["rank"]], "shard")
    same(x.redistribute(mesh, [Replicate()]).to_local(), full, "Shard(0) -> Replicate")
    same(x.redistribute(mesh, [Shard(1)]).full_tensor(), full, "Shard(0) -> Shard(1)")
    same(x.sum().full_tensor(), full.sum(), "partial sum")


def check_device_mesh_sub_groups(c):
    need_torch2()
    size, rank = c["size"], c["rank"]
    if size % 2:
        raise Skip("a 2-D mesh needs an even number of ranks")
    from torch.distributed.device_mesh import init_device_mesh

    mesh = init_device_mesh("cpu", (2, size // 2), mesh_dim_names=("dp", "tp"))
    for dim, name in enumerate(("dp", "tp")):
        g = mesh.get_group(name)
        assert g.getBackendName() == "weft", g
        t = torch.tensor([float(rank)])
        dist.all_reduce(t, group=g)
        coords = mesh.get_coordinate()
        peers = [r for r in range(size)
                 if (r // (size // 2), r % (size // 2))[1 - dim] == coords[1 - dim]]
        same(t, torch.tensor([float(sum(peers))]), name)


class MLP(nn.Module):
    def __init__(self):
        super().__init__()
        self.layers = nn.Sequential(nn.Linear(16, 32), nn.ReLU(), nn.Linear(32, 32), nn.ReLU(),
                                    nn.Linear(32, 4))

    def forward(self, x):
        return self.layers(x)


def _fsdp_train(mesh, rank, steps=4):
    from torch.distributed.fsdp import fully_shard

    torch.manual_seed(7)
    model = MLP()
    for layer in model.layers:
        if isinstance(layer, nn.Linear):
            fully_shard(layer, mesh=mesh)
    fully_shard(model, mesh=mesh)
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    losses, grads = [], []
    # Each rank its own batch, the same at every step, so that the loss falls.
    g = torch.Generator().manual_seed(100 + rank)
    x, y = torch.randn(8, 16, generator=g), torch.randn(8, 4, generator=g)
    for step in range(steps):
        opt.zero_grad()
        loss = nn.functional.mse_loss(model(x), y)
        loss.backward()
        grads.append(torch.cat([p.grad.full_tensor().reshape(-1) for p in model.parameters()]))
        opt.step()
        losses.append(loss.detach())
    return torch.stack(losses), torch.stack(grads)


def check_fsdp2_matches_gloo(c):
    need_torch2()
    from torch.distributed.device_mesh import DeviceMesh, init_device_mesh

    size, rank = c["size"], c["rank"]
    weft_mesh = init_device_mesh("cpu", (size,))
    gloo_mesh = DeviceMesh.from_group(c["gloo"], "cpu")
    la, ga = _fsdp_train(weft_mesh, rank)
    lb, gb = _fsdp_train(gloo_mesh, rank)
    if size <= 2:
        same(la, lb, "losses")
        same(ga, gb, "gradients")
    else:  # the order of additions may differ from gloo's
        assert torch.allclose(la, lb, rtol=1e-6, atol=1e-7), (la, lb)
        assert torch.allclose(ga, gb, rtol=1e-5, atol=1e-7), (ga - gb).abs().max()
    assert la[-1] < la[0] or size == 1, la


def check_refusals_name_the_reason(c):
    need_torch2()
    pg = dist.distributed_c10d._get_default_group()
    for fn, text in [
        (lambda: dist.monitored_barrier(timeout=datetime.timedelta(seconds=5)), "GLOO"),
        (lambda: pg.monitored_barrier(), "weft: monitored_barrier is not supported"),
    ]:
        try:
            fn()
        except (RuntimeError, ValueError) as e:
            assert text in str(e), (text, str(e))
        else:
            raise AssertionError(f"no error mentioning {text!r}")
    # An error inside a backend method comes back through the Work, even where C++ called it.
    w = pg.allreduce([torch.ones(2, dtype=torch.bool)])
    try:
        w.wait()
    except TypeError as e:
        assert "weft: all_reduce" in str(e) and "torch.bool" in str(e), str(e)
    else:
        raise AssertionError("a bool all_reduce's Work did not raise")
    assert w.is_completed() and not w.is_success()
    t = torch.ones(3)
    dist.all_reduce(t)
    same(t, torch.full((3,), float(c["size"])), "the group still works")


def check_group_timeout_honoured(c):
    """new_group's timeout becomes weft's: a collective one rank skips fails on the others
    within it, naming the operation, instead of after WEFT_TIMEOUT_MS."""
    size, rank = c["size"], c["rank"]
    if size == 1:
        raise Skip("needs a rank to skip the collective")
    saved = os.environ.pop("WEFT_TIMEOUT_MS", None)
    try:
        g = dist.new_group(list(range(size)), backend="weft",
                           timeout=datetime.timedelta(seconds=2))
    finally:
        if saved is not None:
            os.environ["WEFT_TIMEOUT_MS"] = saved
    t = torch.ones(4)
    dist.all_reduce(t, group=g)  # connected
    if rank != 0:
        import time

        t0 = time.monotonic()
        try:
            dist.all_reduce(t, group=g)
        except RuntimeError as e:
            took = time.monotonic() - t0
            assert "all_reduce" in str(e), str(e)
            assert took < 10, f"failed after {took:.1f} s, the group's timeout is 2 s"
        else:
            raise AssertionError("an all_reduce rank 0 skipped completed")
    dist.barrier()  # on the world group: everyone is past the failure
    dist.destroy_process_group(g)


def main():
    rank, size = int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"])
    dist.init_process_group("weft")
    gloo = dist.new_group(list(range(size)), backend="gloo")
    harness.run(globals(), {"rank": rank, "size": size, "gloo": gloo})
    dist.barrier()
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
