"""buffers.py -- turns numpy arrays and buffer-protocol objects into (address, count, dtype).

A Buffer keeps the objects that own its memory alive: the C library reads and writes the memory
directly, until the call (or, for asynchronous calls, the request) completes.
"""
import ctypes

from .dtypes import Dtype, from_format, to_dtype


class Buffer:
    """Memory weft may read (and, if `writable`, write): `count` elements of `dtype` at `address`.

    Build one directly for memory that has no buffer protocol (a torch tensor: address
    tensor.data_ptr(), owner the tensor); `owner` is kept alive as long as the Buffer is."""

    __slots__ = ("address", "count", "dtype", "writable", "owner")

    def __init__(self, address, count, dtype, owner=None, writable=True):
        self.address = int(address)
        self.count = int(count)
        self.dtype = to_dtype(dtype)
        self.owner = owner
        self.writable = writable

    @property
    def nbytes(self):
        return self.count * self.dtype.itemsize

    def __repr__(self):
        return f"Buffer(address=0x{self.address:x}, count={self.count}, dtype={self.dtype.name.lower()})"


def as_buffer(obj, dtype=None, writable=False, what="buffer"):
    """A Buffer over `obj`: a Buffer, a numpy array, or any object with the buffer protocol
    (memoryview, bytearray, array.array, bytes when only read). `dtype` overrides the element type
    the object states (e.g. bfloat16 held in a uint16 array). Raises TypeError or ValueError for
    what weft cannot use: unsupported element types, non-contiguous or read-only memory."""
    if isinstance(obj, Buffer):
        if writable and not obj.writable:
            raise ValueError(f"weft: {what} is read-only, but this call writes it")
        return obj
    if obj is None:
        raise TypeError(f"weft: {what} is None")
    if _is_numpy(obj):
        return _from_numpy(obj, dtype, writable, what)
    return _from_memoryview(obj, dtype, writable, what)


def _is_numpy(obj):
    return type(obj).__module__ == "numpy" and hasattr(obj, "__array_interface__")


def _from_numpy(arr, dtype, writable, what):
    if not arr.flags.c_contiguous:
        raise ValueError(f"weft: {what} is not contiguous; pass numpy.ascontiguousarray(...)")
    if writable and not arr.flags.writeable:
        raise ValueError(f"weft: {what} is read-only, but this call writes it")
    if dtype is None:
        if arr.dtype.name == "float8_e4m3":  # ml_dtypes' IEEE-like e4m3, not weft's e4m3fn
            raise TypeError(f"weft: {what} has dtype float8_e4m3 (IEEE-like, with infinities), "
                            "which weft does not support; weft's FLOAT8_E4M3 is float8_e4m3fn")
        try:
            dt = to_dtype(arr.dtype.name)
        except TypeError:
            raise TypeError(f"weft: {what} has dtype {arr.dtype.name}, which weft does not support; "
                            "supported: " + ", ".join(d.name.lower() for d in Dtype)) from None
        return Buffer(arr.ctypes.data, arr.size, dt, owner=arr, writable=arr.flags.writeable)
    dt = to_dtype(dtype)
    return Buffer(arr.ctypes.data, _count(arr.nbytes, dt, what), dt, owner=arr,
                  writable=arr.flags.writeable)


def _from_memoryview(obj, dtype, writable, what):
    try:
        mv = memoryview(obj)
    except TypeError:
        raise TypeError(f"weft: {what} of type {type(obj).__name__} is neither a numpy array nor "
                        "an object with the buffer protocol") from None
    if not mv.c_contiguous:
        raise ValueError(f"weft: {what} is not contiguous")
    if dtype is None:
        dt = from_format(mv.format, mv.itemsize)
        if dt is None:
            raise TypeError(f"weft: {what} has element format {mv.format!r} ({mv.itemsize} bytes), "
                            "which weft does not support; pass dtype= to say what it holds")
    else:
        dt = to_dtype(dtype)
    count = _count(mv.nbytes, dt, what)
    if mv.readonly:
        if writable:
            raise ValueError(f"weft: {what} is read-only, but this call writes it")
        # ctypes cannot take the address of read-only memory; a send buffer may be a copy.
        cbuf = (ctypes.c_char * mv.nbytes).from_buffer_copy(mv)
        return Buffer(ctypes.addressof(cbuf), count, dt, owner=(obj, cbuf), writable=False)
    flat = mv.cast("B") if mv.ndim != 1 or mv.format != "B" else mv
    cbuf = (ctypes.c_char * mv.nbytes).from_buffer(flat)
    return Buffer(ctypes.addressof(cbuf), count, dt, owner=(obj, mv, cbuf), writable=True)


def _count(nbytes, dt, what):
    if nbytes % dt.itemsize:
        raise ValueError(f"weft: {what} holds {nbytes} bytes, not a whole number of "
                         f"{dt.name.lower()} elements")
    return nbytes // dt.itemsize
