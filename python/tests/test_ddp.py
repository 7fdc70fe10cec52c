"""DistributedDataParallel over weft ends with the same parameters as over gloo (2 ranks:
bitwise; 3 ranks: to rounding), with several buckets, unused parameters and no_sync."""
import pytest

from multiproc import Launches, check_names

pytest.importorskip("torch")

WORKER = "ddp_worker.py"
WORLD_SIZES = [2, 3]


@pytest.fixture(scope="module")
def launches(tmp_path_factory):
    return Launches(tmp_path_factory)


@pytest.mark.parametrize("world", WORLD_SIZES)
@pytest.mark.parametrize("check", check_names(WORKER))
def test_ddp(launches, world, check):
    launches.get(WORKER, world).check(check)


@pytest.mark.parametrize("world", WORLD_SIZES)
def test_ddp_ranks_exit_cleanly(launches, world):
    launches.get(WORKER, world).assert_clean_exit()
