"""torch.multiprocessing.spawn starts the ranks (no launcher environment): init_process_group("weft")
with init_method="tcp://...", an all_reduce and an all_gather_object checked against gloo's."""
import os
import sys

import pytest

torch = pytest.importorskip("torch")

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from multiproc import free_ports  # noqa: E402

WORLD = 2


def _rank(rank, port, outdir):
    import torch.distributed as dist

    import weft.torch  # noqa: F401 -- registers "weft" in the spawned process

    dist.init_process_group("weft", init_method=f"tcp://127.0.0.1:{port}", rank=rank,
                            world_size=WORLD)
    gloo = dist.new_group(list(range(WORLD)), backend="gloo")
    results = []
    for group in (None, gloo):
        t = torch.arange(6, dtype=torch.float32) * (rank + 1)
        dist.all_reduce(t, group=group)
        objs = [None] * WORLD
        dist.all_gather_object(objs, ("rank", rank), group=group)
        results.append((t, objs))
    assert torch.equal(results[0][0], results[1][0]), results
    assert results[0][1] == results[1][1] == [("rank", r) for r in range(WORLD)], results
    with open(os.path.join(outdir, f"ok{rank}"), "w") as f:
        f.write(str(results[0][0].tolist()))
    dist.destroy_process_group()


def test_mp_spawn(tmp_path, monkeypatch):
    import torch.multiprocessing as mp

    for k in ("RANK", "WORLD_SIZE", "MASTER_ADDR", "MASTER_PORT", "LOCAL_RANK"):
        monkeypatch.delenv(k, raising=False)
    monkeypatch.setenv("WEFT_TIMEOUT_MS", "30000")
    port = free_ports(1)[0]
    mp.spawn(_rank, args=(port, str(tmp_path)), nprocs=WORLD, join=True)
    want = str((torch.arange(6, dtype=torch.float32) * 3).tolist())
    for rank in range(WORLD):
        with open(tmp_path / f"ok{rank}") as f:
            assert f.read() == want
