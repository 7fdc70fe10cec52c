"""process_group._Causes, the part of the torch backend that names a dead rank in the errors of
the survivors, against a store that plays the failures (test_torch_errors.py runs it for real)."""
import pytest

pytest.importorskip("torch")

from weft.errors import Result, WeftError  # noqa: E402
from weft.torch.process_group import _Causes  # noqa: E402

KEY = _Causes._KEY


class _Store:
    """A store holding the first failures other ranks published; after `answers` calls it raises,
    as the group's store does once rank 0, which serves it, has exited."""

    def __init__(self, published, answers=None):
        self.values = {f"{KEY}{r}": v.encode() for r, v in published.items()}
        self.answers = answers

    def _answer(self):
        if self.answers is not None:
            if self.answers <= 0:
                raise RuntimeError("Connection reset by peer")
            self.answers -= 1

    def set(self, key, value):
        self._answer()
        self.values[key] = value.encode()

    def check(self, keys):
        self._answer()
        return all(k in self.values for k in keys)

    def get(self, key):
        self._answer()
        return self.values[key]


def _remote_from_rank0():
    return WeftError("rank 1: all_reduce #8 (count 2632, float32, ring): rank 0 aborted the "
                     "connection (it failed or was aborted)", Result.REMOTE)


RANK0_FAILURE = f"{int(Result.TIMEOUT)}|Timed out: rank 0: all_reduce #8: waiting for rank 2"


def test_a_relayed_abort_names_the_silent_rank_and_the_first_cause():
    causes = _Causes(_Store({0: RANK0_FAILURE}), rank=1, size=3, timeout_ms=500)
    message = str(causes.explain(_remote_from_rank0()))
    assert "rank 2 reported no failure within 0.05 s" in message, message
    assert "rank 0 failed with: Timed out: rank 0: all_reduce #8: waiting for rank 2" in message


def test_a_store_gone_mid_search_keeps_what_it_told():
    # Rank 0 failed first and published; its wait ended before rank 1's and it exited, taking
    # the store with it: rank 1 must still name rank 2 and say what rank 0 saw.
    store = _Store({0: RANK0_FAILURE}, answers=3)  # rank 1's set, rank 0's check and get
    causes = _Causes(store, rank=1, size=3, timeout_ms=10000)
    message = str(causes.explain(_remote_from_rank0()))
    assert "rank 2 reported no failure before the group's store" in message, message
    assert "rank 0 failed with: Timed out" in message, message


def test_a_store_gone_before_telling_anything_names_no_one():
    causes = _Causes(_Store({0: RANK0_FAILURE}, answers=1), rank=1, size=3, timeout_ms=10000)
    error = _remote_from_rank0()
    assert str(causes.explain(error)) == str(error)
