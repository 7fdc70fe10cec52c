"""completion.py -- turns weft requests into torch Works that complete on their own and raise.

torch calls a backend from Python (dist.all_reduce -> pg.allreduce -> work.wait()) and from C++
(DistributedDataParallel's reducer takes work.get_future() and waits on the future; its
_broadcast_coalesced waits on works it issued earlier). So:

  * each operation is issued with weft_call_async. Whoever first needs its outcome waits on the
    request, copies results out of staging buffers and completes the Work: the thread calling
    wait() (every synchronous call: dist.all_reduce waits at once), or, for a Work whose future
    or state is asked for instead (DDP's reducer, polling), one thread per process group. A small
    synchronous call so costs one Python thread, not a hand-off to that thread and back, which
    measured 140 us of a 1-element all_reduce's 180 us on 2 ranks (sends and receives are held
    back and issued as one request for several Works: p2p.py; such a Work issues its batch when
    asked about);
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


# What process_group._Calls returns instead of a Request for a call that left the host nothing
# to wait on: it ran before returning, or it was enqueued on a CUDA stream.
NO_REQUEST = object()

class WeftWork(Work):
    """One operation of the weft backend. wait() returns True or raises the operation's error;
    get_future() completes on its own with the operation's output tensors."""

    def __init__(self, completion, what):
        super().__init__()
        self._completion = completion
        self._what = what
        self._lock = threading.Lock()
        self._finished = False
        self._result = None
        self._error = None
        self._consumed = False
        # The _Job that completes this Work, until it is claimed (see Completion).
        self._job = None
        # _done is completed with the operation; _fut, chained to it, is what callers get:
        # _unwrap raises a failed operation's error inside the chain, which fails _fut in C++
        # (see the module comment). Both are made only when asked for (_future): a Work waited
        # on at once, as every synchronous call is, needs neither.
        self._done = None
        self._fut = None
        # For an operation held back (p2p.Batch): issues it, with its batch, before anyone
        # looks at its state; None once issued.
        self._flush = None
        completion.keeper.hold(self)

    def _issue(self):
        flush = self._flush
        if flush is not None:
            flush()

    # Called by whoever ran the operation's job (this Work's waiter or the completion thread).
    def _complete(self, result, error):
        with self._lock:
            self._result, self._error, self._finished = result, error, True
            done = self._done
        # Before the future, whose waiter may count the Works still held as soon as it returns.
        self._completion.keeper.release_if_done(self)
        if done is not None:
            _settle(done, result, error)

    def _future(self):
        """_fut, made on first use; completed at once if the operation already is. Exactly one of
        _complete and the first _future settles _done: each looks at what the other set, under
        the lock."""
        with self._lock:
            if self._fut is not None:
                return self._fut
            self._done = torch.futures.Future()
            self._fut = self._done.then(_unwrap)
            finished = self._finished
        if finished:
            _settle(self._done, self._result, self._error)
        return self._fut

    def _hand_over(self):
        """Gives the operation to the completion thread, unless someone already runs it: for
        whoever learns of completion without waiting (a future, a poll)."""
        self._issue()
        job = self._job
        if job is not None:
            self._completion.hand_over(job)

    def wait(self, timeout=None):
        self._issue()
        seconds = _seconds(timeout)
        job = self._job
        if not seconds and job is not None and self._completion.claim(job):
            # Nobody has taken the operation yet: wait for it on this thread, saving the
            # hand-offs to and from the completion thread (most of a small call's cost).
            self._completion.run(job)
        elif not self._finished:
            if job is not None:
                self._completion.hand_over(job)
            if seconds:
                deadline = time.monotonic() + seconds
                while not self._finished:
                    if time.monotonic() > deadline:
                        raise RuntimeError(f"weft: Timed out: {self._what} not complete after {seconds} s")
                    time.sleep(0.0005)
            else:
                try:
                    self._future().wait()
                except Exception:
                    # _fut's error is torch's RuntimeError around the error's text; the error
                    # itself is raised below, with its own type (WeftError, TypeError, ...).
                    if self._error is None:
                        raise
        self._consumed = True
        self._completion.keeper.release_if_done(self)
        if self._error is not None:
            raise self._error
        return True

    def get_future(self):
        self._hand_over()
        fut = self._future()
        self._consumed = True
        self._completion.keeper.release_if_done(self)
        return fut

    def is_completed(self):
        self._hand_over()
        return self._finished

    def is_success(self):
        self._hand_over()
        return self._finished and self._error is None

    def result(self):
        self._hand_over()
        return self._future().value()

    def synchronize(self):
        pass

    # A receive from any source (process_group.recv_anysource): the weft.Request whose `source`
    # is the rank it matched, which torch's dist.recv asks for after wait().
    _source_request = None

    def _source_rank(self):
        request = self._source_request
        if request is None:
            return super()._source_rank()  # torch's own refusal for other operations
        if not self._finished:
            raise RuntimeError(f"weft: {self._what}: the rank a receive from any source matched "
                               "is known once it completes: wait() first")
        if self._error is not None:
            raise self._error
        return request.source

    source_rank = _source_rank  # torch 1.13 binds both names

    def __repr__(self):
        state = "failed" if self._error else "done" if self._finished else "pending"
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
        if work._consumed and work._finished:
            with self._lock:
                self._works.discard(work)

    def __len__(self):
        with self._lock:
            return len(self._works)


