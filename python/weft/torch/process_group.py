"""process_group.py -- ProcessGroupWeft: torch.distributed's "weft" backend (CPU and CUDA tensors).

A Python subclass of torch.distributed.ProcessGroup, on torch 1.13 and 2.x alike. torch calls its
methods from Python (dist.all_reduce -> pg.allreduce, dist.all_gather_into_tensor ->
pg.all_gather_single on 2.13, pg._allgather_base on 1.13) and, through pybind's trampoline
(PyProcessGroup), from C++: DDP's reducer (allreduce, broadcast, get_future) and the
_c10d_functional ops behind DTensor and FSDP2. Every operation is asynchronous underneath (see
completion.py); async_op=False is torch waiting on the Work at once.

Why Python and not a C++ c10d::Backend. Evidence, from probing torch 2.13 at 2 ranks: its
PyProcessGroup trampoline forwards to Python getGroupName/setGroupName, allreduce(_coalesced),
allgather, all_gather_single_coalesced, reduce_scatter(_single_coalesced), all_to_all_single,
broadcast, barrier, send and recv (each new name falling back to the old one), and torch's Python
functions call the rest (all_gather_single, reduce_scatter_single, gather, scatter, alltoall,
_get_backend) on the object directly. With getGroupName/setGroupName here (without them torch 2.13
cannot name the group, and every functional collective, DTensor and FSDP2 fail with "ProcessGroup
name not set") and _get_backend (FSDP2 asks the backend whether it allocates tensors;
batch_isend_irecv and device_id= ask about coalescing and splitting), DDP with and without comm
hooks, the functional collectives, DTensor's redistribute and FSDP2's fully_shard all run and
match gloo (python/tests/test_torch2.py, test_ddp.py). A C++ extension would have to be compiled
against each torch generation's headers and C++ ABI (1.13 and 2.x differ in both) on every
machine that installs weft, for no operation the Python route lacks. What the Python route costs:
the Python work per call, about 40 us for a synchronous 1-element all_reduce on torch 2.13 (this
module and completion.py; weft's own call is about 10 us of the 50), measured against gloo in
results/2026-11-26-torch2-latency/; it stays that low because a synchronous call runs on the
caller's thread (_Calls) and an async one is waited on by its waiter (completion.py), with no
thread hand-off; batch_isend_irecv hands the group its sends and receives one by
one (torch coalesces only for a C++ ProcessGroup), so the group holds them back and issues them
together (p2p.py); and an exception raised while C++ calls a method can be lost, so every method
turns its errors into a failed Work (see _guard) whose wait() and future raise them.

Tensors that are not contiguous go through a contiguous copy (copied back on completion); list
forms (all_gather into a list, reduce_scatter from a list, the coalesced forms) go through one
flat staging tensor, so each is one weft operation. all_reduce of a torch.sparse_coo tensor
(SUM, as gloo's; DDP's sparse gradients) gathers each rank's non-zeros and sums them (sparse.py).
"""
import contextlib
import datetime
import functools
import os
import threading
import time
import weakref

import torch
import torch.distributed as dist

from ..errors import Result, WeftError
from . import bootstrap, p2p, sparse, tensors as tz
from ..buffers import Buffer
from ..comm import P2POp
from .completion import NO_REQUEST, Completion

BACKEND_NAME = "weft"
# How long shutdown lets queued operations finish before leaving them to the daemon thread.
_STOP_TIMEOUT_S = 60

def _guard(what, flushes=True):
    """Makes a method's error the Work's: C++ callers (DDP's reducer, the functional ops) may call
    a method from a thread that drops a Python exception, so a method never raises; its Work
    fails with the error instead, and wait() or the future raise it with its own type. torch's
    Python functions wait at once when async_op=False, so there the error is raised by the call
    as before. Unless flushes is False (send and recv, which join it), the method first issues
    the sends and receives held back (see p2p.py), so that operations run in program order."""

    def wrap(fn):
        @functools.wraps(fn)
        def method(self, *args, **kwargs):
            try:
                if flushes:
                    self._p2p.flush()
                return fn(self, *args, **kwargs)
            except Exception as e:  # noqa: BLE001 -- handed to the caller through the Work
                return self._completion.failed(e, what)

        return method

    return wrap


