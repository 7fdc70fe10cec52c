"""p2p.py -- the process group's sends and receives, held back and issued together as one weft
p2p_group, so that torch's batch_isend_irecv does not deadlock.

Why. Every weft operation of a communicator runs in issue order on its progress thread. Were each
isend and irecv an operation of its own, a ring in which every rank sends to the next before
receiving from the previous would wait on itself once the messages are too large to be buffered:
a send waits for the receiver's receive, which every rank has queued behind its own send. A weft
p2p_group runs its sends and receives to all peers at once and has no such order. torch hands a
Python process group the operations of batch_isend_irecv one by one (torch 2.x coalesces only for
a group whose type is exactly the C++ ProcessGroup; torch 1.13 brackets them with
pg._start_coalescing() and pg._end_coalescing(reqs)), so the group gathers consecutive sends and
receives here and issues them as one p2p_group when

  * one of their Works is waited on, its future taken, or is_completed/is_success/result asked
    (dist.send and dist.recv wait at once, so they still return only once complete);
  * any other operation is issued on the group (collectives, barrier, shutdown): operations stay
    in program order;
  * torch 1.13's batch ends (_end_coalescing);
  * or nothing has been added for _HOLD_S, so that an isend nobody waits on still goes out while
    its rank computes (one thread per group, started by its first send or receive). The timer
    never splits a batch that torch's batch_isend_irecv is still handing over, whether or not
    torch brackets it (it looks at the caller's stack, sys._current_frames, for that function:
    on a loaded host a rank can be descheduled between two ops for longer than any
    short delay, and a ring split there deadlocks again); outside batch_isend_irecv, isends and
    irecvs issued back to back by hand go out together unless more than _HOLD_S passes between
    them.

Tags keep the meaning they had when each op was a group of its own: messages between two ranks
pair in the order each side issues them, and the tags must agree pair by pair. Within one group
weft pairs ops to one peer in one direction by tag (issue order among equal tags), so a batch
never holds an op whose tag is lower than an earlier one's to the same peer in the same direction:
such an op starts a new batch. The order on the wire is then the issue order whatever the batch
boundaries, which differ between ranks (a wait here, a timer there) and so must not change what
pairs with what. Issuing ops together never makes them wait longer than issuing them one by one:
each starts no later.

As torch asks, a tensor handed to isend must stay untouched until its Work completes: it may now
be read after the call returns, when its batch is issued. A failed group fails every Work of the
batch with the group's error (weft's message names the rank and the peer).

CUDA tensors are held back the same way, for the same reason: weft runs the calls a stream
enqueues in order too, so a ring of isends before irecvs on a device would wait on itself just as
on the host. Each op comes with its lane, the device and current stream it was issued on
(process_group._StreamLane; None for host tensors), and a batch holds the ops of one lane: an op
of another lane issues the batch first, so host ops and each stream's ops keep their order. A
device batch is issued inside its lane (that device and stream current, whichever thread issues
it: the caller's wait or the timer) as one p2p_group enqueued on the stream, and its Works
complete at once, as the device path's do (the stream's later work waits for the group). Between
the call and the batch going out, the stream may run more work; the group then waits for it too,
which delays the send but never lets it read a buffer early. Untested on a GPU by the suite (no
GPU there): tests/test_p2p_batch.py checks the batching with stand-in lanes.
"""
import contextlib
import inspect
import sys
import threading
import time

import torch.distributed as dist

from ..comm import P2POp
from ..errors import Result, WeftError

# How long the group waits after the last send or receive before issuing the batch on its own.
_HOLD_S = 0.02


def _batch_code():
    fn = getattr(dist, "batch_isend_irecv", None)
    return getattr(inspect.unwrap(fn), "__code__", None) if fn is not None else None


_BATCH_CODE = _batch_code()


def _in_torch_batch(thread_id):
    """Whether the thread is inside torch's batch_isend_irecv, still handing over its ops."""
    if _BATCH_CODE is None:
        return False
    frame = sys._current_frames().get(thread_id)
    while frame is not None:
        if frame.f_code is _BATCH_CODE:
            return True
        frame = frame.f_back
    return False


