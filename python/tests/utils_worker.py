"""One rank of test_utils.py: runs every weft.torch.utils helper under gloo, then under weft, and
writes what each returned (or raised) to OUTDIR/rankN.json after every check.

Started by test_utils.py with RANK, WORLD_SIZE, LOCAL_RANK, GLOO_PORT and WEFT_PORT in the
environment; argv[1] is OUTDIR (also used for the marker files of the ordering checks). Data are
small integers, so sums are exact whatever order a backend adds them in and the two backends'
results can be compared for equality.
"""

import contextlib
import datetime
import io
import json
import os
import sys
import time
import traceback

# Order matters only for reading the output; each check leaves the process group usable.
CHECKS = [
    "ranks",
    "print",
    "reduce_sum",
    "reduce_mean",
    "barrier",
    "broadcast",
    "broadcast_count_mismatch",
    "broadcast_shape_mismatch",
    "sync_buffers",
    "sync_grad",
    "sync_grad_mismatch",
    "grad_sync_hooks",
    "average_metrics",
    "zero_first",
    "dist_info",
]

# Checks that run before init_process_group, in every rank.
PRE_CHECKS = ["before_init", "not_distributed", "memory"]

COLLECTIVE_HELPERS = ["reduce_sum", "reduce_mean", "barrier", "broadcast_tensors", "sync_buffers",
                      "sync_grad", "GradSync", "average_metrics", "zero_first"]


def main():
    import torch
    import torch.distributed as dist
    import weft.torch.utils as u

    outdir = sys.argv[1]
    rank = int(os.environ["RANK"])
    world = int(os.environ["WORLD_SIZE"])
    out_path = os.path.join(outdir, "rank%d.json" % rank)
    results = {"pre": {}, "gloo": {}, "weft": {}}

    def save():
        tmp = out_path + ".tmp"
        with open(tmp, "w") as f:
            json.dump(results, f)
        os.replace(tmp, out_path)

    def run(section, name, fn):
        try:
            results[section][name] = {"ok": True, "value": fn()}
        except Exception:
            results[section][name] = {"ok": False, "error": traceback.format_exc()}
        save()
        return results[section][name]["ok"]

    ctx = Ctx(torch, dist, u, rank, world, outdir)
    for name in PRE_CHECKS:
        run("pre", name, getattr(ctx, "pre_" + name))

    try:
        import weft.torch  # noqa: F401 -- registers the "weft" backend
        weft_skip = None if hasattr(dist.Backend, "WEFT") else (
            "import weft.torch registered no \"weft\" torch.distributed backend")
    except Exception as e:  # ImportError, or OSError when libweft.so cannot be loaded
        weft_skip = "weft.torch is not importable: %s: %s" % (type(e).__name__, e)

    if weft_skip:
        results["weft_skip"] = weft_skip
        save()
    for backend in ("gloo", "weft"):
        if backend == "weft" and weft_skip:
            break
        port = os.environ["GLOO_PORT" if backend == "gloo" else "WEFT_PORT"]
        os.environ["MASTER_ADDR"] = "127.0.0.1"
        os.environ["MASTER_PORT"] = port
        ctx.backend = backend
        dist.init_process_group(backend, init_method="env://", rank=rank, world_size=world,
                                timeout=datetime.timedelta(seconds=30))
        for name in CHECKS:
            if not run(backend, name, getattr(ctx, "check_" + name)):
                # A rank that failed may have skipped collectives the others are waiting in:
                # stop here rather than pair mismatched calls; the others time out.
                sys.stdout.flush()
                os._exit(1)
        dist.destroy_process_group()
    results["done"] = True
    save()