class ProcessGroupWeft(dist.ProcessGroup):
    def __init__(self, store, rank, size, timeout=None):
        super().__init__(rank, size)
        self._timeout_s = _seconds(timeout)
        timeout_ms = _timeout_in_force_ms(self._timeout_s)
        self._comm = _connect(store, rank, size, self._timeout_s)
        causes = _Causes(store, rank, size, timeout_ms)
        self._calls = _Calls(self._comm, causes.explain)
        self._completion = Completion(f"weft-pg-rank{rank}", causes.explain)
        self._p2p = p2p.Batch(self._comm, self._calls, self._completion, f"weft-pg-rank{rank}")
        self._group_name = ""
        self._group_desc = ""
        # Closes the communicator when the group is collected or the interpreter exits, whichever
        # comes first; holds no reference to self.
        self._closer = weakref.finalize(self, _close, self._comm, self._completion, self._p2p,
                                        False)

    # ---- identity ----------------------------------------------------------------------------

    def getBackendName(self):
        return BACKEND_NAME

    # torch 2.x names every group (pg._set_group_name) and its functional collectives find the
    # group by that name; the trampoline forwards both to Python, so the name lives here.
    def getGroupName(self):
        return self._group_name

    def setGroupName(self, name):
        self._group_name = name

    def getGroupDesc(self):
        return self._group_desc

    def setGroupDesc(self, desc):
        self._group_desc = desc

    def _get_backend(self, device=None):
        """What torch 2.x asks a group's per-device backend (batch_isend_irecv, device_id=,
        FSDP2's allocator): weft is its own backend and does none of the optional extras."""
        return _BackendInfo(self)

    @property
    def comm(self):
        """The weft.Comm underneath (sends and receives held back are issued first, so that
        what is called on it runs after them)."""
        self._p2p.flush()
        return self._comm

    def shutdown(self):
        """Finishes queued operations and destroys the communicator (destroy_process_group in
        torch 2.x calls this)."""
        self._closer.detach()
        _close(self._comm, self._completion, self._p2p, False)

    def abort(self):
        """Aborts the communicator: peers blocked on it fail promptly."""
        self._closer.detach()
        _close(self._comm, self._completion, self._p2p, True)

    def monitored_barrier(self, opts=None, wait_all_ranks=False):
        raise RuntimeError("weft: monitored_barrier is not supported (torch implements it for "
                           "gloo only); use barrier(), which fails within the group's timeout "
                           "naming the rank that did not arrive")

    # ---- collectives -------------------------------------------------------------------------

    @_guard("all_reduce")
    def allreduce(self, tensors, opts=None):
        t = tz.single(tensors, "all_reduce")
        if isinstance(t, torch.Tensor) and t.layout == torch.sparse_coo:
            return self._sparse_allreduce(t, opts)
        op, factor = _op(opts, t, "all_reduce")
        io = _Staged(t, "all_reduce")
        if factor is not None:
            io.c.mul_(factor)  # in place anyway: the result overwrites it
        req = self._calls.all_reduce(io.buffer, op=op, async_op=_async(opts))
        return self._completion.submit(req, io.finish, [t])

    def _sparse_allreduce(self, t, opts):
        # See sparse.py: the records, gathered before this returns (each rank needs every
        # rank's to size its receive), then one collective of indices and values, issued as
        # the call asks (async or not) and summed into t when it completes.
        sparse.check_op(_reduce_op(opts), "all_reduce")
        plan = sparse.Plan(t, self.rank(), self.size(), "all_reduce")
        self._calls.all_gather(tz.as_buffer(plan.record, "all_reduce"),
                               tz.as_buffer(plan.records, "all_reduce"), async_op=False)
        plan.agree()
        if not any(plan.nnz):  # nothing to exchange: every rank's sum is empty
            plan.finish()
            return self._completion.completed([t], "all_reduce")
        req = plan.issue(self._calls, _async(opts))
        return self._completion.submit(req, plan.finish, [t])

    @_guard("all_reduce_coalesced")
    def allreduce_coalesced(self, tensors, opts=None):
        tensors = list(tensors)
        if not tensors:
            return self._completion.completed([], "all_reduce_coalesced")
        op, factor = _op(opts, tensors[0], "all_reduce_coalesced")
        flat = _Flat(tensors, "all_reduce_coalesced")
        if factor is not None:
            flat.flat.mul_(factor)
        req = self._calls.all_reduce(flat.buffer, op=op, async_op=_async(opts))
        return self._completion.submit(req, flat.scatter_back, tensors)

    @_guard("broadcast")
    def broadcast(self, tensors, opts=None):
        t = tz.single(tensors, "broadcast")
        root = _root(opts, "broadcast")
        io = _Staged(t, "broadcast")
        req = self._calls.broadcast(io.buffer, root=root, async_op=_async(opts))
        return self._completion.submit(req, io.finish, [t])

    @_guard("reduce")
    def reduce(self, tensors, opts=None):
        t = tz.single(tensors, "reduce")
        op, factor = _op(opts, t, "reduce")
        io = _Staged(t, "reduce")
        if factor is not None:
            io.c.mul_(factor)
        req = self._calls.reduce(io.buffer, op=op, root=_root(opts, "reduce"),
                                 async_op=_async(opts))
        return self._completion.submit(req, io.finish, [t])

    @_guard("all_gather")
    def allgather(self, output_tensors, input_tensors, opts=None):
        inp = tz.single(input_tensors, "all_gather")
        outs = list(_one_list(output_tensors, "all_gather"))
        self._check_parts(outs, inp, "all_gather", "output")
        src = _contiguous(inp, "all_gather")
        flat = torch.empty(self.size() * inp.numel(), dtype=inp.dtype, device=inp.device)
        req = self._calls.all_gather(tz.as_buffer(src, "all_gather"),
                                    tz.as_buffer(flat, "all_gather"), async_op=_async(opts))

        def finish():
            _split_into(flat, outs)

        return self._completion.submit(req, finish, [outs])

    @_guard("all_gather_into_tensor")
    def all_gather_single(self, output, input, opts=None):
        if output.numel() != self.size() * input.numel():
            raise ValueError(f"weft: all_gather_into_tensor: output has {output.numel()} elements, "
                             f"needs {self.size()} x {input.numel()}")
        _same_dtype(output, input, "all_gather_into_tensor")
        src = _contiguous(input, "all_gather_into_tensor")
        io = _Staged(output, "all_gather_into_tensor")
        req = self._calls.all_gather(tz.as_buffer(src, "all_gather_into_tensor"), io.buffer,
                                    async_op=_async(opts))
        return self._completion.submit(req, io.finish, [output])

    _allgather_base = all_gather_single  # the name before torch 2.13

    @_guard("all_gather_coalesced")
    def allgather_coalesced(self, output_lists, input_list, opts=None):
        # output_lists[r][i] is rank r's input_list[i]: one all_gather of the inputs laid end to
        # end, each rank's segment then split back.
        inputs = list(input_list)
        outs = [list(o) for o in output_lists]
        if len(outs) != self.size():
            raise ValueError(f"weft: all_gather_coalesced: {len(outs)} output lists, the group has "
                             f"{self.size()} ranks")
        for r, row in enumerate(outs):
            if len(row) != len(inputs) or any(o.numel() != i.numel() for o, i in zip(row, inputs)):
                raise ValueError(f"weft: all_gather_coalesced: output list {r} must match the "
                                 f"{len(inputs)} input tensors in number and sizes")
        if not inputs:
            return self._completion.completed([], "all_gather_coalesced")
        flat = _Flat(inputs, "all_gather_coalesced")
        n = flat.flat.numel()
        out = torch.empty(self.size() * n, dtype=flat.flat.dtype, device=flat.flat.device)
        req = self._calls.all_gather(flat.buffer, tz.as_buffer(out, "all_gather_coalesced"),
                                    async_op=_async(opts))

        def finish():
            for r, row in enumerate(outs):
                _split_into(out[r * n:(r + 1) * n], row)

        return self._completion.submit(req, finish, outs)

    @_guard("all_gather_into_tensor_coalesced")
    def all_gather_single_coalesced(self, outputs, inputs, opts=None):
        # outputs[i] = every rank's inputs[i], rank after rank: one all_gather of the inputs
        # laid end to end; rank r's segment holds its inputs in order.
        outputs, inputs = list(outputs), list(inputs)
        what = "all_gather_into_tensor_coalesced"
        _pairs(outputs, inputs, lambda o, i: o.numel() == self.size() * i.numel(), what,
               f"each output must hold {self.size()} x its input")
        if not inputs:
            return self._completion.completed([], what)
        flat = _Flat(inputs, what)
        n = flat.flat.numel()
        out = torch.empty(self.size() * n, dtype=flat.flat.dtype, device=flat.flat.device)
        req = self._calls.all_gather(flat.buffer, tz.as_buffer(out, what), async_op=_async(opts))

        def finish():
            rows = out.view(self.size(), n)
            offset = 0
            for o, i in zip(outputs, inputs):
                k = i.numel()
                o.copy_(rows[:, offset:offset + k].reshape(o.shape))
                offset += k

        return self._completion.submit(req, finish, outputs)

    allgather_into_tensor_coalesced = all_gather_single_coalesced

    @_guard("reduce_scatter")
    def reduce_scatter(self, output_tensors, input_tensors, opts=None):
        out = tz.single(output_tensors, "reduce_scatter")
        ins = list(_one_list(input_tensors, "reduce_scatter"))
        self._check_parts(ins, out, "reduce_scatter", "input")
        op, factor = _op(opts, out, "reduce_scatter")
        flat = (torch.cat([x.reshape(-1) for x in ins]) if ins
                else torch.empty(0, dtype=out.dtype, device=out.device))
        if factor is not None:
            flat.mul_(factor)  # a copy: the inputs stay as they were
        io = _Staged(out, "reduce_scatter")
        req = self._calls.reduce_scatter(tz.as_buffer(flat, "reduce_scatter"), io.buffer, op=op,
                                        async_op=_async(opts))
        return self._completion.submit(req, io.finish, [out])

    @_guard("reduce_scatter_tensor")
    def reduce_scatter_single(self, output, input, opts=None):
        what = "reduce_scatter_tensor"
        if input.numel() != self.size() * output.numel():
            raise ValueError(f"weft: {what}: input has {input.numel()} elements, "
                             f"needs {self.size()} x {output.numel()}")
        _same_dtype(output, input, what)
        op, factor = _op(opts, output, what)
        src = _contiguous(input, what)
        if factor is not None:
            src = src * factor
        io = _Staged(output, what)
        req = self._calls.reduce_scatter(tz.as_buffer(src, what), io.buffer, op=op,
                                        async_op=_async(opts))
        return self._completion.submit(req, io.finish, [output])

    _reduce_scatter_base = reduce_scatter_single  # the name before torch 2.13

    @_guard("reduce_scatter_tensor_coalesced")
    def reduce_scatter_single_coalesced(self, outputs, inputs, opts=None):
        # One reduce_scatter: rank r's block of the send buffer is, for each pair in turn, the
        # r-th chunk of inputs[i]; rank r receives outputs[0..] end to end.
        outputs, inputs = list(outputs), list(inputs)
        what = "reduce_scatter_tensor_coalesced"
        _pairs(outputs, inputs, lambda o, i: i.numel() == self.size() * o.numel(), what,
               f"each input must hold {self.size()} x its output")
        if not inputs:
            return self._completion.completed([], what)
        op, factor = _op(opts, outputs[0], what)
        send = torch.cat([i.reshape(self.size(), -1) for i in inputs], dim=1).reshape(-1)
        if factor is not None:
            send.mul_(factor)
        flat = _Flat(outputs, what)
        req = self._calls.reduce_scatter(tz.as_buffer(send, what), flat.buffer, op=op,
                                        async_op=_async(opts))
        return self._completion.submit(req, flat.scatter_back, outputs)

    reduce_scatter_tensor_coalesced = reduce_scatter_single_coalesced

    @_guard("all_to_all_single")
    def all_to_all_single(self, output, input, output_split_sizes, input_split_sizes, opts=None):
        what = "all_to_all_single"
        _same_dtype(output, input, what)
        src = _contiguous(input, what)
        io = _Staged(output, what)
        out_splits, in_splits = list(output_split_sizes), list(input_split_sizes)
        if not out_splits and not in_splits:
            if input.numel() % self.size() or output.numel() != input.numel():
                raise ValueError(f"weft: {what}: without split sizes input and output must hold "
                                 f"the same number of elements, a multiple of {self.size()}; "
                                 f"they hold {input.numel()} and {output.numel()}")
            req = self._calls.all_to_all(tz.as_buffer(src, what), io.buffer, async_op=_async(opts))
        else:
            send_counts = _counts(in_splits, input, self.size(), what, "input")
            recv_counts = _counts(out_splits, output, self.size(), what, "output")
            req = self._calls.all_to_allv(tz.as_buffer(src, what), send_counts, io.buffer,
                                         recv_counts, async_op=_async(opts))
        return self._completion.submit(req, io.finish, [output])

    alltoall_base = all_to_all_single  # the name before torch 2.13

    @_guard("all_to_all")
    def alltoall(self, output_tensors, input_tensors, opts=None):
        what = "all_to_all"
        outs, ins = list(output_tensors), list(input_tensors)
        if len(outs) != self.size() or len(ins) != self.size():
            raise ValueError(f"weft: {what}: {len(ins)} input and {len(outs)} output tensors, the "
                             f"group has {self.size()} ranks")
        for t in outs + ins:
            _same_dtype(t, ins[0], what)
        send = _Flat(ins, what)
        recv = _Flat(outs, what)
        req = self._calls.all_to_allv(send.buffer, [t.numel() for t in ins], recv.buffer,
                                     [t.numel() for t in outs], async_op=_async(opts))
        return self._completion.submit(req, recv.scatter_back, outs)

    @_guard("gather")
    def gather(self, output_tensors, input_tensors, opts=None):
        what = "gather"
        inp = tz.single(input_tensors, what)
        root = _root(opts, what)
        src = _contiguous(inp, what)
        if self.rank() == root:
            outs = list(_one_list(output_tensors, what))
            self._check_parts(outs, inp, what, "output")
            flat = torch.empty(self.size() * inp.numel(), dtype=inp.dtype, device=inp.device)
            recv = tz.as_buffer(flat, what)
        else:
            if any(len(o) for o in output_tensors):
                raise ValueError(f"weft: {what}: only the destination rank {root} passes a gather "
                                 f"list, rank {self.rank()} passed one")
            outs, recv = [], None
        req = self._calls.gather(tz.as_buffer(src, what), recv, root=root, async_op=_async(opts))

        def finish():
            if outs:
                _split_into(flat, outs)

        return self._completion.submit(req, finish, [outs] if outs else [])

    @_guard("scatter")
    def scatter(self, output_tensors, input_tensors, opts=None):
        what = "scatter"
        out = tz.single(output_tensors, what)
        root = _root(opts, what)
        send = None
        if self.rank() == root:
            ins = list(_one_list(input_tensors, what))
            self._check_parts(ins, out, what, "input")
            send = _Flat(ins, what).buffer
        elif any(len(i) for i in input_tensors):
            raise ValueError(f"weft: {what}: only the source rank {root} passes a scatter list, "
                             f"rank {self.rank()} passed one")
        io = _Staged(out, what)
        req = self._calls.scatter(send, io.buffer, root=root, async_op=_async(opts))
        return self._completion.submit(req, io.finish, [out])

    @_guard("barrier")
    def barrier(self, opts=None):
        req = self._calls.barrier(async_op=_async(opts))
        return self._completion.submit(req, None, [])

    # Point to point. torch's tag travels with each message. Sends and receives of host tensors
    # are held back and issued together as one weft p2p_group (p2p.py: what issues them, and why:
    # a batch's sends and receives do not wait on one another); between two ranks messages still
    # pair up in the order both sides issue them, and the tags must agree pair by pair: a receive
    # posted for tag 2 while the peer's next send has tag 1 fails naming both tags. dist.send and
    # dist.recv wait on the Work at once, which issues the batch.
    @_guard("send", flushes=False)
    def send(self, tensors, dst_rank, tag=0):
        t = tz.single(tensors, "send")
        src = _contiguous(t, "send")
        return self._p2p.add("send", tz.as_buffer(src, "send"), int(dst_rank), int(tag), None,
                             [t], _lane(t))

    @_guard("recv", flushes=False)
    def recv(self, tensors, src_rank, tag=0):
        t = tz.single(tensors, "recv")
        io = _Staged(t, "recv")
        return self._p2p.add("recv", io.buffer, int(src_rank), int(tag), io.finish, [t],
                             _lane(t))

    # torch 1.13's batch_isend_irecv brackets its ops with these (torch 2.x calls them only for
    # the C++ ProcessGroup type, with a device): the batch is issued at the end, whatever the
    # time its ops took to hand over. reqs (1.13) is left as it is: the Works are torch's already.
    # Given a device (2.x), the answer is a Work for the batch.
    def _start_coalescing(self, device=None):
        self._p2p.flush()
        self._p2p.start_coalescing()

    def _end_coalescing(self, reqs_or_device=None):
        works = self._p2p.end_coalescing()
        if isinstance(reqs_or_device, list) or reqs_or_device is None:
            return None
        return self._completion.all_of(works, "coalesced p2p")

    # dist.recv and dist.irecv without src: a receive from any source (include/weft.h: each
    # sender's messages in order, racing senders first come first, the tag must match). weft
    # takes it only on its own, so the sends and receives held back go out first (_guard's
    # flush) and it joins no batch; it is always a request, whose `source` the Work's
    # _source_rank() reads (torch asks it after wait()). Host tensors only.
    @_guard("recv_anysource")
    def recv_anysource(self, tensors, tag=0):
        t = tz.single(tensors, "recv_anysource")
        if t.is_cuda:
            raise ValueError("weft: recv from any source (no src): only CPU tensors; weft "
                             "receives from any source into host memory only (name src for a "
                             "CUDA tensor)")
        io = _Staged(t, "recv")
        request = self._calls.recv(io.buffer, None, tag=int(tag), async_op=True)
        work = self._completion.submit(request, io.finish, [t])
        work._source_request = request
        return work

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


