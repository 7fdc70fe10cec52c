"""tensors.py -- torch dtypes and reduce ops in weft's terms, and the checks that go with them."""
import torch
import torch.distributed as dist

from ..buffers import Buffer
from ..dtypes import Dtype, Op

_DTYPES = {
    torch.int8: Dtype.INT8,
    torch.uint8: Dtype.UINT8,
    torch.int32: Dtype.INT32,
    torch.int64: Dtype.INT64,
    torch.float16: Dtype.FLOAT16,
    torch.bfloat16: Dtype.BFLOAT16,
    torch.float32: Dtype.FLOAT32,
    torch.float64: Dtype.FLOAT64,
}
# Unsigned 32 and 64-bit tensors exist from torch 2.3 on, fp8 from torch 2.1 on.
for _name, _dt in (("uint32", Dtype.UINT32), ("uint64", Dtype.UINT64),
                   ("float8_e4m3fn", Dtype.FLOAT8_E4M3), ("float8_e5m2", Dtype.FLOAT8_E5M2)):
    if isinstance(getattr(torch, _name, None), torch.dtype):
        _DTYPES[getattr(torch, _name)] = _dt

_OPS = [
    (dist.ReduceOp.SUM, Op.SUM),
    (dist.ReduceOp.AVG, Op.AVG),
    (dist.ReduceOp.PRODUCT, Op.PROD),
    (dist.ReduceOp.MIN, Op.MIN),
    (dist.ReduceOp.MAX, Op.MAX),
]


def supported_dtypes():
    return list(_DTYPES)


def weft_dtype(t, what):
    """The weft Dtype of tensor t; TypeError for what weft cannot carry."""
    if not isinstance(t, torch.Tensor):
        raise TypeError(f"weft: {what}: expected a tensor, got {type(t).__name__}")
    if t.device.type not in ("cpu", "cuda"):
        raise TypeError(f"weft: {what}: the weft backend takes CPU and CUDA tensors, got one on "
                        f"{t.device}")
    if t.layout != torch.strided:
        raise TypeError(f"weft: {what}: {t.layout} tensors are not supported, only dense ones")
    dt = _DTYPES.get(t.dtype)
    if dt is None:
        names = ", ".join(str(d).replace("torch.", "") for d in _DTYPES)
        raise TypeError(f"weft: {what}: dtype {t.dtype} is not supported by the weft backend "
                        f"(supported: {names})")
    return dt


def as_buffer(t, what):
    """A weft Buffer over contiguous tensor t (which the Buffer keeps alive)."""
    dt = weft_dtype(t, what)
    if not t.is_contiguous():
        raise ValueError(f"weft: {what}: internal error, tensor is not contiguous")
    return Buffer(t.data_ptr(), t.numel(), dt, owner=t)


def weft_op(reduce_op, t, what):
    """The weft Op for torch's ReduceOp, checked against the tensor's dtype."""
    for torch_op, op in _OPS:
        if reduce_op == torch_op:
            break
    else:
        name = getattr(reduce_op, "op", reduce_op)
        raise ValueError(f"weft: {what}: reduce op {name} is not supported by the weft backend "
                         "(supported: SUM, AVG, PRODUCT, MIN, MAX)")
    if op == Op.AVG and not t.is_floating_point():
        # torch does not average integers (mean() of an integer tensor is an error); weft would
        # truncate, NCCL-style, which silently differs from any float reference.
        raise TypeError(f"weft: {what}: ReduceOp.AVG needs a floating-point tensor, got "
                        f"{t.dtype}; use SUM and divide")
    return op


def single(tensors, what):
    """The one tensor of a torch.distributed tensor list (one tensor per process)."""
    if isinstance(tensors, torch.Tensor):
        return tensors
    tensors = list(tensors)
    if len(tensors) != 1:
        raise ValueError(f"weft: {what}: expected one tensor per process, got {len(tensors)}")
    return tensors[0]
