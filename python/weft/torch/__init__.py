"""weft.torch -- the "weft" backend of torch.distributed, registered on import.

    import torch.distributed as dist
    import weft.torch
    dist.init_process_group("weft")           # env:// (torchrun) or init_method="tcp://..."

CPU tensors of int8, uint8, int32, int64, float16, bfloat16, float32, float64 (and uint32/uint64,
float8_e4m3fn and float8_e5m2 where torch has them), on torch 1.13 and 2.x; every collective
torch.distributed has except monitored_barrier (gloo's only), under the 2.13 method names and the
older ones; DDP, FSDP2, DTensor and the functional collectives on 2.x. async_op=True works
complete on their own.
"""
import inspect

import torch.distributed as dist

from .process_group import BACKEND_NAME, ProcessGroupWeft, create

__all__ = ["BACKEND_NAME", "ProcessGroupWeft", "register"]


def register():
    """Registers backend "weft" with torch.distributed (once; import does it)."""
    if BACKEND_NAME.upper() in getattr(dist.Backend, "_plugins", {}):
        return
    params = inspect.signature(dist.Backend.register_backend).parameters
    if "devices" in params:
        # torch 2.x: CPU tensors, and CUDA ones through weft's device path (a libweft.so built
        # with CUDA, on a machine with a GPU).
        dist.Backend.register_backend(BACKEND_NAME, create, devices=["cpu", "cuda"])
    else:
        dist.Backend.register_backend(BACKEND_NAME, create)


register()


def __getattr__(name):
    # weft.torch.utils without importing it here: it is optional and loads more of torch.
    if name == "utils":
        import importlib

        return importlib.import_module(".utils", __name__)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
