"""The ctypes API (weft.Comm) at 1, 2 and 4 ranks: each world size is one launch of
workers/api_worker.py, whose every check is a test here."""
import pytest

from multiproc import Launches, check_names

WORKER = "api_worker.py"
WORLD_SIZES = [1, 2, 4]


@pytest.fixture(scope="module")
def launches(tmp_path_factory):
    return Launches(tmp_path_factory)


@pytest.mark.parametrize("world", WORLD_SIZES)
@pytest.mark.parametrize("check", check_names(WORKER))
def test_api(launches, world, check):
    launches.get(WORKER, world).check(check)


@pytest.mark.parametrize("world", WORLD_SIZES)
def test_api_ranks_exit_cleanly(launches, world):
    launches.get(WORKER, world).assert_clean_exit()