class Batch:
    """The sends and receives of one process group not issued yet."""

    def __init__(self, comm, calls, completion, name):
        """comm: the weft.Comm (its rank and size); calls: what issues a group on it
        (process_group._Calls: a request for host ops, enqueued on the current stream for
        device ops)."""
        self._comm = comm
        self._calls = calls
        self._completion = completion
        self._name = name
        # Held while ops are added and while a batch is issued, so that a flush from the timer and
        # an operation from the caller cannot overtake each other. Reentrant: the group's
        # finalizer (close) may run on any thread, this one's timer included, when it collects.
        self._cond = threading.Condition(threading.RLock())
        self._ops = []  # (P2POp, finish, result, work)
        self._lane = None  # where the held ops were issued: None (host) or a device stream
        self._last = {}  # (peer, kind) -> the tag of the batch's last op there
        self._added_at = 0.0
        self._adder = None  # the thread that added the last op
        self._coalescing = False
        self._closed = False
        self._thread = None

    def add(self, kind, buffer, peer, tag, finish, result, lane=None):
        """A Work for a send or receive (kind "send" or "recv"), issued with the batch; lane:
        the device and stream of a CUDA tensor's op (see the module comment), else None."""
        # What weft would refuse, refused here: in a batch it would fail the others' ops too.
        rank, size = self._comm.rank, self._comm.size
        if not 0 <= peer < size:
            raise WeftError(f"rank {rank}: {kind}: peer {peer} is out of range for a group of "
                            f"size {size}", Result.INVALID_ARGUMENT)
        if peer == rank:
            raise WeftError(f"rank {rank}: {kind} to itself", Result.INVALID_ARGUMENT)
        what = f"{kind} {'to' if kind == 'send' else 'from'} rank {peer} (tag {tag})"
        with self._cond:
            if self._closed:
                raise WeftError(f"weft: {what}: the process group is shut down",
                                Result.COMM_FAILED)
            if self._last.get((peer, kind), tag) > tag or (self._ops and lane != self._lane):
                # See the module comment: tags never go down within a batch, and a batch is one
                # lane's.
                self._issue()
            work = self._completion.pending(what, self.flush)
            self._ops.append((P2POp(kind, buffer, peer, tag), finish, result, work))
            self._lane = lane
            self._last[(peer, kind)] = tag
            self._added_at = time.monotonic()
            self._adder = threading.get_ident()
            if self._thread is None:
                self._thread = threading.Thread(target=self._run, name=f"{self._name}-p2p",
                                                daemon=True)
                self._thread.start()
            self._cond.notify()
        return work

    def flush(self):
        """Issues the held ops, if any, as one group."""
        with self._cond:
            self._issue()

    def start_coalescing(self):
        with self._cond:
            self._coalescing = True

    def end_coalescing(self):
        """Issues the batch; returns the Works of its ops (empty when none were held)."""
        with self._cond:
            self._coalescing = False
            works = [work for _, _, _, work in self._ops]
            self._issue()
            return works

    def close(self, abort):
        """Issues what is held (abort: fails it instead) and stops the timer; later ops fail."""
        with self._cond:
            if abort:
                error = WeftError("weft: the process group was aborted before this operation "
                                  "was issued", Result.ABORTED)
                for _, _, _, work in self._ops:
                    work._complete(None, error)
                self._ops, self._last = [], {}
            else:
                self._issue()
            self._closed = True
            self._cond.notify()
            thread = self._thread
        if thread is not None and thread is not threading.current_thread():
            thread.join(1.0)

    def _issue(self):
        # With self._cond held.
        if not self._ops:
            return
        ops, self._ops, self._last = self._ops, [], {}
        lane, self._lane = self._lane, None
        parts = [(work, finish, result) for _, finish, result, work in ops]
        # A device batch is enqueued on its stream, and its copies out of staging tensors too.
        with contextlib.nullcontext() if lane is None else lane.entered():
            try:
                request = self._calls.p2p_group([op for op, _, _, _ in ops],
                                                async_op=lane is None)
            except Exception as e:  # noqa: BLE001 -- every Work of the batch reports it
                for work, _, _ in parts:
                    work._complete(None, e)
                return
            self._completion.submit_group(request, parts)

    def _run(self):
        with self._cond:
            while not self._closed:
                if not self._ops or self._coalescing:
                    self._cond.wait()
                    continue
                left = self._added_at + _HOLD_S - time.monotonic()
                if left > 0:
                    self._cond.wait(left)
                elif _in_torch_batch(self._adder):
                    self._added_at = time.monotonic()
                else:
                    self._issue()
