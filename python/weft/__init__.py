"""weft: collective communication (all-reduce, broadcast, ...) across processes, over libweft.

    import numpy as np, weft
    with weft.Comm() as comm:                 # RANK, WORLD_SIZE, MASTER_ADDR, MASTER_PORT
        x = np.ones(4, np.float32)
        comm.all_reduce(x, op="sum")          # in place
        comm.broadcast(x, root=0)

`import weft.torch` registers the "weft" backend of torch.distributed.
"""
from importlib import metadata as _metadata

from . import _lib
from .buffers import Buffer, as_buffer
from .comm import Comm, P2POp
from .dtypes import Algo, Coll, Dtype, Op
from .errors import LibraryNotFoundError, Result, WeftError
from .request import Request
from ._lib import ANY_SOURCE

__all__ = [
    "ANY_SOURCE", "Algo", "Buffer", "Coll", "Comm", "Dtype", "LibraryNotFoundError", "Op", "P2POp", "Request",
    "Result", "WeftError", "as_buffer", "build_features", "library_path", "nccl_audit_library",
    "nccl_library", "version",
]
try:  # include/weft.h's version, which setup.py gave the installed distribution
    __version__ = _metadata.version("weft")
except _metadata.PackageNotFoundError:  # python/ used from a checkout, not installed
    __version__ = "0+unknown"

INT8, UINT8, INT32, UINT32, INT64, UINT64 = (Dtype.INT8, Dtype.UINT8, Dtype.INT32, Dtype.UINT32,
                                             Dtype.INT64, Dtype.UINT64)
FLOAT16, BFLOAT16, FLOAT32, FLOAT64 = Dtype.FLOAT16, Dtype.BFLOAT16, Dtype.FLOAT32, Dtype.FLOAT64
FLOAT8_E4M3, FLOAT8_E5M2 = Dtype.FLOAT8_E4M3, Dtype.FLOAT8_E5M2
SUM, PROD, MIN, MAX, AVG = Op.SUM, Op.PROD, Op.MIN, Op.MAX, Op.AVG
FEATURE_CUDA = 0x1


def version():
    """The linked library's version as (major, minor, patch)."""
    code = _lib.load().weft_version()
    return code // 10000, code // 100 % 100, code % 100


def build_features():
    """A bit set of FEATURE_* compiled into the library."""
    return _lib.load().weft_build_features()


def library_path():
    """The libweft.so this package uses ($WEFT_LIBRARY, else the one next to the package)."""
    return _lib.library_path()


def nccl_library():
    """The path of weft's libnccl.so.2 (weft behind the NCCL API) that the package carries, for
    LD_PRELOAD under programs built against NCCL: `LD_PRELOAD=$(python -c 'import weft;
    print(weft.nccl_library())') python train.py`. Raises LibraryNotFoundError where the package
    was built without it (WEFT_LIBWEFT without WEFT_LIBNCCL)."""
    return _lib.nccl_library_path()


def nccl_audit_library():
    """The path of libweft_nccl_audit.so that the package carries beside libnccl.so.2: an LD_AUDIT
    module under which the loader takes weft's libnccl.so.2 wherever a program asks for
    libnccl.so.2, even where a DT_RPATH names another folder (libtorch_cuda.so's route to the
    nvidia-nccl wheel): `LD_AUDIT=$(python -c 'import weft; print(weft.nccl_audit_library())')
    python train.py`. Other libraries load as usual. Raises LibraryNotFoundError where the package
    was built without it."""
    return _lib.nccl_audit_library_path()
