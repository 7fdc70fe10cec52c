"""completion.py -- turns weft requests into torch Works whose futures complete on their own.

torch calls a backend from Python and from C++ (DistributedDataParallel's reducer calls
allreduce() and waits on work.get_future() without coming back to Python), so a Work must complete
without anyone calling into it. Each operation is issued with weft_call_async; one thread per
process group waits on the requests in order, copies results out of staging buffers, and completes
the torch Future, which _create_work_from_future wraps into a C++ Work (a Python Work subclass
returned to C++ would lose its Python half, and then its wait() would never return).
"""
import queue
import threading

import torch
from torch._C._distributed_c10d import _create_work_from_future

_STOP = object()


class Completion:
    def __init__(self, name):
        self._queue = queue.Queue()
        self._thread = threading.Thread(target=self._run, name=name, daemon=True)
        self._thread.start()

    def submit(self, request, finish, result):
        """A Work for `request` (a weft.Request): once it completes, finish() runs (copies out of
        staging buffers; may be None) and the future's value becomes `result`."""
        fut = torch.futures.Future()
        self._queue.put((request, finish, result, fut))
        return _create_work_from_future(fut)

    def completed(self, result):
        """A Work that is already complete (nothing to communicate)."""
        fut = torch.futures.Future()
        fut.set_result(result)
        return _create_work_from_future(fut)

    def stop(self, timeout_s):
        """Lets the thread finish what was submitted, then leave."""
        self._queue.put(_STOP)
        self._thread.join(timeout_s)

    def _run(self):
        while True:
            item = self._queue.get()
            if item is _STOP:
                return
            request, finish, result, fut = item
            try:
                request.wait()
                if finish is not None:
                    finish()
            except BaseException as e:  # the waiter gets it from work.wait()
                fut.set_exception(e)
            else:
                fut.set_result(result)
