"""completion.py -- turns weft requests into torch Works that complete on their own and raise.

torch calls a backend from Python (dist.all_reduce -> pg.allreduce -> work.wait()) and from C++
(DistributedDataParallel's reducer takes work.get_future() and waits on the future; its
_broadcast_coalesced waits on works it issued earlier). So:

  * each operation is issued with weft_call_async, and one thread per process group waits on
    the requests in order, copies results out of staging buffers and completes a torch Future,
    without anyone calling into the Work (sends and receives are held back and issued as one
    request for several Works: p2p.py; such a Work issues its batch when asked about);
  * the Work is a Python subclass of torch's Work whose wait() raises the operation's error
    (torch's own future-wrapping Work returns normally from wait() even when the future failed,
    which would let a failed synchronous collective pass silently);
  * the future C++ gets from get_future() must fail in C++'s terms. Python's
    Future.set_exception only stores the exception as the future's value, with a Python function
    that raises it when Python asks for the value: C++ (DDP's reducer, on torch 1.13 and 2.x)
    sees a successful future, reads the exception object as its gradients and crashes. A
    callback chained with Future.then that raises is different: torch catches it in C++ and sets
    the error on the chained future, whose wait() then throws in C++ too. So the completion
    thread completes a private future, and the Work hands out the future chained to it;
  * C++ keeps only the C++ half of a Work a Python method returned; were the Python half
    collected, C++'s later wait() would fall through to the base class and never return. So
    every Work stays referenced here until it has completed and someone has waited on it or
    taken its future (the two ways torch consumes a Work). A Work nobody ever waits on stays
    referenced: wait on async works, as torch asks anyway.
"""
import queue
import threading
import time

import torch
from torch._C._distributed_c10d import Work  # dist.Work in 1.13, dist._Work in later 2.x

_STOP = object()


# What process_group._Calls returns for a call enqueued on a CUDA stream instead of a Request.
ENQUEUED = object()

class WeftWork(Work):
    """One operation of the weft backend. wait() returns True or raises the operation's error;
    get_future() completes on its own with the operation's output tensors."""

    def __init__(self, keeper, what):
        super().__init__()
        # _done is completed by the completion thread; _fut, chained to it, is what callers get:
        # _unwrap raises a failed operation's error inside the chain, which fails _fut in C++
        # (see the module comment).
        self._done = torch.futures.Future()
        self._fut = self._done.then(_unwrap)
        self._keeper = keeper
        self._what = what
        self._error = None
        self._consumed = False
        # For an operation held back (p2p.Batch): issues it, with its batch, before anyone
        # looks at its state; None once issued.
        self._flush = None
        keeper.hold(self)

    def _issue(self):
        flush = self._flush
        if flush is not None:
            flush()

    # Called by the completion thread.
    def _complete(self, result, error):
        if error is not None:
            self._error = error
            self._done.set_exception(error)
        else:
            self._done.set_result(result)
        self._keeper.release_if_done(self)

    def wait(self, timeout=None):
        self._issue()
        seconds = _seconds(timeout)
        if seconds:
            deadline = time.monotonic() + seconds
            while not self._fut.done():
                if time.monotonic() > deadline:
                    raise RuntimeError(f"weft: {self._what} not complete after {seconds} s")
                time.sleep(0.0005)
        try:
            self._fut.wait()
        except Exception:
            # _fut's error is torch's RuntimeError around the error's text; raise the error
            # itself, with its own type (WeftError, TypeError, ...).
            if self._error is not None:
                raise self._error from None
            raise
        finally:
            self._consumed = True
            self._keeper.release_if_done(self)
        return True

    def get_future(self):
        self._issue()
        self._consumed = True
        self._keeper.release_if_done(self)
        return self._fut

    def is_completed(self):
        self._issue()
        return self._fut.done()

    def is_success(self):
        self._issue()
        return self._fut.done() and self._error is None

    def result(self):
        self._issue()
        return self._fut.value()

    def synchronize(self):
        pass

    def __repr__(self):
        state = "failed" if self._error else "done" if self._fut.done() else "pending"
        return f"<WeftWork {self._what} {state}>"