class _Causes:
    """Shares the first failure of each rank through the group's store, so that every survivor
    of a dead rank can name it.

    When a rank dies, weft tells its peers what they saw: a neighbour in the schedule times out
    receiving from it, another times out receiving from that neighbour, a third sees "rank N
    aborted the connection" (weft's REMOTE). Only the dead rank never fails. So each rank
    publishes its first failure; after a TIMEOUT or REMOTE failure a rank waits briefly for the
    others' and names those that published none (dead, or stuck outside weft), and, for REMOTE,
    adds the first failure that is not REMOTE.

    How briefly: wait_bound_s(timeout), a tenth of the timeout in force, at least 50 ms and at
    most 3 s (docs/torch.md). The ranks blocked in the same operation time out
    within about the skew of their arrival at it, and a rank told by a peer's abort hears of it
    as soon as that peer fails, so a reason that is coming arrives within a store round trip or
    two of this failure (milliseconds: test_torch_timeout at 3 ranks); the wait is only paid in
    full when some rank is silent, which a rank that never made the call always is. A tenth
    keeps the error within 10% of the timeout (torch's own backends report at the timeout); 50 ms
    leaves a loaded host a few store round trips; 3 s, the bound for long timeouts, is plenty for
    any rank that failed at about the same time."""

    _KEY = "weft_first_error/"
    # Bounds of the wait for the other ranks' failures, and how often the store is asked.
    MIN_WAIT_S, MAX_WAIT_S, POLL_S = 0.05, 3.0, 0.01

    def __init__(self, store, rank, size, timeout_ms=None):
        self._store, self._rank, self._size = store, rank, size
        self.wait_s = self.wait_bound_s(timeout_ms)
        self._published = False
        self._note = None  # what the search found, once: later failures must not wait again

    @classmethod
    def wait_bound_s(cls, timeout_ms):
        """The wait after a failure of a group whose weft timeout is timeout_ms (None: unknown)."""
        if not timeout_ms:
            return cls.MAX_WAIT_S
        return min(cls.MAX_WAIT_S, max(cls.MIN_WAIT_S, timeout_ms / 10000.0))

    def explain(self, error):
        code = getattr(error, "code", None)
        if not isinstance(error, WeftError) or code is None:
            return error
        try:
            if not self._published:
                self._published = True
                self._store.set(f"{self._KEY}{self._rank}", f"{int(code)}|{error.message}")
        except Exception:  # noqa: BLE001 -- the store dies with rank 0, which serves it
            self._note = ""
        if code not in (Result.TIMEOUT, Result.REMOTE):
            return error
        if self._note is None:
            self._note = self._search(code)
        if not self._note:
            return error
        return WeftError(f"{error.message}; {self._note}", code)

    def _search(self, code):
        """The note for a failure of this code: who is silent, and for REMOTE who failed first.
        A store that stops answering ends the wait but keeps what it told: rank 0 serves it, and
        a rank 0 that has failed too leaves once its own wait is over, which can be before this
        rank's (a rank told by rank 0's abort starts waiting later)."""
        others = {r: f"{self._KEY}{r}" for r in range(self._size) if r != self._rank}
        found = {}
        deadline = time.monotonic() + self.wait_s
        store_gone = False
        while True:
            try:
                for r, key in others.items():
                    if r not in found and self._has(key, deadline):
                        c, _, message = self._store.get(key).decode().partition("|")
                        found[r] = (int(c), message)
            except Exception:  # noqa: BLE001 -- gone with rank 0, which serves it
                store_gone = True
            left = deadline - time.monotonic()
            if store_gone or len(found) == len(others) or left <= 0:
                break
            time.sleep(min(self.POLL_S, left))
        notes = []
        silent = sorted(set(others) - set(found))
        if silent and not found and store_gone:
            return ""  # the store told nothing: no rank can be named
        if silent:
            ranks = ", ".join(f"rank {r}" for r in silent)
            within = ("before the group's store (served by rank 0) stopped answering"
                      if store_gone else f"within {self.wait_s:g} s of this one")
            notes.append(f"{ranks} reported no failure {within} (exited, killed, or stuck "
                         f"outside weft)")
        if code == Result.REMOTE:
            first = next(((r, m) for r, (c, m) in sorted(found.items())
                          if c != Result.REMOTE), None)
            if first is not None:
                notes.append(f"rank {first[0]} failed with: {first[1]}")
        return "; ".join(notes)

    def _has(self, key, deadline):
        if hasattr(self._store, "check"):
            return self._store.check([key])
        # torch 1.13's stores have no check(): a short wait instead, within the deadline.
        left_ms = int((deadline - time.monotonic()) * 1000)
        try:
            self._store.wait([key], datetime.timedelta(milliseconds=max(1, min(20, left_ms))))
            return True
        except RuntimeError:
            return False


