"""Receives from any source from Python: weft.Comm.recv without a peer returns the sender (and
the async Request's `source` tells it), and the torch backend's recv_anysource makes dist.recv
and dist.irecv without src work, reporting the sender through the Work's _source_rank(). Rank 0
receives from every other rank at once; 2 and 3 ranks (3: two senders race)."""
import pytest

from multiproc import Launches, check_names

API_WORKER = "anysource_api_worker.py"
TORCH_WORKER = "anysource_torch_worker.py"
WORLD_SIZES = [2, 3]
ENV = {"WEFT_TIMEOUT_MS": "5000"}


@pytest.fixture(scope="module")
def launches(tmp_path_factory):
    return Launches(tmp_path_factory)


@pytest.mark.parametrize("world", WORLD_SIZES)
@pytest.mark.parametrize("check", check_names(API_WORKER))
def test_comm(launches, world, check):
    pytest.importorskip("numpy")
    launches.get(API_WORKER, world, ENV).check(check)


@pytest.mark.parametrize("world", WORLD_SIZES)
@pytest.mark.parametrize("check", check_names(TORCH_WORKER))
def test_torch(launches, world, check):
    pytest.importorskip("torch")
    launches.get(TORCH_WORKER, world, ENV).check(check)
