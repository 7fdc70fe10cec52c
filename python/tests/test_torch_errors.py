"""Failures under the "weft" backend: a rank killed in the middle of DDP training makes the others
raise within the timeout, naming it (3 ranks; the last one dies)."""
import pytest

from multiproc import Launch

pytest.importorskip("torch")

WORLD = 3


def test_rank_killed_mid_training(tmp_path):
    # The group's timeout (10 s, killed_worker.py) and weft's the same: the survivors must raise
    # within it plus the second at most they wait to hear which rank failed to report (a tenth
    # of the timeout, docs/torch.md).
    run = Launch("killed_worker.py", WORLD, tmp_path, extra_env={"WEFT_TIMEOUT_MS": "10000"})
    assert run.exit.get(WORLD - 1) == 17, run.describe(WORLD - 1)
    name = "check_survivors_raise_naming_the_dead_rank"
    for rank in range(WORLD - 1):
        res = run.results.get(rank, {}).get(name)
        assert res is not None, run.describe(rank)
        assert res["ok"], f"rank {rank}:\n{res.get('error')}"
        assert run.exit.get(rank) == 0, run.describe(rank)
