"""setup.py -- the build steps pyproject.toml cannot declare: the version, and the libraries.

The package is built from a weft checkout (`pip install ./python`, `pip wheel ./python`):

* its version is the library's, read from the WEFT_VERSION_* macros of include/weft.h, the one
  place it is written (weft.__version__ reads it back from the installed metadata);
* build_py runs the same Bazel build as `bazel build //:libweft.so //nccl:libnccl.so.2
  //nccl:libweft_nccl_audit.so` in the checkout and copies the libraries into the built package,
  so the wheel or installation carries them and nothing needs WEFT_LIBRARY (libnccl.so.2 is weft
  behind the NCCL API, weft.nccl_library() gives its path; libweft_nccl_audit.so, beside it, is the
  LD_AUDIT module that loads it in place of NVIDIA's, weft.nccl_audit_library()). Bazel rebuilds
  only what changed, so libraries already built cost nothing. WEFT_LIBWEFT=/path/to/libweft.so
  packages that file instead of running Bazel (a library built separately, as a distribution's
  build does), with WEFT_LIBNCCL=/path/to/libnccl.so.2 if it is to carry that one too, and
  WEFT_LIBNCCL_AUDIT=/path/to/libweft_nccl_audit.so for the audit module (default: the one beside
  WEFT_LIBNCCL, where there is one). BAZEL may carry startup options
  (BAZEL="bazel --output_base=/tmp/ob"), BAZEL_FLAGS build options (e.g. --config=nocuda).

The wheel holds a Linux shared library but no Python extension (ctypes loads it), so it is tagged
for any Python 3 on this platform: py3-none-<platform>.
"""
import os
import re
import shlex
import shutil
import subprocess
from pathlib import Path

from setuptools import Distribution, setup
from setuptools.command.build_py import build_py

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
HEADER = ROOT / "include" / "weft.h"
CHECKOUT_HINT = "the weft package builds from a weft checkout: run `pip install ./python` in one"


def weft_version():
    try:
        text = HEADER.read_text()
    except OSError as e:
        raise SystemExit(f"weft: cannot read {HEADER} ({e.strerror}); {CHECKOUT_HINT}") from e
    parts = []
    for part in ("MAJOR", "MINOR", "PATCH"):
        m = re.search(rf"^#define WEFT_VERSION_{part} (\d+)", text, re.M)
        if not m:
            raise SystemExit(f"weft: {HEADER} has no WEFT_VERSION_{part}")
        parts.append(m.group(1))
    return ".".join(parts)


def library_paths():
    """{name in the package: file} to package: $WEFT_LIBWEFT (and $WEFT_LIBNCCL), else Bazel's,
    built now."""
    given = os.environ.get("WEFT_LIBWEFT")
    if given:
        if not os.path.isfile(given):
            raise SystemExit(f"weft: WEFT_LIBWEFT={given}: no such file")
        paths = {"libweft.so": given}
        nccl = os.environ.get("WEFT_LIBNCCL")
        if nccl:
            if not os.path.isfile(nccl):
                raise SystemExit(f"weft: WEFT_LIBNCCL={nccl}: no such file")
            paths["libnccl.so.2"] = nccl
            audit = os.environ.get("WEFT_LIBNCCL_AUDIT")
            beside = os.path.join(os.path.dirname(nccl), "libweft_nccl_audit.so")
            if audit and not os.path.isfile(audit):
                raise SystemExit(f"weft: WEFT_LIBNCCL_AUDIT={audit}: no such file")
            if audit or os.path.isfile(beside):
                paths["libweft_nccl_audit.so"] = audit or beside
        return paths
    if not (ROOT / "WORKSPACE").is_file():
        raise SystemExit(f"weft: no Bazel workspace at {ROOT}; {CHECKOUT_HINT}, or set "
                         "WEFT_LIBWEFT to a built libweft.so")
    bazel = shlex.split(os.environ.get("BAZEL", "bazel"))
    flags = shlex.split(os.environ.get("BAZEL_FLAGS", ""))
    if shutil.which(bazel[0]) is None:
        raise SystemExit(f"weft: building libweft.so needs Bazel, and {bazel[0]} is not on PATH: "
                         "scripts/install-deps.sh installs it (or set WEFT_LIBWEFT to a built "
                         "libweft.so)")
    try:
        subprocess.run(bazel + ["build"] + flags + ["//:libweft.so", "//nccl:libnccl.so.2",
                                                    "//nccl:libweft_nccl_audit.so"],
                       cwd=ROOT, check=True)
        out = subprocess.run(bazel + ["info"] + flags + ["bazel-bin"], cwd=ROOT, check=True,
                             stdout=subprocess.PIPE, text=True).stdout.strip()
    except subprocess.CalledProcessError as e:
        raise SystemExit(f"weft: `{shlex.join(e.cmd)}` in {ROOT} failed (status "
                         f"{e.returncode}); its output above says why") from e
    return {"libweft.so": os.path.join(out, "libweft.so"),
            "libnccl.so.2": os.path.join(out, "nccl", "libnccl.so.2"),
            "libweft_nccl_audit.so": os.path.join(out, "nccl", "libweft_nccl_audit.so")}


class BuildPyWithLibrary(build_py):
    """build_py, then libweft.so (and libnccl.so.2, libweft_nccl_audit.so) next to the package's
    modules."""

    def run(self):
        super().run()
        for name, src in library_paths().items():
            dst = Path(self.build_lib) / "weft" / name
            dst.parent.mkdir(parents=True, exist_ok=True)
            if dst.exists():
                dst.unlink()  # Bazel's outputs are read-only, and so is an earlier copy
            shutil.copyfile(src, dst)
            os.chmod(dst, 0o755)
            print(f"weft: packaged {src} as {dst}")


class LibraryDistribution(Distribution):
    """Not pure Python: the package holds libweft.so, so it installs to platlib and its wheel
    is tied to the platform."""

    def has_ext_modules(self):
        return True


cmdclass = {"build_py": BuildPyWithLibrary}
try:
    from wheel.bdist_wheel import bdist_wheel

    class BdistWheelPlatform(bdist_wheel):
        """The platform's wheel, for any Python 3: ctypes needs no particular interpreter ABI."""

        def get_tag(self):
            return ("py3", "none") + tuple(super().get_tag()[2:])

    cmdclass["bdist_wheel"] = BdistWheelPlatform
except ImportError:  # no wheel package: pip installs without building a wheel
    pass

setup(version=weft_version(), cmdclass=cmdclass, distclass=LibraryDistribution)
