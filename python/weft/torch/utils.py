"""weft.torch.utils -- data-parallel helpers over any torch.distributed backend (weft, gloo, nccl).

Every helper works in three states:
  * torch.distributed initialized: it runs the collective on the default process group;
  * not distributed at all (no launcher, or a world of one): it is the single-process identity;
  * launched as several processes (WORLD_SIZE > 1 in the environment) but init_process_group()
    not called yet: a collective helper raises DistNotInitializedError, one error that says what
    to call, instead of every rank silently training on its own.

Only sum (and max, for the agreement checks) is asked of the backend: gloo has no ReduceOp.AVG,
so averages are sums divided by the world size.
"""

import builtins
import collections
import contextlib
import numbers
import os
import zlib

import torch
import torch.distributed as dist
from torch._utils import _flatten_dense_tensors, _unflatten_dense_tensors

__all__ = [
    "DistInfo",
    "DistNotInitializedError",
    "GradSync",
    "TensorMismatchError",
    "average_metrics",
    "barrier",
    "broadcast_tensors",
    "get_dist_info",
    "get_local_rank",
    "get_rank",
    "get_world_size",
    "is_dist",
    "is_main",
    "memory_gb",
    "memory_uss_bytes",
    "print",
    "reduce_mean",
    "reduce_sum",
    "sync_buffers",
    "sync_grad",
    "zero_first",
]

# Launcher variables, in the order weft_comm_init_env() reads them (weft, torchrun, Open MPI).
# Slurm's SLURM_NTASKS is left out on purpose: it is set in every shell of a multi-task
# allocation, where a single non-distributed python would otherwise be refused its collectives.
_RANK_VARS = ("WEFT_RANK", "RANK", "OMPI_COMM_WORLD_RANK")
_SIZE_VARS = ("WEFT_WORLD_SIZE", "WORLD_SIZE", "OMPI_COMM_WORLD_SIZE")
_LOCAL_RANK_VARS = ("WEFT_LOCAL_RANK", "LOCAL_RANK", "OMPI_COMM_WORLD_LOCAL_RANK", "SLURM_LOCALID")

# Gradients are flattened into buckets of at most this many bytes (DDP's default is 25 MiB): few
# enough all-reduces that per-call latency does not dominate, small enough that the first bucket
# can travel while the next is being flattened.
DEFAULT_BUCKET_BYTES = 25 << 20


class DistNotInitializedError(RuntimeError):
    """A collective helper was called in a multi-process launch before init_process_group()."""


class TensorMismatchError(RuntimeError):
    """Ranks passed different tensors (count, shapes or dtypes) to the same collective helper."""


DistInfo = collections.namedtuple(
    "DistInfo", ["world_size", "rank", "local_rank", "master_addr", "master_port", "backend"])


def _env_int(names):
    """(name, value) of the first of names set in the environment, or (None, None)."""
    for name in names:
        raw = os.environ.get(name)
        if raw is None or raw.strip() == "":
            continue
        try:
            return name, int(raw)
        except ValueError:
            raise ValueError("weft.torch.utils: %s=%r in the environment is not an integer" %
                             (name, raw)) from None
    return None, None


def _initialized():
    return dist.is_available() and dist.is_initialized()


def get_rank():
    """Global rank: torch.distributed's once initialized, else the launcher's (RANK), else 0."""
    if _initialized():
        return dist.get_rank()
    _, v = _env_int(_RANK_VARS)
    return 0 if v is None else v


def get_world_size():
    """Number of ranks: torch.distributed's once initialized, else the launcher's, else 1."""
    if _initialized():
        return dist.get_world_size()
    _, v = _env_int(_SIZE_VARS)
    return 1 if v is None else v


def get_local_rank():
    """Rank within this host, from the launcher (LOCAL_RANK and the like).

    Without one: the global rank when torch.distributed is initialized (processes started by hand
    or by torch.multiprocessing.spawn, which sets no LOCAL_RANK, run on one host), else 0.
    """
    _, v = _env_int(_LOCAL_RANK_VARS)
    if v is not None:
        return v
    return dist.get_rank() if _initialized() else 0


