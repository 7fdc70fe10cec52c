"""`python -m weft.info [--json] [--ranks N] [--transport T]`: what weft finds on this machine.

This runs the weft-info command rather than asking libweft.so through ctypes: what it reports
comes from the library's internals (the knob table and its parser, the interface choice, the verbs
and CUDA probes, the cost model's algorithm choice), which libweft.so does not export (libweft.map
lists only the weft_* API). One program, so Python and C users see the same report.

    import weft.info
    report = weft.info.info()          # the --json report as a dict
    report["transports"][0]["usable"]
"""
import json
import os
import shutil
import subprocess
import sys

COMMAND = "weft-info"
NOT_FOUND = (
    "weft-info not found: it is installed with weft's scripts/install.sh (PREFIX/bin/weft-info); "
    "from a checkout, `bazel build //tools/info:weft-info` and put .bazel/bin/tools/info on PATH"
)


def command_path():
    """weft-info beside this package (a package that bundles it), else on PATH, else None."""
    here = os.path.join(os.path.dirname(os.path.abspath(__file__)), COMMAND)
    if os.access(here, os.X_OK):
        return here
    return shutil.which(COMMAND)


def info(args=(), timeout=60):
    """The --json report as a dict; `args` adds options (["--ranks", "16"]). Raises
    FileNotFoundError when weft-info is not installed, RuntimeError when it fails."""
    path = command_path()
    if path is None:
        raise FileNotFoundError(NOT_FOUND)
    done = subprocess.run([path, "--json", *args], capture_output=True, text=True,
                          timeout=timeout)
    if done.returncode != 0:
        raise RuntimeError(f"{path} --json failed (status {done.returncode}): {done.stderr.strip()}")
    return json.loads(done.stdout)


def main(argv=None):
    path = command_path()
    if path is None:
        print(NOT_FOUND, file=sys.stderr)
        return 1
    argv = sys.argv[1:] if argv is None else argv
    return subprocess.run([path, *argv]).returncode


if __name__ == "__main__":
    sys.exit(main())