class Keeper:
    """The Works that must not be collected yet (see the module comment)."""

    def __init__(self):
        self._lock = threading.Lock()
        self._works = set()

    def hold(self, work):
        with self._lock:
            self._works.add(work)

    def release_if_done(self, work):
        if work._consumed and work._fut.done():
            with self._lock:
                self._works.discard(work)

    def __len__(self):
        with self._lock:
            return len(self._works)


class Completion:
    def __init__(self, name, explain=None):
        """explain(error) -> error, if given, runs on the completion thread for each failed
        operation and may return a more telling error (process_group._Causes)."""
        self.keeper = Keeper()
        self._explain = explain
        self._queue = queue.Queue()
        self._thread = threading.Thread(target=self._run, name=name, daemon=True)
        self._thread.start()

    def submit(self, request, finish, result):
        """A Work for `request` (a weft.Request): once it completes, finish() runs (copies out of
        staging buffers; may be None) and the future's value becomes `result`."""
        if request is ENQUEUED:
            # Enqueued on a CUDA stream (process_group._Calls): done as far as the host goes.
            work = WeftWork(self.keeper, "a call on a CUDA stream")
            if finish is not None:
                finish()
            work._complete(result, None)
            return work
        work = WeftWork(self.keeper, request.what)
        self._queue.put((request, [(work, finish, result)]))
        return work

    def pending(self, what, flush):
        """A Work for an operation not issued yet: flush() issues it (and submit_group completes
        it); wait(), get_future() and the state queries call flush() first."""
        work = WeftWork(self.keeper, what)
        work._flush = flush
        return work

    def submit_group(self, request, parts):
        """Completes several Works with one request (a p2p_group): parts are (work, finish,
        result) as submit() takes them; a failed request fails them all."""
        for work, _, _ in parts:
            work._flush = None
        self._queue.put((request, parts))

    def all_of(self, works, what):
        """A Work that completes once all of `works` have, failing with the first one's error
        if any failed; its future's value is []."""
        work = WeftWork(self.keeper, what)
        if not works:
            work._complete([], None)
            return work

        def done(_):
            error = next((w._error for w in works if w._error is not None), None)
            work._complete(None if error is not None else [], error)

        torch.futures.collect_all([w.get_future() for w in works]).then(done)
        return work

    def completed(self, result, what):
        """A Work that is already complete (nothing to communicate)."""
        work = WeftWork(self.keeper, what)
        work._complete(result, None)
        return work

    def failed(self, error, what):
        """A Work that failed before anything was issued (see process_group._guard)."""
        work = WeftWork(self.keeper, what)
        work._complete(None, error)
        return work

    def stop(self, timeout_s):
        """Lets the thread finish what was submitted, then leave."""
        self._queue.put(_STOP)
        if threading.current_thread() is not self._thread:  # a collection may run anywhere
            self._thread.join(timeout_s)

    def _run(self):
        while True:
            item = self._queue.get()
            if item is _STOP:
                return
            request, parts = item
            try:
                request.wait()
            except BaseException as e:  # the waiters get it from work.wait()
                e = self._explained(e)
                for work, _, _ in parts:
                    work._complete(None, e)
                continue
            for work, finish, result in parts:
                try:
                    if finish is not None:
                        finish()
                except BaseException as e:
                    work._complete(None, self._explained(e))
                else:
                    work._complete(result, None)

    def _explained(self, error):
        return error if self._explain is None else self._explain(error)


def _unwrap(done):
    # value() of a future completed by set_exception raises that exception.
    return done.value()


def _seconds(timeout):
    """torch passes a timedelta (0: no limit), users may pass seconds or None."""
    if timeout is None:
        return 0
    if hasattr(timeout, "total_seconds"):
        return timeout.total_seconds()
    return float(timeout)
