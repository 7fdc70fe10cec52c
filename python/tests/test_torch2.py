"""What torch 2.x reaches the "weft" backend through (the 2.13 names, coalesced forms, gather,
scatter, all_to_all, PREMUL_SUM, batch_isend_irecv, object and functional collectives, DTensor,
FSDP2, DeviceMesh sub-groups, refusals, the group timeout), next to gloo, at 1, 2 and 4 ranks.
One launch of workers/torch2_worker.py per world size; on torch 1.13 the 2.x-only checks skip."""
import pytest

from multiproc import Launches, check_names

pytest.importorskip("torch")

WORKER = "torch2_worker.py"
WORLD_SIZES = [1, 2, 4]


@pytest.fixture(scope="module")
def launches(tmp_path_factory):
    return Launches(tmp_path_factory)


@pytest.mark.parametrize("world", WORLD_SIZES)
@pytest.mark.parametrize("check", check_names(WORKER))
def test_torch2(launches, world, check):
    launches.get(WORKER, world).check(check)


@pytest.mark.parametrize("world", WORLD_SIZES)
def test_torch2_ranks_exit_cleanly(launches, world):
    launches.get(WORKER, world).assert_clean_exit()
