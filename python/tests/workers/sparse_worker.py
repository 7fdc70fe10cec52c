"""One rank of test_torch_sparse.py: all_reduce of torch.sparse_coo tensors over the "weft" backend,
next to gloo, and DDP training nn.Embedding / nn.EmbeddingBag with sparse=True over both.

Every rank builds every rank's input from a seed (rank, case), so each computes the expected sum
itself; values are small integers, exact in every dtype, and inputs are uncoalesced (indices
repeat) with a different number of non-zeros on each rank, 0 included.
"""
import contextlib
import os

import harness

import torch
import torch.distributed as dist
import torch.nn as nn

import weft.torch  # noqa: F401 -- registers "weft"
from weft.torch import sparse

R = dist.ReduceOp
DTYPES = [torch.int8, torch.uint8, torch.int32, torch.int64, torch.float16, torch.bfloat16,
          torch.float32, torch.float64]
# (shape, sparse_dim): indices only, hybrid (dense rows, as an embedding's gradient), 3-d.
SHAPES = [((7, 5), 2), ((11, 3), 1), ((4, 3, 2), 1), ((3, 4, 5), 3), ((6,), 1)]


def nnz_of(rank, case):
    return [0, 9, 4, 13][(rank + case) % 4]


def sparse_input(rank, case, shape, sparse_dim, dtype, nnz=None):
    """Rank `rank`'s uncoalesced input for `case`: nnz entries at random indices, some repeated."""
    g = torch.Generator().manual_seed(1000 * case + rank)
    nnz = nnz_of(rank, case) if nnz is None else nnz
    idx = torch.stack([torch.randint(0, shape[d], (nnz,), generator=g) for d in range(sparse_dim)]
                      ) if sparse_dim else torch.zeros(0, nnz, dtype=torch.long)
    if nnz > 1:
        idx[:, -1] = idx[:, 0]  # one index twice at least
    lo, hi = (0, 4) if dtype == torch.uint8 else (-3, 4)
    vals = torch.randint(lo, hi, (nnz, *shape[sparse_dim:]), generator=g).to(dtype)
    return torch.sparse_coo_tensor(idx, vals, shape)


def expected_sum(size, case, shape, sparse_dim, dtype, nnz=None):
    total = sum(sparse_input(r, case, shape, sparse_dim, dtype, nnz).to_dense().double()
                for r in range(size))
    return total.to(dtype)


def sum_matrix(c, case):
    for dtype in DTYPES:
        for shape, sparse_dim in SHAPES:
            case += 1
            t = sparse_input(c["rank"], case, shape, sparse_dim, dtype)
            assert t._nnz() < 2 or not t.is_coalesced()
            dist.all_reduce(t)
            assert t.is_sparse and t.dtype == dtype and tuple(t.shape) == shape
            assert t.is_coalesced(), (dtype, shape)
            want = expected_sum(c["size"], case, shape, sparse_dim, dtype)
            assert torch.equal(t.to_dense(), want), (dtype, shape, sparse_dim)


@contextlib.contextmanager
def pad_limit(n):
    """sparse.py's choice of collective for the blocks, set alike on every rank."""
    old, sparse.PAD_LIMIT_BYTES = sparse.PAD_LIMIT_BYTES, n
    try:
        yield
    finally:
        sparse.PAD_LIMIT_BYTES = old


def check_sum_every_dtype_and_shape(c):
    sum_matrix(c, 0)  # small blocks: the padded all_gather


def check_sum_every_dtype_and_shape_all_to_allv(c):
    with pad_limit(-1):
        sum_matrix(c, 100)


def check_sum_every_dtype_and_shape_padded_always(c):
    with pad_limit(1 << 62):
        sum_matrix(c, 200)


def check_sum_one_rank_holds_most(c):
    # Rank 0's block (3000 rows of 8 + 32 x 4 bytes) is far larger than the others' (7 rows):
    # padding them all to it would add more than sparse.PAD_LIMIT_BYTES, so all_to_allv.
    nnz = 3000 if c["rank"] == 0 else 7
    t = sparse_input(c["rank"], 900, (5000, 32), 1, torch.float32, nnz=nnz)
    dist.all_reduce(t)
    want = sum(sparse_input(r, 900, (5000, 32), 1, torch.float32, nnz=3000 if r == 0 else 7)
               .to_dense() for r in range(c["size"]))
    assert t.is_coalesced() and torch.equal(t.to_dense(), want)


