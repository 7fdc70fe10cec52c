"""Comm.shrink and Comm.failed_ranks: one of 4 ranks dies, the 3 others carry on
(workers/shrink_worker.py)."""
from multiproc import Launch

WORLD = 4
DEAD = 1


def test_three_survivors_of_four_all_reduce_on_the_shrunk_comm(tmp_path):
    run = Launch("shrink_worker.py", WORLD, tmp_path, extra_env={"WEFT_TIMEOUT_MS": "5000"})
    assert run.exit.get(DEAD) == 17, run.describe(DEAD)
    name = "check_survivors_shrink_and_carry_on"
    for rank in range(WORLD):
        if rank == DEAD:
            continue
        res = run.results.get(rank, {}).get(name)
        assert res is not None, run.describe(rank)
        assert res["ok"], f"rank {rank}:\n{res.get('error')}"
        assert run.exit.get(rank) == 0, run.describe(rank)
