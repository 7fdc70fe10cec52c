"""request.py -- Request: one asynchronous operation (weft_call_async), completed by test() or wait().

The C request is freed by the weft_test or weft_wait that sees it complete; a lock makes sure only
one thread ever does that, so a request may be waited on from any thread (the torch backend waits
on its own thread while the caller issues more work).
"""
import ctypes
import threading
import time

from . import _lib
from .errors import WeftError, _result


class Request:
    """An operation in flight. wait() returns `result` (the receiving buffer's object) or raises
    WeftError; the buffers must stay untouched until then."""

    def __init__(self, handle, result, keep, what, source=None):
        self._handle = handle  # ctypes.c_void_p, valid until completion is seen
        self._result = result
        # A receive's peer (an int), or the ctypes.c_int a receive from any source fills in.
        self._source = source
        self._keep = keep  # the Buffers the operation reads and writes
        self._what = what
        self._lock = threading.Lock()
        self._done = False
        self._error = None

    @property
    def what(self):
        """The operation, e.g. "all_reduce (count 1024)"."""
        return self._what

    @property
    def source(self):
        """For a receive: the rank it came from (for one from any source, known once complete:
        None before); None for other operations."""
        if isinstance(self._source, ctypes.c_int):
            return self._source.value if self._done and self._error is None else None
        return self._source

    @property
    def done(self):
        """True once test() or wait() saw the operation complete."""
        return self._done

    def test(self):
        """True if the operation has completed (raising WeftError if it failed)."""
        if not self._done and self._lock.acquire(blocking=False):
            try:
                self._poll()
            finally:
                self._lock.release()
        return self._finished()

    def wait(self, timeout=None):
        """Waits for completion and returns the result; `timeout` in seconds (None: until the
        operation ends, which its own WEFT_TIMEOUT_MS bounds). Raises WeftError if the operation
        failed, TimeoutError if `timeout` passed first (the request stays valid)."""
        if timeout is None:
            with self._lock:
                if not self._done:
                    lib = _lib.load()
                    self._complete(lib, lib.weft_wait(self._handle, -1))
        else:
            # weft_wait(ms) answers WEFT_ERR_TIMEOUT both when it gave up waiting (request still
            # valid) and when the operation itself timed out (request freed); weft_test never
            # blocks, so polling it keeps the two apart.
            deadline = time.monotonic() + timeout
            pause = 50e-6
            while not self.test():
                left = deadline - time.monotonic()
                if left <= 0:
                    raise TimeoutError(f"weft: Timed out: {self._what} not complete after {timeout} s")
                time.sleep(min(pause, left))
                pause = min(pause * 2, 10e-3)
        self._finished()
        return self._result

    def _poll(self):
        if self._done:
            return
        lib = _lib.load()
        done = ctypes.c_int(0)
        res = lib.weft_test(self._handle, ctypes.byref(done))
        if done.value or res != 0:
            self._complete(lib, res)

    def _complete(self, lib, res):
        # Called with the lock held, right after the weft_test/weft_wait that freed the request,
        # so weft_last_error() on this thread is the operation's message.
        if res != 0:
            msg = lib.weft_last_error()
            self._error = WeftError(msg.decode("utf-8", "replace") if msg else self._what, _result(res))
        self._handle = None
        self._keep = None
        self._done = True

    def _finished(self):
        if not self._done:
            return False
        if self._error is not None:
            raise self._error
        return True

    def __repr__(self):
        state = "failed" if self._error else "done" if self._done else "pending"
        return f"<weft.Request {self._what} {state}>"