class _BackendInfo:
    """pg._get_backend(device) for a weft group: the answers torch 2.x code looks for."""

    supports_coalescing = False
    supports_splitting = False
    supports_time_estimate = False
    supports_shrinking = False

    def __init__(self, pg):
        self._pg = pg

    def supports_tensor_alloc(self, device):
        return False

    def name(self):
        return BACKEND_NAME

    def rank(self):
        return self._pg.rank()

    def size(self):
        return self._pg.size()

    def _set_sequence_number_for_group(self):
        pass

    def eager_connect_single_device(self, device):
        pass  # weft connects in init_process_group already


def create(store, rank, size, timeout):
    """The creator torch.distributed calls for backend "weft"."""
    return ProcessGroupWeft(store, rank, size, timeout)


_ENV_LOCK = threading.Lock()


def _connect(store, rank, size, timeout_s):
    # weft reads WEFT_TIMEOUT_MS when a communicator is created; the timeout given to
    # init_process_group / new_group becomes that communicator's, unless the user set
    # WEFT_TIMEOUT_MS, which names weft's own knob and wins.
    if not timeout_s or "WEFT_TIMEOUT_MS" in os.environ:
        return bootstrap.connect(store, rank, size)
    with _ENV_LOCK:
        os.environ["WEFT_TIMEOUT_MS"] = str(_timeout_in_force_ms(timeout_s))
        try:
            return bootstrap.connect(store, rank, size)
        finally:
            del os.environ["WEFT_TIMEOUT_MS"]


