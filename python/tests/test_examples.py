"""examples/train.py launched alone, by weft-run and by torchrun, over gloo and over weft.

weft-run is found through $WEFT_RUN, else Bazel's output link .bazel/bin/tools/weft-run in the
repository (`bazel build //tools:weft-run`), else in the Bazel output folder $WEFT_LIBRARY is in,
else `weft-run` on PATH.
"""

import os
import re
import shutil
import subprocess
import sys

import pytest

REPO = os.path.abspath(os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", ".."))
TRAIN = os.path.join(REPO, "examples", "train.py")
TIMEOUT_S = 120
EPOCHS = 2


def find_weft_run():
    lib = os.environ.get("WEFT_LIBRARY")
    beside_lib = os.path.join(os.path.dirname(lib), "tools", "weft-run") if lib else None
    for path in (os.environ.get("WEFT_RUN"), os.path.join(REPO, ".bazel", "bin", "tools",
                                                          "weft-run"), beside_lib,
                 shutil.which("weft-run")):
        if path and os.access(path, os.X_OK):
            return path
    return None


_weft_backend = {}


def weft_backend_missing():
    """Why the weft backend cannot be used here, or None; asked of a fresh interpreter once."""
    if "why" not in _weft_backend:
        probe = ("import torch.distributed as d, weft.torch\n"
                 "assert hasattr(d.Backend, 'WEFT'), 'import weft.torch registered no backend'\n")
        p = subprocess.run([sys.executable, "-c", probe], stdout=subprocess.PIPE,
                           stderr=subprocess.STDOUT, timeout=60, universal_newlines=True)
        lines = p.stdout.strip().splitlines()
        _weft_backend["why"] = None if p.returncode == 0 else (
            "weft.torch is not usable: " + (lines[-1] if lines else "exit %d" % p.returncode))
    return _weft_backend["why"]


def torchrun_args():
    """torchrun tees each worker's stdout and prefixes its lines ("[default0]:"). Without it the
    two ranks write into one pipe and a line of one can land inside a line of the other (print
    writes the text and the newline separately), which breaks the per-rank lines checked below.
    torch 1.13's torchrun also needs it on Python >= 3.11: without --redirects it fails before
    starting any worker ("'NoneType' object has no attribute 'get'", fixed in torch 2.0)."""
    return ["--redirects", "1", "--tee", "1"]


def free_port():
    import socket
    s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return port


def run(cmd, cwd):
    env = dict(os.environ, OMP_NUM_THREADS="1", WEFT_TIMEOUT_MS="30000")
    for k in ("RANK", "WORLD_SIZE", "LOCAL_RANK", "LOCAL_WORLD_SIZE", "MASTER_ADDR", "MASTER_PORT",
              "WEFT_RANK", "WEFT_WORLD_SIZE", "WEFT_LOCAL_RANK"):
        env.pop(k, None)
    try:
        p = subprocess.run(cmd, cwd=str(cwd), env=env, stdout=subprocess.PIPE,
                           stderr=subprocess.STDOUT, timeout=TIMEOUT_S, universal_newlines=True)
    except subprocess.TimeoutExpired as e:
        pytest.fail("%s: no exit within %ds; output:\n%s" % (" ".join(cmd), TIMEOUT_S, e.output))
    assert p.returncode == 0, "%s: exit %d; output:\n%s" % (" ".join(cmd), p.returncode, p.stdout)
    return p.stdout


def check_output(out, ranks, backend, outdir):
    """What train.py prints from local rank 0 (once) and from every rank (the checkpoint line)."""
    why = "output:\n" + out
    # Launchers prefix lines ("[rank 0] " from weft-run, "[default0]:" from torchrun's tee).
    lines = [re.sub(r"^(\[rank \d+\] |\[default\d+\]:)", "", line) for line in out.splitlines()]
    assert "train.py: %d rank(s), backend %s, master" % (ranks, backend) in out, why
    losses = []
    for epoch in range(EPOCHS):
        ls = [line for line in lines if line.startswith("epoch %d: loss" % epoch)]
        assert len(ls) == 1, "epoch %d printed %d times (only local rank 0 prints); %s" % (
            epoch, len(ls), why)
        losses.append(float(ls[0].split()[3]))
        assert "samples 1024 " in ls[0], why  # the shards cover the data set once
    assert losses[-1] < losses[0], "loss did not fall: %s; %s" % (losses, why)
    for epoch in range(1, EPOCHS):
        assert "epoch %d: sampler order differs from epoch %d" % (epoch, epoch - 1) in lines, why
    assert "parameters identical on all %d rank(s)" % ranks in lines, why
    assert "checkpoint saved to %s" % os.path.join(str(outdir), "model.pt") in lines, why
    loaded = [line for line in lines if "checkpoint loaded on the CPU, matches the model" in line]
    assert len(loaded) == ranks, why
    if ranks > 1:
        assert sorted(re.search(r"\[rank (\d+)\]", line).group(1) for line in loaded) == [
            str(r) for r in range(ranks)], why
    assert os.path.getsize(os.path.join(str(outdir), "model.pt")) > 0


def backend_or_skip(backend):
    if backend == "weft":
        why = weft_backend_missing()
        if why:
            pytest.skip(why)


def test_single_process(tmp_path):
    """No launcher: the helpers are the identity and the same script trains alone."""
    out = run([sys.executable, TRAIN, "--epochs", str(EPOCHS), "--out", str(tmp_path / "o")],
              tmp_path)
    check_output(out, 1, "none", tmp_path / "o")


@pytest.mark.parametrize("backend", ["gloo", "weft"])
def test_weft_run(tmp_path, backend):
    weft_run = find_weft_run()
    if weft_run is None:
        pytest.skip("weft-run not found: set WEFT_RUN or `bazel build //tools:weft-run`")
    backend_or_skip(backend)
    out = run([weft_run, "-n", "2", sys.executable, TRAIN, "--backend", backend, "--epochs",
               str(EPOCHS), "--out", str(tmp_path / "o")], tmp_path)
    check_output(out, 2, backend, tmp_path / "o")


@pytest.mark.parametrize("backend", ["gloo", "weft"])
def test_torchrun(tmp_path, backend):
    backend_or_skip(backend)
    out = run([sys.executable, "-m", "torch.distributed.run", "--nproc_per_node", "2",
               "--master_port", str(free_port())] + torchrun_args() +
              [TRAIN, "--backend", backend, "--epochs", str(EPOCHS), "--out", str(tmp_path / "o")],
              tmp_path)
    check_output(out, 2, backend, tmp_path / "o")
