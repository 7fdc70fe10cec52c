"""The process group's batching of sends and receives (weft/torch/p2p.py) by lane: a device
stream's ops go out as one group enqueued inside that lane, whoever issues it, and a batch never
mixes lanes. The suite has no GPU, so stand-ins play the lanes (process_group._StreamLane on a
device) and the communicator; the host path is tested for real in test_torch_p2p.py."""
import contextlib
import threading
import time

import pytest

pytest.importorskip("torch")

from weft.torch import p2p  # noqa: E402
from weft.torch.completion import NO_REQUEST, Completion  # noqa: E402

_current = threading.local()


class Lane:
    """A stand-in for a device and stream: entered() makes it current on the calling thread."""

    def __init__(self, name):
        self.name = name

    def __eq__(self, other):
        return isinstance(other, Lane) and other.name == self.name

    @contextlib.contextmanager
    def entered(self):
        before = getattr(_current, "lane", None)
        _current.lane = self.name
        try:
            yield
        finally:
            _current.lane = before


class Request:
    def __init__(self, what):
        self.what = what

    def wait(self):
        return None


class Comm:
    rank, size = 0, 4


class Calls:
    """Records each group: its ops (kind, peer, tag), whether async, the lane current then and
    the issuing thread. As process_group._Calls does, a group issued inside a lane (device ops)
    is enqueued, not returned as a request."""

    def __init__(self):
        self.groups = []

    def p2p_group(self, ops, async_op=False):
        lane = getattr(_current, "lane", None)
        self.groups.append(([(op.kind.name.lower(), op.peer, op.tag) for op in ops], async_op, lane,
                            threading.current_thread()))
        return Request("p2p_group") if async_op else NO_REQUEST


@pytest.fixture
def batch():
    calls = Calls()
    completion = Completion("test-completion")
    b = p2p.Batch(Comm(), calls, completion, "test")
    yield b, calls
    b.close(False)
    completion.stop(5)


def lane_of_finish(log):
    return lambda: log.append(getattr(_current, "lane", None))


def test_one_streams_ops_go_out_as_one_group_inside_it(batch):
    b, calls = batch
    a = Lane("a")
    finished = []
    w1 = b.add("send", None, 1, 0, None, ["s"], a)
    w2 = b.add("recv", None, 3, 0, lane_of_finish(finished), ["r"], a)
    assert calls.groups == []  # held back
    assert w2.wait()
    assert len(calls.groups) == 1, calls.groups
    ops, async_op, lane, _ = calls.groups[0]
    assert ops == [("send", 1, 0), ("recv", 3, 0)]
    assert async_op is False and lane == "a"
    assert finished == ["a"], "the copy out of a staging tensor ran off the stream"
    assert w1.is_completed() and w1.get_future().wait() == ["s"]


def test_a_change_of_lane_issues_the_batch_first(batch):
    b, calls = batch
    a, other = Lane("a"), Lane("b")
    works = [b.add("send", None, 1, 0, None, [], None),
             b.add("send", None, 1, 0, None, [], a),
             b.add("recv", None, 2, 0, None, [], a),
             b.add("send", None, 2, 0, None, [], other),
             b.add("recv", None, 3, 0, None, [], None)]
    b.flush()
    got = [(ops, async_op, lane) for ops, async_op, lane, _ in calls.groups]
    assert got == [([("send", 1, 0)], True, None),
                   ([("send", 1, 0), ("recv", 2, 0)], False, "a"),
                   ([("send", 2, 0)], False, "b"),
                   ([("recv", 3, 0)], True, None)], got
    for w in works:
        assert w.wait()


def test_the_timer_issues_a_device_batch_inside_its_lane(batch):
    b, calls = batch
    w = b.add("send", None, 1, 5, None, [], Lane("a"))
    deadline = time.monotonic() + 10
    while not calls.groups:
        assert time.monotonic() < deadline, "the timer never issued the batch"
        time.sleep(0.005)
    ops, async_op, lane, thread = calls.groups[0]
    assert ops == [("send", 1, 5)] and lane == "a" and async_op is False
    assert thread is not threading.current_thread()
    assert w.wait()