def is_dist():
    """True when this process is one of several ranks."""
    return get_world_size() > 1


def is_main():
    """True on global rank 0: the one that saves checkpoints and writes logs."""
    return get_rank() == 0


def _use_collectives(what):
    """Whether `what` must talk to the other ranks; raises if it must but cannot."""
    if _initialized():
        return True
    name, n = _env_int(_SIZE_VARS)
    if n is not None and n > 1:
        _, rank = _env_int(_RANK_VARS)
        where = ("one of %d processes" % n) if rank is None else ("rank %d of %d" % (rank, n))
        if not dist.is_available():
            raise DistNotInitializedError(
                "weft.torch.utils.%s: this process is %s (%s=%d) but this torch was built "
                "without torch.distributed" % (what, where, name, n))
        raise DistNotInitializedError(
            "weft.torch.utils.%s: this process is %s (%s=%d in the environment) but "
            "torch.distributed is not initialized; call "
            "torch.distributed.init_process_group(backend=\"weft\") (after `import weft.torch`; "
            "or backend=\"gloo\" / \"nccl\") before any collective helper" % (what, where, name, n))
    return False


def _comm_device(t=None):
    """Where a collective on t (or on a new scalar tensor) must run: NCCL takes CUDA tensors only."""
    if dist.get_backend() == "nccl":
        if t is not None and t.is_cuda:
            return t.device
        return torch.device("cuda", torch.cuda.current_device())
    return torch.device("cpu") if t is None else t.device


# ---------------------------------------------------------------------------------------------
# Printing


def print(*args, all=False, **kwargs):  # noqa: A001 -- meant to shadow print in `from ... import`
    """print() on local rank 0 only; with all=True on every rank, each line prefixed `[rank N]`.

    Flushes by default, so the lines of several ranks interleave in the order they were printed.
    (weft-run prefixes every line with its rank too; `weft-run --no-prefix` leaves this one.)
    """
    kwargs.setdefault("flush", True)
    if not all:
        if get_local_rank() == 0:
            builtins.print(*args, **kwargs)
        return
    if not is_dist():
        builtins.print(*args, **kwargs)
        return
    sep = kwargs.pop("sep", " ")
    sep = " " if sep is None else sep
    text = sep.join(str(a) for a in args)
    prefix = "[rank %d] " % get_rank()
    builtins.print("\n".join(prefix + line for line in text.split("\n")), **kwargs)


# ---------------------------------------------------------------------------------------------
# Reductions of one value


def _reduce_sum_tensor(t, what):
    out = t.detach().clone()
    if not _use_collectives(what):
        return out
    dev = _comm_device(out)
    buf = out.to(dev) if dev != out.device else out
    dist.all_reduce(buf, op=dist.ReduceOp.SUM)
    if buf is not out:
        out.copy_(buf)
    return out


def reduce_sum(x):
    """Sum of x over all ranks: a new tensor (detached, same dtype and device) or a number.

    Integers (Python's and numpy's) sum exactly as int64 and give an int; other real numbers sum
    as float64 and give a float.
    """
    if isinstance(x, torch.Tensor):
        return _reduce_sum_tensor(x, "reduce_sum")
    if isinstance(x, numbers.Integral):
        return int(_reduce_sum_tensor(torch.tensor(int(x), dtype=torch.int64), "reduce_sum").item())
    if isinstance(x, numbers.Real):
        return float(_reduce_sum_tensor(torch.tensor(float(x), dtype=torch.float64),
                                        "reduce_sum").item())
    raise TypeError("weft.torch.utils.reduce_sum: expected a tensor or a number, got %s" %
                    type(x).__name__)


def reduce_mean(x):
    """Mean of x over all ranks: a tensor (integer tensors become the default float dtype) or a
    float."""
    n = get_world_size() if _initialized() else 1
    if isinstance(x, torch.Tensor):
        t = x if (x.is_floating_point() or x.is_complex()) else x.to(torch.get_default_dtype())
        return _reduce_sum_tensor(t, "reduce_mean").div_(n)
    if isinstance(x, numbers.Real):
        return float(_reduce_sum_tensor(torch.tensor(float(x), dtype=torch.float64),
                                        "reduce_mean").item()) / n
    raise TypeError("weft.torch.utils.reduce_mean: expected a tensor or a number, got %s" %
                    type(x).__name__)


