"""weft.torch's rendezvous port: rank 0 publishes a port it binds only when it joins, so the port
comes from outside the range the kernel hands out by itself, where weft's own transport
listeners, earlier groups' included, and every outgoing connection take theirs."""
import socket

import pytest

pytest.importorskip("torch")

from weft.torch import bootstrap  # noqa: E402


def test_port_is_outside_the_kernels_own_range_and_free():
    lo, hi = bootstrap.ephemeral_range()
    if max(lo - 1 - 20000, 65535 - hi) < 1000:
        pytest.skip(f"ip_local_port_range {lo}-{hi} leaves no room outside it")
    for _ in range(20):
        port = bootstrap.free_port()
        assert not lo <= port <= hi, (port, lo, hi)
        assert 20000 <= port <= 65535, port
        with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
            s.bind(("0.0.0.0", port))  # free on every address, as weft's rendezvous binds it


def test_a_taken_port_is_not_offered():
    with socket.socket(socket.AF_INET6, socket.SOCK_STREAM) as held:
        held.bind(("::", 0))
        held.listen()
        taken = held.getsockname()[1]
        assert bootstrap._bind(taken) == -1
        assert bootstrap._bind(0) not in (-1, taken)