def _timeout_in_force_ms(timeout_s):
    """The WEFT_TIMEOUT_MS _connect gave the communicator: the user's, else the group's; None
    when neither was given (weft's default then) or the user's does not parse (init refused it)."""
    if "WEFT_TIMEOUT_MS" in os.environ:
        try:
            return int(os.environ["WEFT_TIMEOUT_MS"])
        except ValueError:
            return None
    return max(1, min(int(timeout_s * 1000), 86400000)) if timeout_s else None


def _close(comm, completion, batch, abort):
    try:
        batch.close(abort)
        if abort:
            comm.abort()
        else:
            comm.destroy()
    finally:
        completion.stop(_STOP_TIMEOUT_S)


class _Calls:
    """The communicator as the methods call it.

    Host tensors: a call torch will wait on at once (opts.asyncOp False: what torch 2.x's Python
    functions pass for async_op=False, see _async) runs before returning, on the caller's thread,
    and returns NO_REQUEST; any other is issued asynchronously and returns a weft.Request. The
    synchronous route is weft's blocking call (about 10 us for 1 element on 2 ranks of this
    host) instead of a request issued to weft's progress thread and waited on (about 45 us): the
    progress thread's hand-offs are most of a small call's cost. Either way the call keeps its
    place among the communicator's operations (weft runs a blocking call after the requests
    issued before it).

    CUDA tensors: weft's device path, as NCCL does: the call is enqueued on the tensor's current
    CUDA stream and returns at once; the stream's later work (torch's use of the result, a copy out
    of a staging tensor) waits for the collective, so the Work is complete as far as the host is
    concerned (NO_REQUEST). On the legacy default stream (handle 0, which weft's C API reads as "no
    stream") the stream is synchronized first and the call runs before returning, which is correct
    but not overlapped. A failure of an enqueued call marks the communicator failed: the next call
    raises it. Untested on a GPU by the test suite (no GPU there); see
    results/2026-11-25-torch2-cuda/ for the run on one."""

    def __init__(self, comm, explain):
        self._comm = comm
        # A synchronous call's failure goes through the same explanation as a request's
        # (process_group._Causes), which completion.py applies to requests.
        self._explain = explain

    def __getattr__(self, name):
        method = getattr(self._comm, name)

        def call(*args, **kwargs):
            device = _cuda_device(args, kwargs)
            if device is None:
                if kwargs.get("async_op", False):
                    return method(*args, **kwargs)
                try:
                    method(*args, **kwargs)
                except WeftError as e:
                    raise self._explain(e) from None
                return NO_REQUEST
            kwargs.pop("async_op", None)
            stream = torch.cuda.current_stream(device)
            if stream.cuda_stream == 0:
                stream.synchronize()
                method(*args, **kwargs)
            else:
                method(*args, stream=stream.cuda_stream, **kwargs)
            return NO_REQUEST

        return call


