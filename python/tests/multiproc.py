"""multiproc.py -- starts the ranks of a worker script and collects what each rank's checks found.

A worker (workers/*.py) defines `check_*` functions and runs them all in one launch (importing
torch takes seconds; one launch per world size keeps the suite fast); every rank writes
rank<N>.json with each check's outcome. Tests are parametrized over the check names read from
the worker's source, so each check is its own pytest test without a launch of its own.
"""
import json
import os
import re
import socket
import subprocess
import sys

import pytest

HERE = os.path.dirname(os.path.abspath(__file__))
WORKERS = os.path.join(HERE, "workers")
LAUNCH_TIMEOUT_S = 150

# Launcher variables the parent may have (when the suite itself runs under a launcher): a rank
# must see only what launch() gives it.
_SCRUB = ("RANK", "WORLD_SIZE", "LOCAL_RANK", "LOCAL_WORLD_SIZE", "MASTER_ADDR", "MASTER_PORT",
          "TORCHELASTIC_RUN_ID", "OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE", "SLURM_PROCID",
          "SLURM_NTASKS", "SLURM_LOCALID", "SLURM_NTASKS_PER_NODE", "SLURM_JOB_ID")


def worker_path(name):
    return os.path.join(WORKERS, name)


def check_names(worker):
    """The check_* functions a worker defines, in order."""
    with open(worker_path(worker)) as f:
        return re.findall(r"^def (check_\w+)\(", f.read(), re.M)


def free_ports(k):
    """k distinct ports nothing listens on now."""
    socks = []
    try:
        for _ in range(k):
            s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
            s.bind(("127.0.0.1", 0))
            socks.append(s)
        return [s.getsockname()[1] for s in socks]
    finally:
        for s in socks:
            s.close()


def base_env():
    env = {k: v for k, v in os.environ.items() if not k.startswith("WEFT_") and k not in _SCRUB}
    env["OMP_NUM_THREADS"] = "1"
    # A collective that cannot complete (mismatch, dead peer) fails well inside the launch timeout.
    env["WEFT_TIMEOUT_MS"] = "15000"
    env["WEFT_CONNECT_TIMEOUT_MS"] = "30000"
    if os.environ.get("WEFT_LIBRARY"):
        env["WEFT_LIBRARY"] = os.environ["WEFT_LIBRARY"]
    return env


class Launch:
    """`world` ranks of `worker`, run to completion; results[rank] = {check: outcome}."""

    def __init__(self, worker, world, outdir, extra_env=None, timeout=LAUNCH_TIMEOUT_S):
        self.worker, self.world, self.outdir = worker, world, str(outdir)
        master, *extra = free_ports(4)
        procs = []
        for rank in range(world):
            env = base_env()
            env.update(RANK=str(rank), WORLD_SIZE=str(world), MASTER_ADDR="127.0.0.1",
                       MASTER_PORT=str(master), WEFT_TEST_PORTS=",".join(map(str, extra)),
                       WEFT_TEST_OUT=self.outdir)
            env.update(extra_env or {})
            log = open(os.path.join(self.outdir, f"rank{rank}.log"), "w+")
            p = subprocess.Popen([sys.executable, worker_path(worker)], env=env, stdout=log,
                                 stderr=subprocess.STDOUT)
            procs.append((p, log))
        self.exit, self.logs = {}, {}
        try:
            for rank, (p, log) in enumerate(procs):
                try:
                    self.exit[rank] = p.wait(timeout=timeout)
                except subprocess.TimeoutExpired:
                    self.exit[rank] = f"killed after {timeout} s"
                    timeout = 1  # the launch as a whole has had its time
        finally:
            for rank, (p, log) in enumerate(procs):
                if p.poll() is None:
                    p.kill()
                    p.wait(timeout=30)
                log.seek(0)
                self.logs[rank] = log.read()
                log.close()
        self.results = {}
        for rank in range(world):
            path = os.path.join(self.outdir, f"rank{rank}.json")
            if os.path.exists(path):
                with open(path) as f:
                    self.results[rank] = json.load(f)

    def describe(self, rank):
        return (f"{self.worker} rank {rank} of {self.world} (exit {self.exit.get(rank)}); "
                f"output:\n{self.logs.get(rank, '')[-6000:]}")

    def check(self, name):
        """Fails the calling test with the first rank's error, skips it if every rank skipped."""
        skipped = []
        for rank in range(self.world):
            res = self.results.get(rank, {}).get(name)
            if res is None:
                pytest.fail(f"{name}: no result\n{self.describe(rank)}")
            if res.get("skip"):
                skipped.append(res["skip"])
            elif not res["ok"]:
                pytest.fail(f"{name} failed on rank {rank} of {self.world}:\n{res['error']}")
        if skipped and len(skipped) == self.world:
            pytest.skip(skipped[0])

    def assert_clean_exit(self):
        for rank in range(self.world):
            assert self.exit.get(rank) == 0, self.describe(rank)


class Launches:
    """One Launch per (worker, world, variant), made on first use and shared by the tests."""

    def __init__(self, tmp_path_factory):
        self._tmp = tmp_path_factory
        self._runs = {}

    def get(self, worker, world, extra_env=None, variant=""):
        key = (worker, world, variant)
        if key not in self._runs:
            outdir = self._tmp.mktemp(f"{worker.replace('.py', '')}{world}{variant}")
            self._runs[key] = Launch(worker, world, outdir, extra_env)
        return self._runs[key]