def barrier():
    """Waits until every rank has called barrier()."""
    if _use_collectives("barrier"):
        dist.barrier()


# ---------------------------------------------------------------------------------------------
# Agreement check: one small MAX all-reduce, so that a mismatch fails on every rank instead of
# one rank waiting forever for a broadcast the others never start.


def _layout(tensors):
    return ";".join("%s%s" % (str(t.dtype).replace("torch.", ""), tuple(t.shape)) for t in tensors)


def _check_same(what, count, text, describe):
    """Raises TensorMismatchError on every rank unless all ranks pass the same count and text.

    count and the crc32 of text go through all-reduce MAX negated and not, giving each rank the
    largest and smallest value of every rank: equal iff all ranks agree.
    """
    sig = zlib.crc32(text.encode())
    vals = torch.tensor([count, -count, sig, -sig], dtype=torch.int64, device=_comm_device())
    dist.all_reduce(vals, op=dist.ReduceOp.MAX)
    hi_count, lo_count, hi_sig, lo_sig = vals.tolist()
    lo_count, lo_sig = -lo_count, -lo_sig
    if hi_count != lo_count:
        raise TensorMismatchError(
            "weft.torch.utils.%s: ranks pass different numbers of %s: rank %d passes %d, the "
            "ranks pass between %d and %d; every rank must pass the same %s" %
            (what, describe, get_rank(), count, lo_count, hi_count, describe))
    if hi_sig != lo_sig:
        shown = text if len(text) <= 300 else text[:300] + "..."
        raise TensorMismatchError(
            "weft.torch.utils.%s: ranks pass %d %s each but their shapes or dtypes differ; "
            "rank %d passes [%s]" % (what, count, describe, get_rank(), shown))


# ---------------------------------------------------------------------------------------------
# Bucketed collectives over many tensors


def _buckets(tensors, bucket_bytes):
    """Splits tensors, in order, into lists of one device and dtype of at most bucket_bytes each
    (a tensor larger than that gets a bucket of its own), ordered by their first tensor: the order
    in which they fill up when the tensors arrive in list order. The split depends only on the
    tensors' order, shapes and dtypes, so ranks that agree on those make the same buckets."""
    out = []  # (index of the first tensor, tensors)
    open_ = {}  # (device, dtype) -> [index, tensors, bytes]
    for i, t in enumerate(tensors):
        key = (t.device, t.dtype)
        cur = open_.get(key)
        nbytes = t.numel() * t.element_size()
        if cur is not None and cur[2] + nbytes > bucket_bytes:
            out.append((cur[0], cur[1]))
            cur = None
        if cur is None:
            cur = open_[key] = [i, [], 0]
        cur[1].append(t)
        cur[2] += nbytes
    out.extend((cur[0], cur[1]) for cur in open_.values())
    out.sort(key=lambda b: b[0])
    return [b for _, b in out]


class _Flight:
    """One bucket on the wire: its flat buffer and the collective's work handle."""

    def __init__(self, tensors, flat, work):
        self.tensors, self.flat, self.work = tensors, flat, work

    def finish(self, divide_by=None):
        self.work.wait()
        flat = self.flat
        if divide_by is not None:
            flat.div_(divide_by)
        with torch.no_grad():
            for t, r in zip(self.tensors, _unflatten_dense_tensors(flat, self.tensors)):
                t.copy_(r)


def _launch(bucket, op):
    """Flattens one bucket and starts op ("sum" or ("bcast", src)) on it without waiting."""
    flat = _flatten_dense_tensors([t.detach() for t in bucket])
    dev = _comm_device(flat)
    if flat.device != dev:
        flat = flat.to(dev)
    if op == "sum":
        work = dist.all_reduce(flat, op=dist.ReduceOp.SUM, async_op=True)
    else:
        work = dist.broadcast(flat, src=op[1], async_op=True)
    return _Flight(bucket, flat, work)


