"""errors.py -- WeftError: a failed weft call, with the library's message and result code."""
import enum


class Result(enum.IntEnum):
    """weft_result_t."""

    SUCCESS = 0
    INVALID_ARGUMENT = 1
    SYSTEM = 2
    TIMEOUT = 3
    REMOTE = 4
    MISMATCH = 5
    COMM_FAILED = 6
    UNSUPPORTED = 7
    NO_MEMORY = 8
    INTERNAL = 9
    ABORTED = 10


class WeftError(RuntimeError):
    """A weft call failed. `code` is a Result (None where no call was made), `message` the text of
    weft_last_error(), which names the rank, the peer and the operation; a TIMEOUT's starts with
    "Timed out: ", the words torch's backends use."""

    def __init__(self, message, code=None):
        super().__init__(message)
        self.message = message
        self.code = code

    def __str__(self):
        if self.code is None:
            return self.message
        return f"{self.message} [{self.code.name.lower()}]"


class LibraryNotFoundError(WeftError, ImportError):
    """libweft.so could not be found or loaded."""


def _result(code):
    try:
        return Result(code)
    except ValueError:
        return code


def check(lib, res, what):
    """Raises WeftError for a non-zero result; reads weft_last_error() on this thread, where the
    failed call left it."""
    if res == 0:
        return
    msg = lib.weft_last_error()
    msg = msg.decode("utf-8", "replace") if msg else ""
    if not msg:
        name = lib.weft_result_string(res)
        msg = f"{what}: {name.decode() if name else 'error'}"
    raise WeftError(msg, _result(res))
