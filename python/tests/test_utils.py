"""weft.torch.utils at 1, 2 and 4 ranks, under gloo and under weft, results compared.

Importing torch takes seconds on a small machine, so each world size is one launch of
utils_worker.py in which every rank runs every check under gloo, then under weft; the tests below
read what the ranks wrote. A failed check names the rank and carries its traceback.
"""

import json
import os
import socket
import subprocess
import sys

import pytest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import utils_worker  # noqa: E402 -- imports no torch at module level

WORLD_SIZES = [1, 2, 4]
LAUNCH_TIMEOUT_S = 150


def free_ports(k):
    """k ports nothing listens on now (bound together, so they differ)."""
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


def launch(world, outdir, timeout=LAUNCH_TIMEOUT_S):
    """Starts `world` ranks of utils_worker.py; returns {rank: (returncode, output)}."""
    gloo_port, weft_port = free_ports(2)
    procs = []
    for rank in range(world):
        env = dict(os.environ)
        for k in ("WEFT_RANK", "WEFT_WORLD_SIZE", "WEFT_LOCAL_RANK", "LOCAL_WORLD_SIZE",
                  "MASTER_ADDR", "MASTER_PORT"):
            env.pop(k, None)
        env.update(RANK=str(rank), WORLD_SIZE=str(world), LOCAL_RANK=str(rank),
                   GLOO_PORT=str(gloo_port), WEFT_PORT=str(weft_port),
                   # Fail a mismatched or abandoned collective well inside the launch timeout.
                   WEFT_TIMEOUT_MS="20000", OMP_NUM_THREADS="1")
        log = open(os.path.join(outdir, "rank%d.log" % rank), "w+")
        procs.append((subprocess.Popen([sys.executable, utils_worker.__file__, outdir], env=env,
                                       stdout=log, stderr=subprocess.STDOUT), log))
    out = {}
    try:
        for rank, (p, log) in enumerate(procs):
            try:
                rc = p.wait(timeout=timeout)
            except subprocess.TimeoutExpired:
                rc = "timeout after %ds" % timeout
                timeout = 1  # the launch as a whole has had its time
            log.seek(0)
            out[rank] = (rc, log.read())
    finally:
        for p, log in procs:
            if p.poll() is None:
                p.kill()
                p.wait(timeout=30)
            log.close()
    return out


class Launch:
    def __init__(self, world, outdir):
        self.world = world
        self.procs = launch(world, str(outdir))
        self.results = {}
        for rank in range(world):
            path = os.path.join(str(outdir), "rank%d.json" % rank)
            if os.path.exists(path):
                with open(path) as f:
                    self.results[rank] = json.load(f)

    def where(self, rank):
        rc, log = self.procs[rank]
        failed = ["%s/%s:\n%s" % (sec, name, e["error"])
                  for sec in ("pre", "gloo", "weft")
                  for name, e in self.results.get(rank, {}).get(sec, {}).items() if not e["ok"]]
        return "rank %d of %d (exit %s)\n%soutput:\n%s" % (
            rank, self.world, rc, "".join(f + "\n" for f in failed), log[-4000:])

    def entry(self, rank, section, name):
        res = self.results.get(rank, {}).get(section, {})
        if name not in res:
            pytest.fail("%s: no result for %s/%s\n%s" % (name, section, name, self.where(rank)))
        e = res[name]
        if not e["ok"]:
            pytest.fail("%s under %s failed on rank %d of %d:\n%s" %
                        (name, section, rank, self.world, e["error"]))
        return e["value"]

    def weft_skip(self):
        reasons = {r.get("weft_skip") for r in self.results.values()}
        reasons.discard(None)
        return reasons.pop() if reasons else None


_launches = {}


@pytest.fixture(scope="module")
def launches(tmp_path_factory):
    def get(world):
        if world not in _launches:
            _launches[world] = Launch(world, tmp_path_factory.mktemp("utils%d" % world))
        return _launches[world]

    yield get
    _launches.clear()


@pytest.mark.parametrize("world", WORLD_SIZES)
def test_launch_completes(launches, world):
    """Every rank exits 0 having run every check under both backends (or skipped weft)."""
    run = launches(world)
    for rank in range(world):
        rc, _ = run.procs[rank]
        assert rc == 0 and run.results.get(rank, {}).get("done"), run.where(rank)


@pytest.mark.parametrize("world", WORLD_SIZES)
@pytest.mark.parametrize("name", utils_worker.PRE_CHECKS)
def test_before_init(launches, world, name):
    """Before init_process_group: one clear error in a launch, the identity when alone."""
    run = launches(world)
    for rank in range(world):
        run.entry(rank, "pre", name)


@pytest.mark.parametrize("world", WORLD_SIZES)
@pytest.mark.parametrize("name", utils_worker.CHECKS)
def test_gloo(launches, world, name):
    run = launches(world)
    for rank in range(world):
        run.entry(rank, "gloo", name)


@pytest.mark.parametrize("world", WORLD_SIZES)
@pytest.mark.parametrize("name", utils_worker.CHECKS)
def test_weft_matches_gloo(launches, world, name):
    """The same helper over the weft backend passes the same checks and returns what gloo did."""
    run = launches(world)
    reason = run.weft_skip()
    if reason:
        pytest.skip(reason)
    for rank in range(world):
        want = run.entry(rank, "gloo", name)
        got = run.entry(rank, "weft", name)
        assert same(got, want), "rank %d: weft %r, gloo %r" % (rank, got, want)


def same(a, b):
    """Equal, floats within 1e-5 relative: gradients are sums of rounded products, and two
    backends may add the ranks' contributions in different orders."""
    if isinstance(a, float) or isinstance(b, float):
        return isinstance(a, (int, float)) and isinstance(b, (int, float)) and (
            a == b or abs(a - b) <= 1e-5 * max(abs(a), abs(b)) + 1e-9)
    if isinstance(a, list) and isinstance(b, list):
        return len(a) == len(b) and all(same(x, y) for x, y in zip(a, b))
    if isinstance(a, dict) and isinstance(b, dict):
        return a.keys() == b.keys() and all(same(a[k], b[k]) for k in a)
    return type(a) == type(b) and a == b
