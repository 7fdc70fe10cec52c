"""completion.py -- turns weft requests into torch Works that complete on their own and raise.

torch calls a backend from Python (dist.all_reduce -> pg.allreduce -> work.wait()) and from C++
(DistributedDataParallel's reducer takes work.get_future() and waits on the future; its
_broadcast_coalesced waits on works it issued earlier). So:

  * each operation is issued with weft_call_async, and one thread per process group waits on
    the requests in order, copies results out of staging buffers and completes a torch Future,
    without anyone calling into the Work;
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
        keeper.hold(self)

    # Called by the completion thread.
    def _complete(self, result, error):
        if error is not None:
            self._error = error
            self._done.set_exception(error)
        else:
            self._done.set_result(result)
        self._keeper.release_if_done(self)

    def wait(self, timeout=None):
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
        self._consumed = True
        self._keeper.release_if_done(self)
        return self._fut

    def is_completed(self):
        return self._fut.done()

    def is_success(self):
        return self._fut.done() and self._error is None

    def result(self):
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
        self._queue.put((request, finish, result, work))
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
            request, finish, result, work = item
            try:
                request.wait()
                if finish is not None:
                    finish()
            except BaseException as e:  # the waiter gets it from work.wait()
                if self._explain is not None:
                    e = self._explain(e)
                work._complete(None, e)
            else:
                work._complete(result, None)


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
