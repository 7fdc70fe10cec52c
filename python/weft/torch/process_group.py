"""process_group.py -- ProcessGroupWeft: torch.distributed's "weft" backend, on CPU tensors.

A Python subclass of torch.distributed.ProcessGroup: torch 1.13 and 2.x both call its methods from
Python (dist.all_reduce -> pg.allreduce) and, through pybind's trampoline, from C++ (DDP). Every
operation is asynchronous underneath (see completion.py); async_op=False is torch waiting on the
Work at once.

Tensors that are not contiguous go through a contiguous copy (copied back on completion); list
forms (all_gather into a list, reduce_scatter from a list) go through one flat staging tensor.
"""
import weakref

import torch
import torch.distributed as dist

from . import bootstrap, tensors as tz
from .completion import Completion

BACKEND_NAME = "weft"
# How long shutdown lets queued operations finish before leaving them to the daemon thread.
_STOP_TIMEOUT_S = 60


class ProcessGroupWeft(dist.ProcessGroup):
    def __init__(self, store, rank, size, timeout=None):
        super().__init__(rank, size)
        self._comm = bootstrap.connect(store, rank, size)
        self._completion = Completion(f"weft-pg-rank{rank}")
        # Closes the communicator when the group is collected or the interpreter exits, whichever
        # comes first; holds no reference to self.
        self._closer = weakref.finalize(self, _close, self._comm, self._completion, False)

    # ---- identity ----------------------------------------------------------------------------

    def getBackendName(self):
        return BACKEND_NAME

    @property
    def comm(self):
        """The weft.Comm underneath."""
        return self._comm

    def shutdown(self):
        """Finishes queued operations and destroys the communicator (destroy_process_group in
        torch 2.x calls this)."""
        self._closer.detach()
        _close(self._comm, self._completion, False)

    def abort(self):
        """Aborts the communicator: peers blocked on it fail promptly."""
        self._closer.detach()
        _close(self._comm, self._completion, True)

    # ---- collectives -------------------------------------------------------------------------

    def allreduce(self, tensors, opts=None):
        t = tz.single(tensors, "all_reduce")
        op = tz.weft_op(_reduce_op(opts), t, "all_reduce")
        io = _Staged(t, "all_reduce")
        req = self._comm.all_reduce(io.buffer, op=op, async_op=True)
        return self._completion.submit(req, io.finish, [t])

    def allreduce_coalesced(self, tensors, opts=None):
        tensors = list(tensors)
        if not tensors:
            return self._completion.completed([], "all_reduce_coalesced")
        op = tz.weft_op(_reduce_op(opts), tensors[0], "all_reduce_coalesced")
        flat = _Flat(tensors, "all_reduce_coalesced")
        req = self._comm.all_reduce(flat.buffer, op=op, async_op=True)
        return self._completion.submit(req, flat.scatter_back, tensors)

    def broadcast(self, tensors, opts=None):
        t = tz.single(tensors, "broadcast")
        root = _root(opts, "broadcast")
        io = _Staged(t, "broadcast")
        req = self._comm.broadcast(io.buffer, root=root, async_op=True)
        return self._completion.submit(req, io.finish, [t])

    def reduce(self, tensors, opts=None):
        t = tz.single(tensors, "reduce")
        op = tz.weft_op(_reduce_op(opts), t, "reduce")
        io = _Staged(t, "reduce")
        req = self._comm.reduce(io.buffer, op=op, root=_root(opts, "reduce"), async_op=True)
        return self._completion.submit(req, io.finish, [t])

    def allgather(self, output_tensors, input_tensors, opts=None):
        inp = tz.single(input_tensors, "all_gather")
        outs = list(_one_list(output_tensors, "all_gather"))
        self._check_parts(outs, inp, "all_gather", "output")
        src = _contiguous(inp, "all_gather")
        flat = torch.empty(self.size() * inp.numel(), dtype=inp.dtype)
        req = self._comm.all_gather(tz.as_buffer(src, "all_gather"),
                                    tz.as_buffer(flat, "all_gather"), async_op=True)

        def finish():
            n = inp.numel()
            for i, o in enumerate(outs):
                o.copy_(flat[i * n:(i + 1) * n].view(o.shape))

        return self._completion.submit(req, finish, [outs])

    def _allgather_base(self, output, input, opts=None):
        if output.numel() != self.size() * input.numel():
            raise ValueError(f"weft: all_gather_into_tensor: output has {output.numel()} elements, "
                             f"needs {self.size()} x {input.numel()}")
        _same_dtype(output, input, "all_gather_into_tensor")
        src = _contiguous(input, "all_gather_into_tensor")
        io = _Staged(output, "all_gather_into_tensor")
        req = self._comm.all_gather(tz.as_buffer(src, "all_gather_into_tensor"), io.buffer,
                                    async_op=True)
        return self._completion.submit(req, io.finish, [output])

    def reduce_scatter(self, output_tensors, input_tensors, opts=None):
        out = tz.single(output_tensors, "reduce_scatter")
        ins = list(_one_list(input_tensors, "reduce_scatter"))
        self._check_parts(ins, out, "reduce_scatter", "input")
        op = tz.weft_op(_reduce_op(opts), out, "reduce_scatter")
        flat = torch.cat([x.reshape(-1) for x in ins]) if ins else torch.empty(0, dtype=out.dtype)
        io = _Staged(out, "reduce_scatter")
        req = self._comm.reduce_scatter(tz.as_buffer(flat, "reduce_scatter"), io.buffer, op=op,
                                        async_op=True)
        return self._completion.submit(req, io.finish, [out])

    def _reduce_scatter_base(self, output, input, opts=None):
        if input.numel() != self.size() * output.numel():
            raise ValueError(f"weft: reduce_scatter_tensor: input has {input.numel()} elements, "
                             f"needs {self.size()} x {output.numel()}")
        _same_dtype(output, input, "reduce_scatter_tensor")
        op = tz.weft_op(_reduce_op(opts), output, "reduce_scatter_tensor")
        src = _contiguous(input, "reduce_scatter_tensor")
        io = _Staged(output, "reduce_scatter_tensor")
        req = self._comm.reduce_scatter(tz.as_buffer(src, "reduce_scatter_tensor"), io.buffer,
                                        op=op, async_op=True)
        return self._completion.submit(req, io.finish, [output])

    def barrier(self, opts=None):
        req = self._comm.barrier(async_op=True)
        return self._completion.submit(req, None, [])

    # Point to point. weft matches a send with the peer's recv in the order both issue them, so
    # `tag` cannot reorder messages; it is accepted for torch's signature and otherwise unused.
    def send(self, tensors, dst_rank, tag=0):
        t = tz.single(tensors, "send")
        src = _contiguous(t, "send")
        req = self._comm.send(tz.as_buffer(src, "send"), int(dst_rank), async_op=True)
        return self._completion.submit(req, None, [t])

    def recv(self, tensors, src_rank, tag=0):
        t = tz.single(tensors, "recv")
        io = _Staged(t, "recv")
        req = self._comm.recv(io.buffer, int(src_rank), async_op=True)
        return self._completion.submit(req, io.finish, [t])

    def recv_anysource(self, tensors, tag=0):
        raise RuntimeError("weft: recv needs a source rank (weft has no receive from any source)")

    def _check_parts(self, parts, like, what, kind):
        if len(parts) != self.size():
            raise ValueError(f"weft: {what}: {kind} list has {len(parts)} tensors, the group has "
                             f"{self.size()} ranks")
        tz.weft_dtype(like, what)
        for p in parts:
            _same_dtype(p, like, what)
            if p.numel() != like.numel():
                raise ValueError(f"weft: {what}: {kind} tensors must each hold {like.numel()} "
                                 f"elements, one holds {p.numel()}")

    def __repr__(self):
        return f"ProcessGroupWeft(rank={self.rank()}, size={self.size()})"


