"""dtypes.py -- weft's dtype, op, collective and algorithm enums, and how Python types map to them."""
import enum


class Dtype(enum.IntEnum):
    INT8 = 0
    UINT8 = 1
    INT32 = 2
    UINT32 = 3
    INT64 = 4
    UINT64 = 5
    FLOAT16 = 6
    BFLOAT16 = 7
    FLOAT32 = 8
    FLOAT64 = 9
    FLOAT8_E4M3 = 10  # OCP e4m3 "fn": no infinities, max 448 (torch.float8_e4m3fn)
    FLOAT8_E5M2 = 11  # OCP e5m2: IEEE-like, max 57344 (torch.float8_e5m2)

    @property
    def itemsize(self):
        return _SIZES[self]

    @property
    def is_floating(self):
        return self >= Dtype.FLOAT16


_SIZES = {
    Dtype.INT8: 1, Dtype.UINT8: 1, Dtype.INT32: 4, Dtype.UINT32: 4, Dtype.INT64: 8,
    Dtype.UINT64: 8, Dtype.FLOAT16: 2, Dtype.BFLOAT16: 2, Dtype.FLOAT32: 4, Dtype.FLOAT64: 8,
    Dtype.FLOAT8_E4M3: 1, Dtype.FLOAT8_E5M2: 1,
}


class Op(enum.IntEnum):
    SUM = 0
    PROD = 1
    MIN = 2
    MAX = 3
    AVG = 4


class Coll(enum.IntEnum):
    ALL_REDUCE = 0
    BROADCAST = 1
    REDUCE = 2
    ALL_GATHER = 3
    REDUCE_SCATTER = 4
    BARRIER = 5
    SEND = 6
    RECV = 7
    GATHER = 8
    SCATTER = 9
    ALL_TO_ALL = 10
    ALL_TO_ALLV = 11
    P2P_GROUP = 12


class Algo(enum.IntEnum):
    AUTO = 0
    RING = 1
    TREE = 2
    DOUBLE_TREE = 3
    RECURSIVE_DOUBLING = 4
    RABENSEIFNER = 5
    DISSEMINATION = 6
    HIERARCHICAL = 7
    LINEAR = 8  # gather, scatter: the root exchanges with every rank directly
    PAIRWISE = 9  # all_to_all: p-1 exchanges, large blocks
    BRUCK = 10  # all_to_all: ceil(log2 p) exchanges, small blocks


# Names as numpy spells them (numpy.dtype(...).name); "bfloat16", "float8_e4m3fn" and
# "float8_e5m2" are what ml_dtypes and torch call theirs. ml_dtypes' "float8_e4m3" is a different
# format (IEEE-like, with infinities), so a numpy array of it is refused (buffers.py); the name
# itself, given as a string, is weft's for e4m3fn.
_BY_NAME = {
    "int8": Dtype.INT8, "uint8": Dtype.UINT8, "int32": Dtype.INT32, "uint32": Dtype.UINT32,
    "int64": Dtype.INT64, "uint64": Dtype.UINT64, "float16": Dtype.FLOAT16,
    "bfloat16": Dtype.BFLOAT16, "float32": Dtype.FLOAT32, "float64": Dtype.FLOAT64,
    "half": Dtype.FLOAT16, "float": Dtype.FLOAT32, "double": Dtype.FLOAT64,
    "float8_e4m3": Dtype.FLOAT8_E4M3, "float8_e4m3fn": Dtype.FLOAT8_E4M3,
    "float8_e5m2": Dtype.FLOAT8_E5M2,
}

# struct-module format characters of the buffer protocol, by (character, itemsize).
_BY_FORMAT = {
    ("b", 1): Dtype.INT8, ("B", 1): Dtype.UINT8, ("c", 1): Dtype.UINT8,
    ("i", 4): Dtype.INT32, ("l", 4): Dtype.INT32, ("q", 4): Dtype.INT32,
    ("I", 4): Dtype.UINT32, ("L", 4): Dtype.UINT32, ("Q", 4): Dtype.UINT32,
    ("i", 8): Dtype.INT64, ("l", 8): Dtype.INT64, ("q", 8): Dtype.INT64, ("n", 8): Dtype.INT64,
    ("I", 8): Dtype.UINT64, ("L", 8): Dtype.UINT64, ("Q", 8): Dtype.UINT64, ("N", 8): Dtype.UINT64,
    ("e", 2): Dtype.FLOAT16, ("f", 4): Dtype.FLOAT32, ("d", 8): Dtype.FLOAT64,
}

_OPS = {"sum": Op.SUM, "prod": Op.PROD, "product": Op.PROD, "min": Op.MIN, "max": Op.MAX,
        "avg": Op.AVG, "mean": Op.AVG}


def to_dtype(value):
    """A Dtype from a Dtype, its name ("float32"), or a numpy dtype or type."""
    if isinstance(value, Dtype):
        return value
    if isinstance(value, int) and not isinstance(value, bool):
        return Dtype(value)
    name = value if isinstance(value, str) else getattr(value, "name", None)
    if name is None and isinstance(value, type):
        name = value.__name__
    if name is None:
        import numpy  # only reached for numpy scalar types and the like

        name = numpy.dtype(value).name
    dt = _BY_NAME.get(str(name).lower())
    if dt is None:
        raise TypeError(f"weft has no dtype {name!r}; supported: {', '.join(d.name.lower() for d in Dtype)}")
    return dt


def from_format(fmt, itemsize):
    """The Dtype of a buffer-protocol format string, or None."""
    fmt = fmt.lstrip("@=<>!")
    if fmt and fmt[0] == "1":  # a count of one: "1f"
        fmt = fmt[1:]
    return _BY_FORMAT.get((fmt, itemsize))


def to_op(value):
    """An Op from an Op or its name ("sum", "prod", "min", "max", "avg")."""
    if isinstance(value, Op):
        return value
    if isinstance(value, int) and not isinstance(value, bool):
        return Op(value)
    op = _OPS.get(str(value).lower())
    if op is None:
        raise ValueError(f"weft has no reduction {value!r}; supported: sum, prod, min, max, avg")
    return op


def to_algo(value):
    """An Algo from None (auto), an Algo, or its name ("ring", "tree", ...)."""
    if value is None:
        return Algo.AUTO
    if isinstance(value, Algo):
        return value
    try:
        return Algo[str(value).upper()]
    except KeyError:
        raise ValueError(f"weft has no algorithm {value!r}; supported: "
                         + ", ".join(a.name.lower() for a in Algo)) from None