def check_same_as_gloo_in_place(c):
    # What gloo does to the input and to Work.result(): the input object itself holds the
    # coalesced sum (indices and values replaced, nnz changed), and result() is [input].
    outs = {}
    for name, group in (("weft", None), ("gloo", c["gloo"])):
        t = sparse_input(c["rank"], 77, (9, 4), 1, torch.float32)
        work = dist.all_reduce(t, group=group, async_op=True)
        work.wait()
        res = work.result()
        assert len(res) == 1 and torch.equal(res[0].to_dense(), t.to_dense()), name
        outs[name] = t
    a, b = outs["weft"], outs["gloo"]
    assert a.is_coalesced() == b.is_coalesced()
    assert a._nnz() == b._nnz()
    assert torch.equal(a.indices(), b.indices())
    assert torch.equal(a.values(), b.values())


def check_async_in_flight_with_dense(c):
    # Several sparse all_reduces in flight, a dense one issued between them: each completes with
    # its own sum, in program order with the dense one.
    ts = [sparse_input(c["rank"], 200 + k, (8, 3), 1, torch.float64) for k in range(4)]
    dense = torch.full((5,), float(c["rank"] + 1))
    works = [dist.all_reduce(t, async_op=True) for t in ts[:2]]
    works.append(dist.all_reduce(dense, async_op=True))
    works += [dist.all_reduce(t, async_op=True) for t in ts[2:]]
    for w in reversed(works):
        w.wait()
    for k, t in enumerate(ts):
        want = expected_sum(c["size"], 200 + k, (8, 3), 1, torch.float64)
        assert torch.equal(t.to_dense(), want), k
    assert torch.equal(dense, torch.full((5,), float(sum(range(1, c["size"] + 1)))))
    # Each Work was waited on, so none is left referenced (see completion.py).
    pg = dist.distributed_c10d._get_default_group()
    assert len(pg._completion.keeper) == 0, len(pg._completion.keeper)


def check_future_value(c):
    t = sparse_input(c["rank"], 300, (6, 6), 2, torch.float32)
    fut = dist.all_reduce(t, async_op=True).get_future()
    out = fut.wait()
    assert out[0].is_sparse
    assert torch.equal(out[0].to_dense(), expected_sum(c["size"], 300, (6, 6), 2, torch.float32))


def check_every_rank_empty(c):
    t = sparse_input(c["rank"], 400, (5, 2), 1, torch.float32, nnz=0)
    dist.all_reduce(t)
    assert t._nnz() == 0 and t.is_coalesced() and tuple(t.shape) == (5, 2)


def check_one_rank_nonzero(c):
    nnz = 6 if c["rank"] == c["size"] - 1 else 0
    t = sparse_input(c["rank"], 500, (10,), 1, torch.int64, nnz=nnz)
    dist.all_reduce(t)
    want = sparse_input(c["size"] - 1, 500, (10,), 1, torch.int64, nnz=6).to_dense()
    assert torch.equal(t.to_dense(), want)


def check_requires_grad_leaf(c):
    # A leaf that requires grad is overwritten as gloo's is (below autograd).
    t = sparse_input(c["rank"], 600, (4, 4), 2, torch.float32).requires_grad_()
    dist.all_reduce(t)
    assert torch.equal(t.detach().to_dense(), expected_sum(c["size"], 600, (4, 4), 2,
                                                           torch.float32))


def check_refuses_other_ops(c):
    for op in (R.MAX, R.MIN, R.PRODUCT, R.AVG):
        t = sparse_input(c["rank"], 700, (4, 4), 2, torch.float32)
        before = t.clone()
        try:
            dist.all_reduce(t, op=op)
        except Exception as e:  # noqa: BLE001 -- the text is what is checked
            text = str(e)
            name = str(getattr(op, "op", op)).split(".")[-1]  # MAX, ...
            assert "sparse" in text and name in text, text
        else:
            raise AssertionError(f"{op} on a sparse tensor did not fail")
        assert torch.equal(t.to_dense(), before.to_dense())
    _still_works(c)