class _StreamLane:
    """Where a CUDA tensor's send or receive was issued: its device and that device's current
    stream, where p2p.Batch enqueues the batch it joins."""

    def __init__(self, t):
        self.device = t.device
        self.stream = torch.cuda.current_stream(t.device)

    def __eq__(self, other):
        return isinstance(other, _StreamLane) and self.stream == other.stream

    @contextlib.contextmanager
    def entered(self):
        """The lane's device and stream current on the calling thread."""
        with torch.cuda.device(self.device), torch.cuda.stream(self.stream):
            yield


def _lane(t):
    return _StreamLane(t) if t.is_cuda else None


def _async(opts):
    """False when torch will wait on the Work at once: torch 2.x's Python collectives set
    opts.asyncOp to their async_op argument (C++ callers, DDP's reducer and the functional
    collectives, leave it at its default, True). torch 1.13 has no asyncOp: always True there."""
    return getattr(opts, "asyncOp", True) is not False


def _cuda_device(args, kwargs):
    """The CUDA device of the first CUDA tensor behind the call's buffers, or None."""
    def owners():
        for a in list(args) + list(kwargs.values()):
            if isinstance(a, Buffer):
                yield a.owner
            elif isinstance(a, (list, tuple)):
                for op in a:
                    if isinstance(op, P2POp):
                        yield op.buf.owner if isinstance(op.buf, Buffer) else op.buf
    for owner in owners():
        if isinstance(owner, torch.Tensor) and owner.is_cuda:
            return owner.device
    return None


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


