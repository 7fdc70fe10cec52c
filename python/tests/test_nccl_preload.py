"""test_nccl_preload.py -- torch loads weft's libnccl.so.2 in place of NVIDIA's.

`import torch` runs in a subprocess with LD_PRELOAD naming weft's //nccl:libnccl.so.2. Python
loads extensions with RTLD_NOW, so the import fails with "undefined symbol" if weft's library
lacks any name libtorch_cuda.so imports; LD_DEBUG=bindings then shows where each of those names
was bound, and every one must be weft's file. In the process, /proc/self/maps must show weft's
file and ncclGetVersion (looked up as torch's calls look it up) must give weft's answer, 2.30.7.
torch.cuda.nccl.version() is the NCCL release torch was compiled against (a constant in
libtorch_cuda.so, read without calling the library), so it is only printed, not compared.

Needs a torch build with CUDA (libtorch_cuda.so, which links libnccl.so.2): the torch 2.13 CUDA
wheel does; Debian's torch 1.13 and the CPU wheels have nothing that loads NCCL, so it skips
there. The library is $WEFT_LIBNCCL, else the installed package's (weft.nccl_library()), else
built now with Bazel as python/setup.py builds it (BAZEL and BAZEL_FLAGS as there).
"""
import json
import os
import re
import shlex
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

torch = pytest.importorskip("torch")

ROOT = Path(__file__).resolve().parents[2]
NCCL_VERSION_CODE = 23007  # nccl/nccl.h: 2.30.7


def libtorch_cuda():
    path = Path(torch.__file__).parent / "lib" / "libtorch_cuda.so"
    return path if path.is_file() else None


def libnccl_path():
    given = os.environ.get("WEFT_LIBNCCL")
    if given:
        return given
    try:
        import weft
    except ImportError:
        weft = None
    if weft is not None and hasattr(weft, "nccl_library"):
        try:
            return weft.nccl_library()
        except weft.LibraryNotFoundError:
            pass
    bazel = shlex.split(os.environ.get("BAZEL", "bazel"))
    flags = shlex.split(os.environ.get("BAZEL_FLAGS", ""))
    if shutil.which(bazel[0]) is None or not (ROOT / "WORKSPACE").is_file():
        pytest.skip("no Bazel workspace to build //nccl:libnccl.so.2 in (set WEFT_LIBNCCL)")
    subprocess.run(bazel + ["build"] + flags + ["//nccl:libnccl.so.2"], cwd=ROOT, check=True,
                   stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    out = subprocess.run(bazel + ["info"] + flags + ["bazel-bin"], cwd=ROOT, check=True,
                         stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True).stdout
    return os.path.join(out.strip(), "nccl", "libnccl.so.2")


CHILD = r"""
import ctypes, json, torch
maps = sorted({line.split()[-1] for line in open("/proc/self/maps") if "libnccl" in line})
version = ctypes.c_int(0)
rc = ctypes.CDLL(None).ncclGetVersion(ctypes.byref(version))
last = ctypes.CDLL(None).ncclGetLastError
last.restype = ctypes.c_char_p
bad = ctypes.CDLL(None).ncclGetVersion(None)
print(json.dumps({"maps": maps, "rc": rc, "version": version.value,
                  "torch_nccl": list(torch.cuda.nccl.version()),
                  "bad": bad, "last_error": last(None).decode()}))
"""


def test_import_torch_with_weft_libnccl_preloaded():
    if libtorch_cuda() is None:
        pytest.skip(f"torch {torch.__version__} has no libtorch_cuda.so: nothing loads NCCL")
    lib = os.path.realpath(libnccl_path())
    assert os.path.isfile(lib), lib
    env = dict(os.environ, LD_PRELOAD=lib, LD_DEBUG="bindings")
    p = subprocess.run([sys.executable, "-c", CHILD], env=env, stdout=subprocess.PIPE,
                       stderr=subprocess.PIPE, text=True, timeout=120)
    assert p.returncode == 0, p.stderr[-3000:]
    got = json.loads(p.stdout.strip().splitlines()[-1])

    # Every NCCL name libtorch_cuda.so imports was bound, at load, to weft's file.
    bound = re.findall(r"binding file (\S*libtorch_cuda\.so) \S+ to (\S+) \S+: normal symbol "
                       r"`(nccl\w+)'", p.stderr)
    assert len({name for _, _, name in bound}) >= 46, bound[:5]
    elsewhere = sorted({f"{name} -> {to}" for _, to, name in bound if os.path.realpath(to) != lib})
    assert not elsewhere, elsewhere

    assert lib in [os.path.realpath(m) for m in got["maps"]], got["maps"]
    assert got["rc"] == 0 and got["version"] == NCCL_VERSION_CODE, got
    assert got["bad"] == 4 and got["last_error"].startswith("weft: "), got
    print("torch", torch.__version__, "compiled against NCCL", got["torch_nccl"],
          "runs weft's", got["version"])