def check_refuses_mismatched_shapes(c):
    # Every rank refuses, naming the ranks' shapes, and the group stays usable.
    shape = (4 + (c["rank"] == 1), 3)
    t = sparse_input(c["rank"], 800, shape, 1, torch.float32)
    try:
        dist.all_reduce(t)
    except Exception as e:  # noqa: BLE001
        assert "differ across ranks" in str(e) and "(5, 3)" in str(e), str(e)
    else:
        raise AssertionError("mismatched sparse shapes did not fail")
    _still_works(c)


def check_refuses_unsummable_dtype_on_every_rank(c):
    # bool on one rank only: that rank cannot take part, and the others refuse too (at once,
    # not at the timeout).
    dtype = torch.bool if c["rank"] == 1 else torch.float32
    t = torch.sparse_coo_tensor(torch.tensor([[0, 1]]), torch.ones(2).to(dtype), (3,))
    try:
        dist.all_reduce(t)
    except Exception as e:  # noqa: BLE001
        assert "rank 1" in str(e) and "sparse" in str(e), str(e)
    else:
        raise AssertionError("a bool sparse tensor did not fail")
    _still_works(c)


def _still_works(c):
    x = torch.ones(3)
    dist.all_reduce(x)
    assert torch.equal(x, torch.full((3,), float(c["size"])))


# ---- DDP ------------------------------------------------------------------------------------

STEPS = 4


class Net(nn.Module):
    def __init__(self, bag):
        super().__init__()
        self.emb = (nn.EmbeddingBag(50, 8, mode="sum", sparse=True) if bag
                    else nn.Embedding(50, 8, sparse=True))
        self.head = nn.Linear(8, 2)  # a dense parameter next to the sparse one
        self.bag = bag

    def forward(self, x):
        h = self.emb(x) if self.bag else self.emb(x).sum(1)
        return self.head(h)


def train(group, rank, bag, hook=None):
    torch.manual_seed(4321)
    model = Net(bag)
    ddp = nn.parallel.DistributedDataParallel(model, process_group=group)
    if hook is not None:
        ddp.register_comm_hook(group or dist.distributed_c10d._get_default_group(), hook)
    opt = torch.optim.SGD(ddp.parameters(), lr=0.1)
    for step in range(STEPS):
        g = torch.Generator().manual_seed(100 * step + rank)
        x = torch.randint(0, 50, (6, 4), generator=g)  # each rank its own rows of the table
        y = torch.randn(6, 2, generator=g)
        opt.zero_grad()
        nn.functional.mse_loss(ddp(x), y).backward()
        assert model.emb.weight.grad.is_sparse
        opt.step()
    return {k: v.detach().clone() for k, v in model.state_dict().items()}


def compare_ddp(c, bag, hook=None):
    a = train(None, c["rank"], bag, hook)
    b = train(c["gloo"], c["rank"], bag, hook)
    torch.manual_seed(4321)
    fresh = Net(bag).state_dict()
    assert not torch.equal(a["emb.weight"], fresh["emb.weight"])  # training moved the table
    for k in a:
        assert torch.allclose(a[k], b[k], rtol=1e-6, atol=1e-7), (k, (a[k] - b[k]).abs().max())
    lo, hi = a["emb.weight"].clone(), a["emb.weight"].clone()
    dist.all_reduce(lo, op=R.MIN)
    dist.all_reduce(hi, op=R.MAX)
    assert torch.equal(lo, hi), "the table differs across ranks"


def check_ddp_embedding_matches_gloo(c):
    compare_ddp(c, bag=False)


def check_ddp_embedding_bag_matches_gloo(c):
    compare_ddp(c, bag=True)


def check_ddp_sparse_allreduce_hook(c):
    # A Python comm hook: dist.all_reduce(async_op=True) of the sparse gradient, its future
    # chained and handed back to DDP's reducer in C++.
    from torch.distributed.algorithms.ddp_comm_hooks import default_hooks

    compare_ddp(c, bag=True, hook=default_hooks.allreduce_hook)


def main():
    rank, size = int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"])
    dist.init_process_group("weft")
    gloo = dist.new_group(list(range(size)), backend="gloo")
    harness.run(globals(), {"rank": rank, "size": size, "gloo": gloo})
    dist.barrier()
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
