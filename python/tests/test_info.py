"""`python -m weft.info`: runs weft-info and passes its report through, JSON included."""
import json
import os
import shlex
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def info_dir():
    """The folder of a weft-info to run: on PATH, else built from this checkout with Bazel."""
    found = shutil.which("weft-info")
    if found:
        return os.path.dirname(found)
    bazel = shlex.split(os.environ.get("BAZEL", "bazel"))
    flags = shlex.split(os.environ.get("BAZEL_FLAGS", ""))
    if shutil.which(bazel[0]) is None:
        pytest.fail("weft-info is not on PATH and there is no Bazel to build it")
    subprocess.run(bazel + ["build"] + flags + ["//tools/info:weft-info"], cwd=ROOT, check=True)
    out = subprocess.run(bazel + ["info"] + flags + ["bazel-bin"], cwd=ROOT, check=True,
                         capture_output=True, text=True).stdout.strip()
    return os.path.join(out, "tools", "info")


def run_module(args, path, extra_env=None):
    env = {k: v for k, v in os.environ.items() if not k.startswith("WEFT_") or k == "WEFT_LIBRARY"}
    env["PATH"] = path
    env.update(extra_env or {})
    return subprocess.run([sys.executable, "-m", "weft.info", *args], capture_output=True,
                          text=True, env=env, timeout=120)


def test_json_report(info_dir):
    done = run_module(["--json", "--ranks", "4"], info_dir + os.pathsep + os.environ["PATH"],
                      {"WEFT_NSOCKS": "2", "WEFT_FOO": "1"})
    assert done.returncode == 0, done.stderr
    report = json.loads(done.stdout)
    transports = {t["name"]: t for t in report["transports"]}
    assert set(transports) == {"tcp", "shm", "cuda_ipc", "staged", "rdma"}
    assert transports["tcp"]["usable"] and transports["shm"]["usable"]
    for t in transports.values():
        assert t["usable"] or t["why"], t
    knobs = {k["name"]: k["value"] for k in report["environment"]["knobs"]}
    assert knobs["WEFT_NSOCKS"] == "2"
    assert "WEFT_FOO" in report["environment"]["unknown"]
    assert report["algorithms"]["ranks"] == 4
    assert all(c["algorithm"] for c in report["algorithms"]["choices"])


def test_info_function(info_dir, monkeypatch):
    import weft.info

    monkeypatch.setenv("PATH", info_dir + os.pathsep + os.environ["PATH"])
    report = weft.info.info(["--transport", "tcp"])
    assert report["algorithms"]["transport"] == "tcp"


def test_missing_command_says_how_to_get_it(tmp_path):
    done = run_module(["--json"], str(tmp_path))
    assert done.returncode == 1 and done.stdout == ""
    assert "weft-info not found" in done.stderr and "install.sh" in done.stderr