def _seconds(timeout):
    if timeout is None:
        return 0
    if hasattr(timeout, "total_seconds"):
        return timeout.total_seconds()
    return float(timeout)


def _op(opts, t, what):
    """(weft Op, factor): PREMUL_SUM(factor) is a SUM of the inputs multiplied by factor
    beforehand (FSDP2 reduces gradients with it); factor is None for every other op."""
    reduce_op = _reduce_op(opts)
    premul = getattr(dist.ReduceOp, "PREMUL_SUM", None)
    if premul is not None and getattr(reduce_op, "op", reduce_op) == premul:
        tz.weft_dtype(t, what)
        if not t.is_floating_point():
            raise TypeError(f"weft: {what}: ReduceOp.PREMUL_SUM needs a floating-point tensor, "
                            f"got {t.dtype}")
        factor = getattr(reduce_op, "factor", None)
        if factor is None:
            raise ValueError(f"weft: {what}: ReduceOp.PREMUL_SUM is not supported on torch "
                             f"{torch.__version__}, which does not show its factor to a Python "
                             f"backend (torch 2.x does); multiply, then use SUM")
        if isinstance(factor, torch.Tensor):
            factor = factor.to(device=t.device, dtype=t.dtype)
        return tz.weft_op(dist.ReduceOp.SUM, t, what), factor
    return tz.weft_op(reduce_op, t, what), None