def _bucketed(tensors, op, bucket_bytes, divide_by=None):
    """Runs op over tensors in buckets, all launched before the first is waited for."""
    flights = [_launch(b, op) for b in _buckets(tensors, bucket_bytes)]
    for f in flights:
        f.finish(divide_by)


def _tensor_list(what, tensors):
    if isinstance(tensors, torch.nn.Module):
        return list(tensors.parameters()) + list(tensors.buffers())
    if isinstance(tensors, torch.Tensor):
        return [tensors]
    out = list(tensors)
    for t in out:
        if not isinstance(t, torch.Tensor):
            raise TypeError("weft.torch.utils.%s: expected tensors, got %s" %
                            (what, type(t).__name__))
        if t.is_sparse:
            raise TypeError("weft.torch.utils.%s: sparse tensors are not supported" % what)
    return out


def broadcast_tensors(tensors, src=0, bucket_bytes=DEFAULT_BUCKET_BYTES):
    """Copies rank src's tensors into every rank's, in place (e.g. model.parameters() from rank 0,
    so that every rank starts from the same weights). A module means its parameters and buffers.

    First checks that every rank passes as many tensors of the same shapes and dtypes; if not,
    raises TensorMismatchError on every rank (a mismatched broadcast would hang or scramble data).
    Returns the list of tensors.
    """
    ts = _tensor_list("broadcast_tensors", tensors)
    if not _use_collectives("broadcast_tensors"):
        return ts
    _check_same("broadcast_tensors", len(ts), _layout(ts), "tensors")
    _bucketed(ts, ("bcast", src), bucket_bytes)
    return ts


def sync_buffers(module, mode="average", src=0, bucket_bytes=DEFAULT_BUCKET_BYTES):
    """Makes a module's buffers (BatchNorm running statistics...) the same on every rank.

    mode="average": floating-point buffers become their mean over the ranks, the others (counters
    such as num_batches_tracked, which cannot be averaged) are taken from rank src.
    mode="broadcast": every buffer is taken from rank src.
    """
    if mode not in ("average", "broadcast"):
        raise ValueError("weft.torch.utils.sync_buffers: mode must be \"average\" or \"broadcast\", "
                         "got %r" % (mode,))
    bufs = list(module.buffers())
    if not _use_collectives("sync_buffers"):
        return
    _check_same("sync_buffers", len(bufs), _layout(bufs), "buffers")
    if mode == "broadcast":
        _bucketed(bufs, ("bcast", src), bucket_bytes)
        return
    floats = [b for b in bufs if b.is_floating_point()]
    others = [b for b in bufs if not b.is_floating_point()]
    # Both kinds in flight together; the broadcasts are waited for after the sums.
    flights = [_launch(b, "sum") for b in _buckets(floats, bucket_bytes)]
    bflights = [_launch(b, ("bcast", src)) for b in _buckets(others, bucket_bytes)]
    n = dist.get_world_size()
    for f in flights:
        f.finish(divide_by=n)
    for f in bflights:
        f.finish()


# ---------------------------------------------------------------------------------------------
# Gradients


def _grad_params(what, model):
    if isinstance(model, torch.nn.Module):
        params = list(model.parameters())
    elif isinstance(model, torch.Tensor):
        params = [model]
    else:
        params = list(model)
    params = [p for p in params if p.requires_grad]
    for p in params:
        if p.grad is not None and p.grad.is_sparse:
            raise TypeError("weft.torch.utils.%s: sparse gradients are not supported" % what)
    return params


