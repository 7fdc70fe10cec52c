"""A "weft" group created with timeout=timedelta(seconds=1) whose last rank skips a barrier: the
other ranks raise an error saying "Timed out" within about the timeout (workers/timeout_worker.py
says how much later at most), at 2 and 3 ranks."""
import os

import pytest

from multiproc import Launches, check_names

pytest.importorskip("torch")

WORKER = "timeout_worker.py"
# WEFT_TEST_GLOO=1 also times gloo's barrier the same way (printed to the ranks' logs).
_ENV = {"WEFT_TEST_GLOO": os.environ.get("WEFT_TEST_GLOO", "")}


@pytest.fixture(scope="module")
def launches(tmp_path_factory):
    return Launches(tmp_path_factory)


@pytest.mark.parametrize("world", [2, 3])
@pytest.mark.parametrize("check", check_names(WORKER))
def test_torch_timeout(launches, world, check):
    launches.get(WORKER, world, _ENV).check(check)


@pytest.mark.parametrize("world", [2, 3])
def test_torch_timeout_ranks_exit_cleanly(launches, world):
    launches.get(WORKER, world, _ENV).assert_clean_exit()


@pytest.mark.parametrize("timeout_ms, wait_s", [(1000, 0.1), (100, 0.05), (1, 0.05),
                                                (10000, 1.0), (600000, 3.0), (None, 3.0)])
def test_wait_for_other_ranks_scales_with_the_timeout(timeout_ms, wait_s):
    # min(3 s, max(50 ms, timeout / 10)), docs/torch.md; None: no timeout known (default 30 s).
    from weft.torch.process_group import _Causes

    assert _Causes.wait_bound_s(timeout_ms) == pytest.approx(wait_s)
