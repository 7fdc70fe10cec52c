"""The package as a user gets it: a wheel built from the checkout carries libweft.so (and
libnccl.so.2, weft behind the NCCL API), and in a clean venv (no system packages, no WEFT_LIBRARY,
not run from the checkout) it runs a 2-rank all-reduce."""
import os
import re
import subprocess
import sys
import zipfile
from pathlib import Path

from multiproc import free_ports

ROOT = Path(__file__).resolve().parents[2]

RANK = r"""
import array, os, sys, weft
here = os.path.dirname(weft.__file__)
assert here.startswith(sys.prefix), (here, sys.prefix)  # the venv's copy, not the checkout's
assert weft.library_path() == os.path.join(here, "libweft.so"), weft.library_path()
assert weft.nccl_library() == os.path.join(here, "libnccl.so.2"), weft.nccl_library()
assert weft.nccl_audit_library() == os.path.join(here, "libweft_nccl_audit.so"), \
    weft.nccl_audit_library()
assert weft.__version__ == "%(version)s", weft.__version__
assert weft.version() == tuple(int(p) for p in "%(version)s".split(".")), weft.version()
with weft.Comm() as comm:
    x = array.array("f", [comm.rank + 1.0 + i for i in range(1000)])
    comm.all_reduce(x, op="sum")
    bad = [i for i, v in enumerate(x) if v != 3.0 + 2 * i]
    assert not bad, (comm.rank, bad[:5])
    print("rank", comm.rank, "all_reduce correct")
"""


def header_version():
    text = (ROOT / "include" / "weft.h").read_text()
    return ".".join(re.search(rf"^#define WEFT_VERSION_{p} (\d+)", text, re.M).group(1)
                    for p in ("MAJOR", "MINOR", "PATCH"))


def test_wheel_in_clean_venv(tmp_path):
    version = header_version()
    # Nothing may point the package at a library: the wheel's own must be the one loaded.
    env = {k: v for k, v in os.environ.items()
           if k not in ("WEFT_LIBRARY", "WEFT_LIBWEFT", "PYTHONPATH", "VIRTUAL_ENV")}
    dist = tmp_path / "dist"
    # Offline, as scripts/test-python.sh installs: the system's setuptools and wheel build it,
    # and setup.py runs Bazel for libweft.so.
    subprocess.run([sys.executable, "-m", "pip", "wheel", "-q", "--no-build-isolation", "--no-deps",
                    "--no-index", "-w", str(dist), str(ROOT / "python")], env=env, check=True,
                   timeout=900)
    wheels = list(dist.glob("weft-*.whl"))
    assert len(wheels) == 1, wheels
    assert wheels[0].name == f"weft-{version}-py3-none-linux_x86_64.whl", wheels[0].name
    names = zipfile.ZipFile(wheels[0]).namelist()
    assert "weft/libweft.so" in names and "weft/libnccl.so.2" in names, names
    assert "weft/libweft_nccl_audit.so" in names, names

    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", str(venv)], env=env, check=True, timeout=300)
    python = str(venv / "bin" / "python")
    subprocess.run([python, "-m", "pip", "install", "-q", "--no-index", "--no-deps",
                    str(wheels[0])], env=env, check=True, timeout=300)

    port = free_ports(1)[0]
    procs = []
    for rank in range(2):
        renv = dict(env, RANK=str(rank), WORLD_SIZE="2", MASTER_ADDR="127.0.0.1",
                    MASTER_PORT=str(port))
        procs.append(subprocess.Popen([python, "-c", RANK % {"version": version}], env=renv,
                                      cwd=tmp_path, stdout=subprocess.PIPE,
                                      stderr=subprocess.STDOUT, text=True))
    outs = [p.communicate(timeout=120)[0] for p in procs]
    for rank, (p, out) in enumerate(zip(procs, outs)):
        assert p.returncode == 0, f"rank {rank}:\n{out}"
        assert f"rank {rank} all_reduce correct" in out, out
