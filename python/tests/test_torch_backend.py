"""The "weft" torch.distributed backend next to gloo: every collective across dtypes and ops,
async works, send/recv, non-contiguous tensors and the errors, at 1 rank (env://), 2 ranks
(tcp:// init) and 3 ranks (env://). One launch of workers/torch_worker.py per world size."""
import pytest

from multiproc import Launches, check_names

pytest.importorskip("torch")

WORKER = "torch_worker.py"
RUNS = {1: "env", 2: "tcp", 3: "env"}


@pytest.fixture(scope="module")
def launches(tmp_path_factory):
    return Launches(tmp_path_factory)


def run(launches, world):
    return launches.get(WORKER, world, {"WEFT_TEST_INIT": RUNS[world]}, variant=RUNS[world])


@pytest.mark.parametrize("world", sorted(RUNS))
@pytest.mark.parametrize("check", check_names(WORKER))
def test_backend(launches, world, check):
    run(launches, world).check(check)


@pytest.mark.parametrize("world", sorted(RUNS))
def test_backend_ranks_exit_cleanly(launches, world):
    run(launches, world).assert_clean_exit()