def _agree_on_grads(what, params):
    """Which of params have a gradient on some rank, checking the parameter layout on the way.

    A parameter unused in this step's forward has no gradient on this rank but maybe one on
    another; its gradient must then count as zero here (as DDP does), or the ranks' buckets would
    differ. One MAX all-reduce carries both the layout check and this mask.
    """
    text = _layout(params)
    sig = zlib.crc32(text.encode())
    n = len(params)
    has = [0 if p.grad is None else 1 for p in params]
    all_have = int(all(has))
    # Ranks with different parameter counts would send masks of different lengths, so a fixed
    # head goes first; it also says whether every rank has every gradient (the usual case), in
    # which case the mask need not travel.
    head = torch.tensor([n, -n, sig, -sig, -all_have], dtype=torch.int64, device=_comm_device())
    dist.all_reduce(head, op=dist.ReduceOp.MAX)
    hi_n, lo_n, hi_sig, lo_sig, not_all = head.tolist()
    if hi_n != -lo_n:
        raise TensorMismatchError(
            "weft.torch.utils.%s: ranks pass different numbers of parameters: rank %d has %d, the "
            "ranks have between %d and %d; every rank must hold the same model" %
            (what, get_rank(), n, -lo_n, hi_n))
    if hi_sig != -lo_sig:
        raise TensorMismatchError(
            "weft.torch.utils.%s: ranks hold %d parameters each but their shapes or dtypes differ; "
            "rank %d has [%s]" % (what, n, get_rank(), text[:300]))
    if not_all == -1:
        return params
    mask = torch.tensor(has, dtype=torch.int64, device=_comm_device())
    dist.all_reduce(mask, op=dist.ReduceOp.MAX)
    return [p for p, m in zip(params, mask.tolist()) if m]


def sync_grad(model, bucket_bytes=DEFAULT_BUCKET_BYTES, average=True):
    """Averages (or with average=False sums) the gradients of model (a module or parameters) over
    the ranks, in place; call it after loss.backward() and before optimizer.step().

    Many small gradients travel as a few flat buckets of at most bucket_bytes each, all launched
    asynchronously before the first is waited for. A parameter with a gradient on some ranks only
    counts as zero on the others (and gets a zero .grad there); one with no gradient anywhere is
    left alone.
    """
    params = _grad_params("sync_grad", model)
    if not _use_collectives("sync_grad"):
        return
    live = _agree_on_grads("sync_grad", params)
    for p in live:
        if p.grad is None:
            p.grad = torch.zeros_like(p)
    n = dist.get_world_size()
    _bucketed([p.grad for p in live], "sum", bucket_bytes, divide_by=n if average else None)


def _grad_accumulator(p):
    """The autograd node that writes p.grad; kept alive by the caller, or its hooks vanish."""
    with torch.enable_grad():  # a GradSync made under no_grad() still needs the graph node
        return p.expand_as(p).grad_fn.next_functions[0][0]


class GradSync:
    """Averages gradients while backward runs: each bucket starts its all-reduce as soon as the
    gradients in it are all computed, overlapping communication with the rest of backward.

        gs = GradSync(model)          # same model on every rank
        loss.backward()
        gs.wait()                     # before optimizer.step()

    Buckets hold parameters in reverse order (the order backward computes them) and start strictly
    in bucket order, so every rank issues the same collectives in the same order even when its
    backward finishes buckets in another order. wait() starts what backward did not reach (unused
    parameters count as zero gradients) and copies the averages into .grad.
    """

    def __init__(self, model, bucket_bytes=DEFAULT_BUCKET_BYTES, average=True):
        self.params = _grad_params("GradSync", model)
        self.average = average
        self.active = _use_collectives("GradSync")
        self._handles = []
        if not self.active:
            return
        _check_same("GradSync", len(self.params), _layout(self.params), "parameters")
        order = list(reversed(self.params))
        self._buckets = _buckets(order, bucket_bytes)
        self._bucket_of = {}
        for i, b in enumerate(self._buckets):
            for p in b:
                self._bucket_of[id(p)] = i
        self._reset()
        for p in self.params:
            self._handles.append(self._hook(p))

    def _hook(self, p):
        if hasattr(p, "register_post_accumulate_grad_hook"):  # torch >= 2.1
            return p.register_post_accumulate_grad_hook(lambda param: self._ready(param))
        acc = _grad_accumulator(p)
        handle = acc.register_hook(lambda *unused: self._ready(p))
        return (acc, handle)

    def _reset(self):
        self._pending = [len(b) for b in self._buckets]
        self._next = 0
        self._flights = []

    def _ready(self, p):
        i = self._bucket_of[id(p)]
        self._pending[i] -= 1
        while self._next < len(self._buckets) and self._pending[self._next] <= 0:
            self._start(self._next)

    def _start(self, i):
        bucket = self._buckets[i]
        for p in bucket:
            if p.grad is None:
                p.grad = torch.zeros_like(p)
        self._flights.append(_launch([p.grad for p in bucket], "sum"))
        self._next = i + 1

    def wait(self):
        """Finishes every bucket's all-reduce and leaves the result in each parameter's .grad."""
        if not self.active:
            return
        try:
            while self._next < len(self._buckets):
                self._start(self._next)
            n = dist.get_world_size() if self.average else None
            for f in self._flights:
                f.finish(divide_by=n)
        finally:
            self._reset()

    def remove(self):
        """Takes the hooks off the parameters."""
        for h in self._handles:
            (h[1] if isinstance(h, tuple) else h).remove()
        self._handles = []


