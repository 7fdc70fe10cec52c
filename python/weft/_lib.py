"""_lib.py -- finds libweft.so and declares the C prototypes for ctypes.

The library is looked up once, on first use, so that `import weft` (and `import weft.torch`, which
registers the backend) works before the library is built; the first call then says how to build it.
"""
import ctypes
import os
import threading

from .errors import LibraryNotFoundError

_NAME = "libweft.so"
_lock = threading.Lock()
_lib = None

BUILD_HINT = (
    "install the package with `pip install ./python` in the weft checkout, which builds it "
    "(`bazel build //:libweft.so`) and puts it next to the package, or point WEFT_LIBRARY at a "
    "libweft.so"
)


class CallT(ctypes.Structure):
    """weft_call_t from include/weft.h (C enums are ints)."""

    _fields_ = [
        ("coll", ctypes.c_int),
        ("sendbuf", ctypes.c_void_p),
        ("recvbuf", ctypes.c_void_p),
        ("count", ctypes.c_size_t),
        ("dtype", ctypes.c_int),
        ("op", ctypes.c_int),
        ("root", ctypes.c_int),
        ("algo", ctypes.c_int),
        # all_to_allv's per-rank counts and displacements (size_t arrays)
        ("send_counts", ctypes.c_void_p),
        ("send_displs", ctypes.c_void_p),
        ("recv_counts", ctypes.c_void_p),
        ("recv_displs", ctypes.c_void_p),
        # p2p_group's ops (a P2POpT array) and how many
        ("ops", ctypes.c_void_p),
        ("nops", ctypes.c_int),
        # premul_sum's factor (unused here), and where a receive from ANY_SOURCE writes the rank
        # it matched (an int)
        ("scalar", ctypes.c_void_p),
        ("scalar_on_device", ctypes.c_int),
        ("source", ctypes.c_void_p),
    ]


# include/weft.h's WEFT_ANY_SOURCE: a receive's peer that matches whichever rank sends first.
ANY_SOURCE = -2


class P2POpT(ctypes.Structure):
    """weft_p2p_op_t from include/weft.h."""

    _fields_ = [
        ("kind", ctypes.c_int),
        ("buf", ctypes.c_void_p),
        ("count", ctypes.c_size_t),
        ("dtype", ctypes.c_int),
        ("peer", ctypes.c_int),
        ("tag", ctypes.c_int),
    ]


def library_path():
    """The file load() opens: $WEFT_LIBRARY if set, else libweft.so next to this package."""
    env = os.environ.get("WEFT_LIBRARY")
    if env:
        if not os.path.isfile(env):
            raise LibraryNotFoundError(f"WEFT_LIBRARY={env}: no such file; " + BUILD_HINT)
        return env
    here = os.path.join(os.path.dirname(os.path.abspath(__file__)), _NAME)
    if os.path.isfile(here):
        return here
    raise LibraryNotFoundError(
        f"weft: {_NAME} not found (WEFT_LIBRARY is not set and there is no {here}); " + BUILD_HINT
    )


def nccl_library_path():
    """libnccl.so.2 next to this package (setup.py packages it with libweft.so)."""
    here = os.path.join(os.path.dirname(os.path.abspath(__file__)), "libnccl.so.2")
    if os.path.isfile(here):
        return here
    raise LibraryNotFoundError(
        f"weft: libnccl.so.2 not found (there is no {here}): install the package with "
        "`pip install ./python` in the weft checkout, which builds it "
        "(`bazel build //nccl:libnccl.so.2`), or set WEFT_LIBNCCL along with WEFT_LIBWEFT"
    )


def nccl_audit_library_path():
    """libweft_nccl_audit.so next to this package, beside libnccl.so.2 (which the module loads)."""
    here = os.path.join(os.path.dirname(os.path.abspath(__file__)), "libweft_nccl_audit.so")
    if os.path.isfile(here):
        return here
    raise LibraryNotFoundError(
        f"weft: libweft_nccl_audit.so not found (there is no {here}): install the package with "
        "`pip install ./python` in the weft checkout, which builds it "
        "(`bazel build //nccl:libweft_nccl_audit.so`), or set WEFT_LIBNCCL (and "
        "WEFT_LIBNCCL_AUDIT) along with WEFT_LIBWEFT"
    )


def load():
    """The loaded library, with every prototype declared."""
    global _lib
    with _lock:
        if _lib is None:
            path = library_path()
            try:
                lib = ctypes.CDLL(path)
            except OSError as e:
                raise LibraryNotFoundError(f"weft: cannot load {path}: {e}; " + BUILD_HINT) from e
            try:
                _declare(lib)
            except AttributeError as e:
                raise LibraryNotFoundError(
                    f"weft: {path} lacks the weft API ({e}); rebuild it: " + BUILD_HINT
                ) from e
            _lib = lib
        return _lib


def _declare(lib):
    c_int, c_size_t, c_char_p, c_void_p = ctypes.c_int, ctypes.c_size_t, ctypes.c_char_p, ctypes.c_void_p
    comm_pp = ctypes.POINTER(c_void_p)
    int_p = ctypes.POINTER(c_int)
    call_p = ctypes.POINTER(CallT)
    protos = {
        "weft_version": (c_int, []),
        "weft_build_features": (ctypes.c_uint, []),
        "weft_result_string": (c_char_p, [c_int]),
        "weft_last_error": (c_char_p, []),
        "weft_coll_name": (c_char_p, [c_int]),
        "weft_algo_name": (c_char_p, [c_int]),
        "weft_algo_from_name": (c_int, [c_char_p]),
        "weft_algo_supported": (c_int, [c_int, c_int]),
        "weft_dtype_size": (c_size_t, [c_int]),
        "weft_dtype_name": (c_char_p, [c_int]),
        "weft_op_name": (c_char_p, [c_int]),
        "weft_comm_init_env": (c_int, [comm_pp]),
        "weft_comm_init": (c_int, [comm_pp, c_int, c_int, c_char_p, c_int]),
        "weft_comm_init_url": (c_int, [comm_pp, c_char_p, c_int, c_int]),
        "weft_comm_destroy": (c_int, [c_void_p]),
        "weft_comm_abort": (c_int, [c_void_p]),
        "weft_comm_rank": (c_int, [c_void_p, int_p]),
        "weft_comm_size": (c_int, [c_void_p, int_p]),
        "weft_comm_local_rank": (c_int, [c_void_p, int_p]),
        "weft_comm_local_size": (c_int, [c_void_p, int_p]),
        "weft_call": (c_int, [call_p, c_void_p, c_void_p]),
        "weft_call_async": (c_int, [call_p, c_void_p, comm_pp]),
        "weft_test": (c_int, [c_void_p, int_p]),
        "weft_wait": (c_int, [c_void_p, c_int]),
        "weft_comm_split": (c_int, [c_void_p, c_int, c_int, comm_pp]),
        "weft_comm_shrink": (c_int, [c_void_p, int_p, c_int, comm_pp]),
        "weft_comm_get_failed_ranks": (c_int, [c_void_p, int_p, c_int, int_p]),
        "weft_comm_dup": (c_int, [c_void_p, comm_pp]),
    }
    for name, (restype, argtypes) in protos.items():
        fn = getattr(lib, name)
        fn.restype = restype
        fn.argtypes = argtypes