def _split_into(flat, outs):
    offset = 0
    for o in outs:
        n = o.numel()
        o.copy_(flat[offset:offset + n].view(o.shape))
        offset += n


def _pairs(outputs, inputs, fits, what, rule):
    if len(outputs) != len(inputs):
        raise ValueError(f"weft: {what}: {len(outputs)} outputs for {len(inputs)} inputs")
    for k, (o, i) in enumerate(zip(outputs, inputs)):
        _same_dtype(o, i, what)
        _same_dtype(o, outputs[0], what)
        if not fits(o, i):
            raise ValueError(f"weft: {what}: pair {k} has {i.numel()} input and {o.numel()} "
                             f"output elements; {rule}")


def _counts(splits, t, size, what, kind):
    """Element counts per rank from split sizes along dim 0 (empty: even split)."""
    rows = t.shape[0] if t.dim() else 1
    row = t.numel() // rows if rows else 0
    if not splits:
        if rows % size:
            raise ValueError(f"weft: {what}: {kind} has {rows} rows, not a multiple of the "
                             f"{size} ranks, and no split sizes")
        return [rows // size * row] * size
    if len(splits) != size or sum(splits) != rows or min(splits) < 0:
        raise ValueError(f"weft: {what}: {kind} split sizes {splits} must be {size} counts that "
                         f"add up to its {rows} rows")
    return [int(k) * row for k in splits]