# ---------------------------------------------------------------------------------------------
# Metrics, ordering, information


def average_metrics(metrics, count=1):
    """Weighted mean of a dict of numbers over the ranks: sum(value * count) / sum(count), count
    being how many samples this rank's values stand for. Every rank must pass the same keys.
    Returns a dict of floats (nan where the counts sum to zero)."""
    keys = sorted(metrics)
    vals = torch.tensor([float(count)] + [float(metrics[k]) * float(count) for k in keys],
                        dtype=torch.float64)
    if _use_collectives("average_metrics"):
        _check_same("average_metrics", len(keys), ",".join(map(str, keys)), "metric keys")
        vals = vals.to(_comm_device())
        dist.all_reduce(vals, op=dist.ReduceOp.SUM)
    total, *sums = vals.tolist()
    return {k: (s / total if total != 0 else float("nan")) for k, s in zip(keys, sums)}


@contextlib.contextmanager
def zero_first():
    """Local rank 0 of each host runs the block first, then the other ranks run it:

        with zero_first():
            ds = torchvision.datasets.MNIST(root, download=True)   # downloads once per host

    Rank 0 lets the others go even when its block raises, so they never wait forever.
    """
    if not _use_collectives("zero_first"):
        yield
        return
    first = get_local_rank() == 0
    if not first:
        dist.barrier()
    try:
        yield
    finally:
        if first:
            dist.barrier()


def _master():
    addr = os.environ.get("MASTER_ADDR") or os.environ.get("WEFT_MASTER_ADDR")
    port = os.environ.get("MASTER_PORT") or os.environ.get("WEFT_MASTER_PORT")
    url = os.environ.get("WEFT_INIT_URL", "")
    if (addr is None or port is None) and url.startswith("tcp://"):
        host, _, p = url[len("tcp://"):].rpartition(":")
        addr = addr or host.strip("[]") or None
        port = port or p or None
    try:
        port = int(port) if port is not None else None
    except ValueError:
        pass
    return addr, port


def get_dist_info():
    """DistInfo(world_size, rank, local_rank, master_addr, master_port, backend); the master is
    what the launcher set (None when unset), backend None before init_process_group()."""
    addr, port = _master()
    backend = str(dist.get_backend()) if _initialized() else None
    return DistInfo(get_world_size(), get_rank(), get_local_rank(), addr, port, backend)


def _smaps_uss_bytes():
    """Unique set size from /proc/self/smaps_rollup (Linux >= 4.14), else /proc/self/smaps."""
    fields = ("Private_Clean:", "Private_Dirty:", "Private_Hugetlb:")
    for path in ("/proc/self/smaps_rollup", "/proc/self/smaps"):
        try:
            with open(path) as f:
                total_kb = 0
                for line in f:
                    if line.startswith(fields):
                        total_kb += int(line.split()[1])
            return total_kb * 1024
        except OSError:
            continue
    raise OSError("weft.torch.utils.memory_uss_bytes: needs psutil or /proc/self/smaps")


def memory_uss_bytes():
    """This process's unique set size in bytes: memory that would be freed if it exited (shared
    libraries and pages shared with other ranks do not count)."""
    try:
        import psutil
    except ImportError:
        return _smaps_uss_bytes()
    try:
        return psutil.Process().memory_full_info().uss
    except (psutil.Error, OSError, AttributeError):
        return _smaps_uss_bytes()


def memory_gb():
    """memory_uss_bytes() in GB of 2**30 bytes."""
    return memory_uss_bytes() / float(1 << 30)