class _Job:
    """A request and the Works it completes: parts are (work, finish, result), finish() running
    once the request has (copies out of staging buffers; may be None), result becoming the
    future's value."""

    __slots__ = ("request", "parts")

    def __init__(self, request, parts):
        self.request = request
        self.parts = parts


class Completion:
    """Completes Works. A job is run (its request waited on, its parts completed) exactly once,
    by whoever claims it first: the thread waiting on one of its Works, or this object's thread,
    which is handed a job when someone asks for its future or its state without waiting (DDP's
    reducer, polling, torch's functional collectives' callbacks) and every job left at stop."""

    def __init__(self, name, explain=None):
        """explain(error) -> error, if given, runs for each failed operation and may return a
        more telling error (process_group._Causes)."""
        self.keeper = Keeper()
        self._explain = explain
        self._lock = threading.Lock()
        self._unclaimed = set()
        self._queue = queue.Queue()
        self._thread = threading.Thread(target=self._run, name=name, daemon=True)
        self._thread.start()

    def submit(self, request, finish, result):
        """A Work for `request` (a weft.Request): once it completes, finish() runs (copies out of
        staging buffers; may be None) and the future's value becomes `result`."""
        if request is NO_REQUEST:
            # Done as far as the host goes (process_group._Calls).
            work = WeftWork(self, "a completed call")
            self._finish([(work, finish, result)])
            return work
        work = WeftWork(self, request.what)
        self._add(_Job(request, [(work, finish, result)]))
        return work

    def pending(self, what, flush):
        """A Work for an operation not issued yet: flush() issues it (and submit_group completes
        it); wait(), get_future() and the state queries call flush() first."""
        work = WeftWork(self, what)
        work._flush = flush
        return work

    def submit_group(self, request, parts):
        """Completes several Works with one request (a p2p_group): parts are (work, finish,
        result) as submit() takes them; a failed request fails them all. NO_REQUEST (a group
        enqueued on a CUDA stream): each finish() runs now and the Works complete."""
        if request is NO_REQUEST:
            self._finish(parts)
        else:
            self._add(_Job(request, parts))
        # Last: a waiter that finds no flush to call must find the Work's job, or the Work done.
        for work, _, _ in parts:
            work._flush = None

    def all_of(self, works, what):
        """A Work that completes once all of `works` have, failing with the first one's error
        if any failed; its future's value is []."""
        work = WeftWork(self, what)
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
        work = WeftWork(self, what)
        work._complete(result, None)
        return work

    def failed(self, error, what):
        """A Work that failed before anything was issued (see process_group._guard)."""
        work = WeftWork(self, what)
        work._complete(None, error)
        return work

    def claim(self, job):
        """True for the first caller only: that caller runs the job."""
        with self._lock:
            if job not in self._unclaimed:
                return False
            self._unclaimed.discard(job)
            return True

    def hand_over(self, job):
        if self.claim(job):
            self._queue.put(job)

    def run(self, job):
        """Waits on the job's request and completes its Works."""
        try:
            job.request.wait()
        except BaseException as e:  # the waiters get it from work.wait()
            e = self._explained(e)
            for work, _, _ in job.parts:
                work._complete(None, e)
            return
        self._finish(job.parts)

    def _finish(self, parts):
        """Completes each part of an operation that has run: its finish(), then its Work."""
        for work, finish, result in parts:
            try:
                if finish is not None:
                    finish()
            except BaseException as e:  # the Work's waiter gets it
                work._complete(None, self._explained(e))
            else:
                work._complete(result, None)

    def stop(self, timeout_s):
        """Lets the thread finish every job not yet run, then leave."""
        with self._lock:
            left, self._unclaimed = self._unclaimed, set()
        for job in left:
            self._queue.put(job)
        self._queue.put(_STOP)
        if threading.current_thread() is not self._thread:  # a collection may run anywhere
            self._thread.join(timeout_s)

    def _add(self, job):
        for work, _, _ in job.parts:
            work._job = job
        with self._lock:
            self._unclaimed.add(job)

    def _run(self):
        while True:
            job = self._queue.get()
            if job is _STOP:
                return
            self.run(job)

    def _explained(self, error):
        return error if self._explain is None else self._explain(error)


def _settle(done, result, error):
    if error is not None:
        done.set_exception(error)
    else:
        done.set_result(result)


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
