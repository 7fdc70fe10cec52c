"""Sends and receives over the "weft" backend in the orders that deadlock when each is a weft
operation of its own (16 MiB messages: no socket buffer holds them): a ring through
batch_isend_irecv with sends listed before receives (gloo runs it as the reference), isends left
unwaited before a collective or while the rank sleeps, a batch whose partner receives one op at a
time, destroy_process_group with ops still held, and a peer gone before a batch. One launch of
workers/p2p_worker.py per world size (4 ranks pass too; 2 and 3 keep the suite quick).

WEFT_TIMEOUT_MS is 5 s, so a deadlock fails within it; each check takes a fraction of that."""
import pytest

from multiproc import Launch, Launches, check_names

pytest.importorskip("torch")

WORKER = "p2p_worker.py"
WORLD_SIZES = [2, 3]
ENV = {"WEFT_TIMEOUT_MS": "5000"}


@pytest.fixture(scope="module")
def launches(tmp_path_factory):
    return Launches(tmp_path_factory)


@pytest.mark.parametrize("world", WORLD_SIZES)
@pytest.mark.parametrize("check", check_names(WORKER))
def test_p2p(launches, world, check):
    launches.get(WORKER, world, ENV).check(check)


@pytest.mark.parametrize("world", WORLD_SIZES)
def test_p2p_ranks_exit_cleanly(launches, world):
    # Each rank ends with destroy_process_group, which must not hang on what it still holds.
    launches.get(WORKER, world, ENV).assert_clean_exit()


def test_batch_with_a_dead_peer_fails_every_work(tmp_path):
    run = Launch("p2p_dead_worker.py", 2, tmp_path, extra_env={"WEFT_TIMEOUT_MS": "2000"})
    assert run.exit.get(1) == 17, run.describe(1)
    name = "check_batch_fails_on_every_work"
    res = run.results.get(0, {}).get(name)
    assert res is not None, run.describe(0)
    assert res["ok"], f"rank 0:\n{res.get('error')}"
