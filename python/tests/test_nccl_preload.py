"""test_nccl_preload.py -- torch loads weft's libnccl.so.2 in place of NVIDIA's.

`import torch` runs in a subprocess with LD_PRELOAD naming weft's //nccl:libnccl.so.2. Python
loads extensions with RTLD_NOW, so the import fails with "undefined symbol" if weft's library
lacks any name libtorch_cuda.so imports; LD_DEBUG=bindings then shows where each of those names
was bound, and every one must be weft's file. In the process, /proc/self/maps must show weft's
file and ncclGetVersion (looked up as torch's calls look it up) must give weft's answer, 2.30.7.
torch.cuda.nccl.version() is the NCCL release torch was compiled against (a constant in
libtorch_cuda.so, read without calling the library), so it is only printed, not compared.

The same with LD_AUDIT naming weft's libweft_nccl_audit.so (beside libnccl.so.2 in the package):
libtorch_cuda.so's DT_RPATH to the nvidia-nccl wheel notwithstanding, weft's file is mapped and the
wheel's is not; a process the audited one starts (sh) inherits LD_AUDIT but maps no libnccl.

Needs a torch build with CUDA (libtorch_cuda.so, which links libnccl.so.2): the torch 2.13 CUDA
wheel does; Debian's torch 1.13 and the CPU wheels have nothing that loads NCCL, so it skips
there. The library is $WEFT_LIBNCCL, else the installed package's (weft.nccl_library()), else
built now with Bazel as python/setup.py builds it (BAZEL and BAZEL_FLAGS as there); the audit
module likewise $WEFT_LIBNCCL_AUDIT, weft.nccl_audit_library(), or Bazel's.
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


def built_path(env, api, target):
    """$env, else what the installed package's weft.<api>() names, else Bazel's `target` (built
    now)."""
    given = os.environ.get(env)
    if given:
        return given
    try:
        import weft
    except ImportError:
        weft = None
    if weft is not None and hasattr(weft, api):
        try:
            return getattr(weft, api)()
        except weft.LibraryNotFoundError:
            pass
    bazel = shlex.split(os.environ.get("BAZEL", "bazel"))
    flags = shlex.split(os.environ.get("BAZEL_FLAGS", ""))
    if shutil.which(bazel[0]) is None or not (ROOT / "WORKSPACE").is_file():
        pytest.skip(f"no Bazel workspace to build {target} in (set {env})")
    subprocess.run(bazel + ["build"] + flags + [target], cwd=ROOT, check=True,
                   stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    out = subprocess.run(bazel + ["info"] + flags + ["bazel-bin"], cwd=ROOT, check=True,
                         stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True).stdout
    return os.path.join(out.strip(), *target.lstrip("/").split(":"))


def libnccl_path():
    return built_path("WEFT_LIBNCCL", "nccl_library", "//nccl:libnccl.so.2")


def audit_path():
    return built_path("WEFT_LIBNCCL_AUDIT", "nccl_audit_library", "//nccl:libweft_nccl_audit.so")


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


# libtorch_cuda.so, and so libnccl.so.2, is loaded RTLD_LOCAL (an extension's dependency): its names
# are reached through the libnccl.so.2 already loaded (RTLD_NOLOAD), not the global scope.
AUDITED = r"""
import ctypes, json, os, subprocess, torch
maps = sorted({line.split()[-1] for line in open("/proc/self/maps") if "libnccl" in line})
version = ctypes.c_int(0)
rc = ctypes.CDLL("libnccl.so.2", mode=os.RTLD_NOLOAD).ncclGetVersion(ctypes.byref(version))
child = subprocess.run(["sh", "-c", 'echo "LD_AUDIT=$LD_AUDIT"; cat /proc/self/maps'],
                       stdout=subprocess.PIPE, text=True, check=True).stdout
print(json.dumps({"maps": maps, "rc": rc, "version": version.value, "child": child}))
"""


def test_import_torch_with_weft_nccl_audit():
    if libtorch_cuda() is None:
        pytest.skip(f"torch {torch.__version__} has no libtorch_cuda.so: nothing loads NCCL")
    audit = os.path.realpath(audit_path())
    lib = os.path.realpath(libnccl_path())
    assert os.path.isfile(audit), audit
    # As a user runs it: only LD_AUDIT, the module loading the libnccl.so.2 beside it; only where
    # WEFT_LIBNCCL and WEFT_LIBNCCL_AUDIT name files in different folders, WEFT_NCCL_LIBRARY too.
    env = {k: v for k, v in os.environ.items()
           if k not in ("LD_PRELOAD", "WEFT_NCCL_LIBRARY", "WEFT_NCCL_AUDIT_QUIET")}
    env["LD_AUDIT"] = audit
    if os.path.dirname(audit) != os.path.dirname(lib):
        env["WEFT_NCCL_LIBRARY"] = lib
    p = subprocess.run([sys.executable, "-c", AUDITED], env=env, stdout=subprocess.PIPE,
                       stderr=subprocess.PIPE, text=True, timeout=120)
    assert p.returncode == 0, p.stderr[-3000:]
    got = json.loads(p.stdout.strip().splitlines()[-1])

    mapped = [os.path.realpath(m) for m in got["maps"]]
    assert lib in mapped, got["maps"]
    # Without the module, libtorch_cuda.so's DT_RPATH finds the nvidia-nccl wheel's file.
    assert mapped == [lib], f"another libnccl is mapped too: {got['maps']}"
    assert got["rc"] == 0 and got["version"] == NCCL_VERSION_CODE, got
    assert "weft: not loading" not in p.stderr, p.stderr[-3000:]

    # The child inherits LD_AUDIT (the module is loaded there too) but asks for no libnccl.
    assert f"LD_AUDIT={audit}" in got["child"], got["child"][:500]
    assert "libnccl" not in got["child"], [l for l in got["child"].splitlines() if "nccl" in l]
