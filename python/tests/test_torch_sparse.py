"""all_reduce of torch.sparse_coo tensors (SUM) over the "weft" backend: sums of uncoalesced
inputs with different numbers of non-zeros per rank in every dtype, the input replaced in place as
gloo's is, async and future forms, the refusals, and DDP training nn.Embedding and
nn.EmbeddingBag with sparse gradients to gloo's weights (workers/sparse_worker.py)."""
import pytest

from multiproc import Launches, check_names

pytest.importorskip("torch")

WORKER = "sparse_worker.py"
WORLD_SIZES = [2, 3]


@pytest.fixture(scope="module")
def launches(tmp_path_factory):
    return Launches(tmp_path_factory)


@pytest.mark.parametrize("world", WORLD_SIZES)
@pytest.mark.parametrize("check", check_names(WORKER))
def test_sparse(launches, world, check):
    launches.get(WORKER, world).check(check)