def create(store, rank, size, timeout):
    """The creator torch.distributed calls for backend "weft"."""
    return ProcessGroupWeft(store, rank, size, timeout)


def _close(comm, completion, abort):
    try:
        if abort:
            comm.abort()
        else:
            comm.destroy()
    finally:
        completion.stop(_STOP_TIMEOUT_S)


class _Staged:
    """An in-place tensor as weft sees it: itself if contiguous, else a contiguous copy that
    finish() copies back."""

    def __init__(self, t, what):
        tz.weft_dtype(t, what)
        self.t = t
        self.c = t if t.is_contiguous() else t.contiguous()
        self.buffer = tz.as_buffer(self.c, what)

    def finish(self):
        if self.c is not self.t:
            self.t.copy_(self.c)


class _Flat:
    """Several tensors of one dtype as one flat buffer (allreduce_coalesced)."""

    def __init__(self, tensors, what):
        for t in tensors:
            _same_dtype(t, tensors[0], what)
        self.tensors = tensors
        self.flat = torch.cat([t.reshape(-1) for t in tensors])
        self.buffer = tz.as_buffer(self.flat, what)

    def scatter_back(self):
        offset = 0
        for t in self.tensors:
            n = t.numel()
            t.copy_(self.flat[offset:offset + n].view(t.shape))
            offset += n


def _contiguous(t, what):
    tz.weft_dtype(t, what)
    return t if t.is_contiguous() else t.contiguous()


def _same_dtype(a, b, what):
    tz.weft_dtype(a, what)
    if a.dtype != b.dtype:
        raise TypeError(f"weft: {what}: tensors of different dtypes ({a.dtype} and {b.dtype})")


def _one_list(lists, what):
    lists = list(lists)
    if len(lists) != 1:
        raise ValueError(f"weft: {what}: expected one tensor list per process, got {len(lists)}")
    return lists[0]


def _reduce_op(opts):
    if opts is None:
        return dist.ReduceOp.SUM
    op = getattr(opts, "reduceOp", None)
    return opts if op is None else op  # pg.allreduce(t, op) passes the op itself


def _root(opts, what):
    root = getattr(opts, "rootRank", 0) if opts is not None else 0
    if getattr(opts, "rootTensor", 0) != 0:
        raise ValueError(f"weft: {what}: one tensor per process, so rootTensor must be 0")
    return int(root)