class Ctx:
    def __init__(self, torch, dist, u, rank, world, outdir):
        self.torch, self.dist, self.u = torch, dist, u
        self.rank, self.world, self.outdir = rank, world, outdir
        self.backend = None

    # ------------------------------------------------------------------ before init_process_group

    def pre_before_init(self):
        """In a launch of several ranks, every collective helper raises one clear error."""
        u, torch = self.u, self.torch
        if self.world == 1:
            return "world of 1: helpers are the identity (not_distributed)"
        calls = {
            "reduce_sum": lambda: u.reduce_sum(1.0),
            "reduce_mean": lambda: u.reduce_mean(torch.ones(2)),
            "barrier": u.barrier,
            "broadcast_tensors": lambda: u.broadcast_tensors([torch.ones(2)]),
            "sync_buffers": lambda: u.sync_buffers(torch.nn.BatchNorm1d(2)),
            "sync_grad": lambda: u.sync_grad(torch.nn.Linear(2, 2)),
            "GradSync": lambda: u.GradSync(torch.nn.Linear(2, 2)),
            "average_metrics": lambda: u.average_metrics({"a": 1.0}),
            "zero_first": lambda: u.zero_first().__enter__(),
        }
        assert sorted(calls) == sorted(COLLECTIVE_HELPERS)
        msgs = {}
        for name, call in calls.items():
            try:
                call()
            except u.DistNotInitializedError as e:
                msgs[name] = str(e)
            else:
                raise AssertionError("%s did not raise before init_process_group" % name)
        for name, msg in msgs.items():
            assert "torch.distributed.init_process_group(" in msg, msg
            assert ("weft.torch.utils.%s:" % name) in msg, msg
            assert "WORLD_SIZE=%d" % self.world in msg, msg
        # The non-collective helpers still answer, from the launcher's environment.
        assert (u.get_rank(), u.get_world_size(), u.get_local_rank()) == (self.rank, self.world,
                                                                          self.rank)
        return msgs["reduce_sum"]

    def pre_not_distributed(self):
        """Without any launcher variable, every helper is the single-process identity."""
        u, torch = self.u, self.torch
        saved = {k: os.environ.pop(k) for k in ("RANK", "WORLD_SIZE", "LOCAL_RANK")}
        try:
            assert (u.get_rank(), u.get_world_size(), u.get_local_rank()) == (0, 1, 0)
            assert not u.is_dist() and u.is_main()
            assert u.reduce_sum(3) == 3 and isinstance(u.reduce_sum(3), int)
            assert u.reduce_mean(3) == 3.0
            t = torch.tensor([1.0, 2.0], requires_grad=True)
            s = u.reduce_sum(t)
            assert torch.equal(s, t.detach()) and s is not t and not s.requires_grad
            assert torch.equal(u.reduce_mean(torch.tensor([1, 2])), torch.tensor([1.0, 2.0]))
            u.barrier()
            m = torch.nn.Linear(3, 2)
            before = [p.detach().clone() for p in m.parameters()]
            u.broadcast_tensors(m.parameters())
            m(torch.ones(1, 3)).sum().backward()
            grads = [p.grad.clone() for p in m.parameters()]
            u.sync_grad(m)
            assert all(torch.equal(a, p.grad) for a, p in zip(grads, m.parameters()))
            gs = u.GradSync(m)
            gs.wait()
            assert all(torch.equal(a, p.detach()) for a, p in zip(before, m.parameters()))
            bn = torch.nn.BatchNorm1d(2)
            u.sync_buffers(bn)
            assert u.average_metrics({"a": 2.0, "b": 4}, count=3) == {"a": 2.0, "b": 4.0}
            with u.zero_first():
                ran = True
            assert ran
            info = u.get_dist_info()
            assert (info.world_size, info.rank, info.local_rank, info.backend) == (1, 0, 0, None)
            out = io.StringIO()
            with contextlib.redirect_stdout(out):
                u.print("x", 1)
                u.print("y", all=True)
            assert out.getvalue() == "x 1\ny\n", repr(out.getvalue())
        finally:
            os.environ.update(saved)
        return True

    def pre_memory(self):
        """USS grows by what this process touches, through psutil and through smaps_rollup."""
        u = self.u
        import numpy as np
        if self.rank != 0:
            return None
        base_ps, base_sm = u.memory_uss_bytes(), u._smaps_uss_bytes()
        block = np.ones(256 << 20, dtype=np.uint8)  # touched: really resident, private
        grown_ps = u.memory_uss_bytes() - base_ps
        grown_sm = u._smaps_uss_bytes() - base_sm
        gb = u.memory_gb()
        del block
        assert 200 << 20 < grown_ps < 320 << 20, grown_ps
        assert 200 << 20 < grown_sm < 320 << 20, grown_sm
        assert 0.25 < gb < 64, gb
        return True  # sizes differ run to run; nothing to compare across backends

    # ------------------------------------------------------------------ after init_process_group

    def check_ranks(self):
        u = self.u
        got = [u.get_rank(), u.get_world_size(), u.get_local_rank(), u.is_dist(), u.is_main()]
        assert got == [self.rank, self.world, self.rank, self.world > 1, self.rank == 0], got
        return got

    def check_print(self):
        u = self.u
        out = io.StringIO()
        with contextlib.redirect_stdout(out):
            u.print("hello", self.rank)
            u.print("a\nb", 7, all=True)
            u.print("c", "d", sep="-", all=True)
        if self.world > 1:
            p = "[rank %d] " % self.rank
            want = p + "a\n" + p + "b 7\n" + p + "c-d\n"
        else:
            want = "a\nb 7\nc-d\n"
        if self.rank == 0:
            want = "hello 0\n" + want
        assert out.getvalue() == want, (out.getvalue(), want)
        return out.getvalue().replace("[rank %d]" % self.rank, "[rank R]").replace(
            "hello 0\n", "")

    def check_reduce_sum(self):
        u, torch, r, n = self.u, self.torch, self.rank, self.world
        t = torch.tensor([r + 1.0, 2.0 * r, -1.0])
        s = u.reduce_sum(t)
        assert torch.equal(t, torch.tensor([r + 1.0, 2.0 * r, -1.0])), "input changed"
        tri = n * (n + 1) // 2
        assert s.tolist() == [tri, n * (n - 1), -n], s
        i = u.reduce_sum(torch.full((2, 2), r, dtype=torch.int64))
        assert i.dtype == torch.int64 and i.tolist() == [[n * (n - 1) // 2] * 2] * 2, i
        h = u.reduce_sum(torch.tensor([1.0, 2.0], dtype=torch.float64) * (r + 1))
        assert h.dtype == torch.float64 and h.tolist() == [tri, 2 * tri]
        k = u.reduce_sum(r + 1)
        assert isinstance(k, int) and k == tri, k
        f = u.reduce_sum(0.5 * r)
        assert isinstance(f, float) and f == 0.25 * n * (n - 1), f
        import numpy as np
        g = u.reduce_sum(np.int64(r))
        assert isinstance(g, int) and g == n * (n - 1) // 2, g
        return [s.tolist(), i.tolist(), h.tolist(), k, f, g]

    def check_reduce_mean(self):
        u, torch, r, n = self.u, self.torch, self.rank, self.world
        m = u.reduce_mean(torch.tensor([2.0 * r, 4.0]))
        assert m.tolist() == [n - 1, 4.0], m
        i = u.reduce_mean(torch.tensor([2 * r, 3]))
        assert i.is_floating_point() and i.tolist() == [n - 1, 3.0], i
        f = u.reduce_mean(r)
        assert isinstance(f, float) and f == (n - 1) / 2, f
        return [m.tolist(), i.tolist(), f]

    def _marker(self, name):
        return os.path.join(self.outdir, "%s.%s" % (name, self.backend))

    def check_barrier(self):
        """Rank 0 writes a file late, before the barrier; after it every rank must see the file."""
        u = self.u
        marker = self._marker("barrier")
        if self.rank == 0:
            time.sleep(0.3)
            with open(marker, "w") as f:
                f.write("x")
        u.barrier()
        assert os.path.exists(marker), "barrier returned before rank 0 reached it"
        u.barrier()  # nobody leaves while another rank still looks
        return True

    def check_broadcast(self):
        u, torch, r, n = self.u, self.torch, self.rank, self.world
        ts = [torch.full((3, 4), float(r)), torch.arange(5, dtype=torch.int64) * r,
              torch.full((2,), r + 0.5, dtype=torch.float64)]
        u.broadcast_tensors(ts)  # src 0
        assert [t.tolist() for t in ts] == [[[0.0] * 4] * 3, [0] * 5, [0.5] * 2], ts
        torch.manual_seed(1000 + r)  # a different model on every rank
        m = torch.nn.Sequential(torch.nn.Linear(4, 3), torch.nn.BatchNorm1d(3))
        with torch.no_grad():
            for p in m.parameters():
                p.copy_(torch.arange(p.numel(), dtype=p.dtype).reshape(p.shape) * (r + 1))
        u.broadcast_tensors(m, src=n - 1)  # parameters and buffers from the last rank
        got = [p.tolist() for p in m.parameters()]
        for p in m.parameters():
            want = torch.arange(p.numel(), dtype=p.dtype).reshape(p.shape) * n
            assert torch.equal(p.detach(), want) and p.requires_grad
        return [[t.tolist() for t in ts], got]

    def _expect_mismatch(self, fn, words):
        u = self.u
        if self.world == 1:
            fn()  # one rank always agrees with itself
            return "no mismatch possible"
        try:
            fn()
        except u.TensorMismatchError as e:
            msg = str(e)
            assert all(w in msg for w in words), msg
            return msg.replace("rank %d " % self.rank, "rank R ")
        raise AssertionError("no TensorMismatchError on rank %d" % self.rank)

    def check_broadcast_count_mismatch(self):
        """The last rank passes one tensor fewer: every rank raises, none waits forever."""
        torch, n = self.torch, self.world
        k = 2 if self.rank == n - 1 else 3
        ts = [torch.ones(4) * self.rank for _ in range(k)]
        msg = self._expect_mismatch(lambda: self.u.broadcast_tensors(ts),
                                    ["broadcast_tensors", "different numbers of tensors",
                                     "between 2 and 3"])
        assert all(torch.equal(t, torch.ones(4) * self.rank) for t in ts), "data changed"
        return msg.replace("passes %d," % k, "passes K,")

    def check_broadcast_shape_mismatch(self):
        torch, n = self.torch, self.world
        shape = (2, 3) if self.rank == n - 1 else (3, 2)
        ts = [torch.ones(4), torch.zeros(shape)]
        msg = self._expect_mismatch(lambda: self.u.broadcast_tensors(ts),
                                    ["shapes or dtypes differ", "float32%s" % (shape,)])
        return msg.replace(str(shape), "SHAPE")

    def check_sync_buffers(self):
        u, torch, r, n = self.u, self.torch, self.rank, self.world
        bn = torch.nn.Sequential(torch.nn.BatchNorm1d(3), torch.nn.BatchNorm1d(2))
        with torch.no_grad():
            for i, m in enumerate(bn):
                m.running_mean.fill_(2.0 * r + i)
                m.running_var.fill_(4.0 * r)
                m.num_batches_tracked.fill_(10 * r + 1)
        u.sync_buffers(bn)
        for i, m in enumerate(bn):
            assert m.running_mean.tolist() == [n - 1.0 + i] * m.num_features
            assert m.running_var.tolist() == [2.0 * (n - 1)] * m.num_features
            assert m.num_batches_tracked.item() == 1  # counters come from rank 0
        averaged = [b.tolist() for b in bn.buffers()]
        with torch.no_grad():
            for m in bn:
                m.running_mean.fill_(float(r))
                m.num_batches_tracked.fill_(r)
        u.sync_buffers(bn, mode="broadcast", src=n - 1)
        for m in bn:
            assert m.running_mean.tolist() == [n - 1.0] * m.num_features
            assert m.num_batches_tracked.item() == n - 1
        return [averaged, [b.tolist() for b in bn.buffers()]]

    # A model with float32 and float64 parameters, one used only on rank 0 and one never used.
    def _model(self):
        torch = self.torch

        class Net(torch.nn.Module):
            def __init__(self):
                super().__init__()
                # Declared first so that they come last in GradSync's (reversed) bucket order:
                # a bucket holding a parameter backward never reaches can only start in wait(),
                # and holds back the buckets after it.
                self.unused = torch.nn.Parameter(torch.ones(2))
                self.rank0_only = torch.nn.Parameter(torch.ones(3))
                self.a = torch.nn.Linear(4, 8)
                self.b = torch.nn.Linear(8, 8)
                self.c = torch.nn.Linear(8, 1)
                self.scale = torch.nn.Parameter(torch.ones(1, dtype=torch.float64))

            def forward(self, x, rank):
                y = self.c(torch.relu(self.b(torch.relu(self.a(x))))).double() * self.scale
                if rank == 0:
                    y = y + self.rank0_only.sum().double()
                return y

        torch.manual_seed(7)  # same weights on every rank
        return Net()

    def _data(self, rank):
        g = self.torch.Generator().manual_seed(100 + rank)
        # Multiples of 1/8: products and sums stay exact in float32 for these sizes.
        x = self.torch.randint(-8, 9, (6, 4), generator=g).float() / 8
        y = self.torch.randint(-8, 9, (6, 1), generator=g).double() / 8
        return x, y

    def _backward(self, model, rank):
        x, y = self._data(rank)
        ((model(x, rank) - y) ** 2).mean().backward()

    def _expected_grads(self):
        """Mean over ranks of each rank's gradients, computed here without communication."""
        torch = self.torch
        total = None
        for q in range(self.world):
            m = self._model()
            self._backward(m, q)
            g = [torch.zeros_like(p) if p.grad is None else p.grad for p in m.parameters()]
            total = g if total is None else [a + b for a, b in zip(total, g)]
        return [t / self.world for t in total]

    def _count_async_all_reduces(self, sync=False):
        """Counts all-reduces started with async_op=True (or, with sync, the blocking ones)."""
        dist, calls = self.dist, []
        real = dist.all_reduce

        def counting(tensor, *args, **kwargs):
            if bool(kwargs.get("async_op")) != sync:
                calls.append(tensor.numel())
            return real(tensor, *args, **kwargs)

        dist.all_reduce = counting
        return calls, lambda: setattr(dist, "all_reduce", real)

    def _assert_grads(self, model, want, unused_zero=False):
        """unused_zero: GradSync cannot tell a parameter unused everywhere from one unused here,
        so it gives it a zero gradient; sync_grad asks the other ranks and leaves it None."""
        torch = self.torch
        names = [n for n, _ in model.named_parameters()]
        for name, p, w in zip(names, model.parameters(), want):
            if name == "unused" and not unused_zero:
                assert p.grad is None, "a parameter without gradient anywhere got one"
                continue
            assert p.grad is not None, name
            assert torch.allclose(p.grad, w, rtol=1e-5, atol=1e-7), (name, p.grad, w)
        return [None if p.grad is None else p.grad.tolist() for p in model.parameters()]

    def check_sync_grad(self):
        u = self.u
        want = self._expected_grads()
        out = []
        # bucket_bytes: everything per dtype in one bucket; 64 bytes: one bucket per tensor or
        # per 16 floats, so many flat all-reduces of one dtype each.
        for bucket, n_calls in ((u.DEFAULT_BUCKET_BYTES, 2), (64, 7)):
            model = self._model()
            self._backward(model, self.rank)
            calls, restore = self._count_async_all_reduces()
            try:
                u.sync_grad(model, bucket_bytes=bucket)
            finally:
                restore()
            live = [p for n, p in model.named_parameters() if n != "unused"]
            assert sum(calls) == sum(p.numel() for p in live), calls
            # Default: one bucket per dtype (float32, float64). 64 bytes: rank0_only, scale,
            # a.weight, a.bias, b.weight, [b.bias c.weight], c.bias.
            assert len(calls) == n_calls, calls
            out.append(self._assert_grads(model, want))
        # average=False: sums.
        model = self._model()
        self._backward(model, self.rank)
        u.sync_grad(model, average=False)
        out.append(self._assert_grads(model, [w * self.world for w in want]))
        # Parameters that have gradients on every rank: no mask goes round, one small all-reduce
        # fewer, same averages.
        model = self._model()
        self._backward(model, self.rank)
        names = [n for n, _ in model.named_parameters()]
        everywhere = [i for i, n in enumerate(names) if n not in ("unused", "rank0_only")]
        params = list(model.parameters())
        synced = self._count_sync_all_reduces(lambda: u.sync_grad([params[i] for i in everywhere]))
        assert synced == 1, synced
        for i in everywhere:
            assert self.torch.allclose(params[i].grad, want[i], rtol=1e-5, atol=1e-7), names[i]
        out.append([params[i].grad.tolist() for i in everywhere])
        model = self._model()
        self._backward(model, self.rank)
        synced = self._count_sync_all_reduces(lambda: u.sync_grad(model))
        assert synced == 2, synced  # layout check, then which parameters have gradients
        return out

    def _count_sync_all_reduces(self, fn):
        calls, restore = self._count_async_all_reduces(sync=True)
        try:
            fn()
        finally:
            restore()
        return len(calls)

    def check_sync_grad_mismatch(self):
        torch = self.torch
        model = self._model()
        if self.rank == self.world - 1:
            model.extra = torch.nn.Parameter(torch.zeros(2))
        self._backward(model, self.rank)
        return self._expect_mismatch(lambda: self.u.sync_grad(model),
                                     ["sync_grad", "different numbers of parameters"])

    def check_grad_sync_hooks(self):
        u = self.u
        want = self._expected_grads()
        out = []
        model = self._model()
        gs = u.GradSync(model, bucket_bytes=64)
        for step in range(2):  # the second step checks that wait() reset the buckets
            model.zero_grad(set_to_none=True)
            calls, restore = self._count_async_all_reduces()
            try:
                self._backward(model, self.rank)
                # Buckets are launched during backward, before wait().
                during = len(calls)
                gs.wait()
            finally:
                restore()
            # Reversed, 64 bytes: [c.bias c.weight], b.bias, b.weight, a.bias, a.weight, scale,
            # [rank0_only unused]; all but the last start during backward.
            assert len(calls) == len(gs._buckets) == 7, (calls, len(gs._buckets))
            assert during == 6, during
            out.append(self._assert_grads(model, want, unused_zero=True))
        gs.remove()
        return out

    def check_average_metrics(self):
        u, r, n = self.u, self.rank, self.world
        got = u.average_metrics({"loss": r + 1.0, "acc": 0.5 * r, "n": 2}, count=r + 1)
        wsum = sum(q + 1 for q in range(n))
        want = {"loss": sum((q + 1.0) * (q + 1) for q in range(n)) / wsum,
                "acc": sum(0.5 * q * (q + 1) for q in range(n)) / wsum, "n": 2.0}
        assert set(got) == set(want)
        assert all(abs(got[k] - want[k]) < 1e-12 for k in want), (got, want)
        return got

    def check_zero_first(self):
        """Local rank 0 runs the block first: the others find the file it wrote in there."""
        u = self.u
        marker = self._marker("zero_first")
        with u.zero_first():
            if self.rank == 0:
                time.sleep(0.3)
                with open(marker, "w") as f:
                    f.write("x")
            else:
                assert os.path.exists(marker), "rank %d entered before rank 0 left" % self.rank
        u.barrier()
        return True

    def check_dist_info(self):
        info = self.u.get_dist_info()
        want = (self.world, self.rank, self.rank, "127.0.0.1", int(os.environ["MASTER_PORT"]),
                self.backend)
        assert tuple(info) == want, (info, want)
        return [info.world_size, info.rank == self.rank, info.local_rank == self.rank,
                info.master_addr]


if __name__ == "__main__":
    main()
