"""bootstrap.py -- a weft communicator for a torch process group, found through the c10d store.

Rank 0 picks a free port, publishes tcp://host:port in the store the backend creator received
(already prefixed per group by torch), and every rank joins that rendezvous with weft_comm_init_url.
"""
import os
import random
import socket

from ..comm import Comm

URL_KEY = "weft/init_url"


def connect(store, rank, size):
    if rank == 0:
        url = f"tcp://{_bracket(advertised_host(store))}:{free_port()}"
        store.set(URL_KEY, url)
    else:
        # Blocks until rank 0 publishes it, at most the store's timeout (init_process_group's).
        url = store.get(URL_KEY).decode()
    return Comm(url=url, rank=rank, size=size)


def advertised_host(store):
    """The address other ranks reach this (rank 0's) host at: WEFT_MASTER_ADDR if set, else the
    host the TCPStore serves on (rank 0 serves it: MASTER_ADDR for env://, the host of
    tcp://host:port), else MASTER_ADDR, else this host's name."""
    explicit = os.environ.get("WEFT_MASTER_ADDR")
    if explicit:
        return explicit
    s = store
    for _ in range(16):  # PrefixStore over PrefixStore over ... over TCPStore
        host = getattr(s, "host", None)
        if isinstance(host, str) and host and host not in ("0.0.0.0", "::"):
            return host
        s = getattr(s, "underlying_store", None)
        if s is None:
            break
    return os.environ.get("MASTER_ADDR") or socket.gethostname()


def free_port():
    """A port free on every address now, drawn outside the range the kernel hands out by itself
    (ip_local_port_range: outgoing connections, and every bind to port 0, weft's own transport
    listeners of earlier groups included), as ncclGetUniqueId's is. Rank 0 binds it only when it
    joins: another process could take it first, then weft fails with "address already in use"
    rather than hanging; outside that range few do. Random tries in 20000 up to the range's start
    (or above its end where that leaves more), else any port the kernel gives."""
    lo, hi = ephemeral_range()
    first, last = 20000, lo - 1
    if 65535 - hi > last - first:
        first, last = hi + 1, 65535
    draw = random.SystemRandom()
    for _ in range(64 if last - first >= 1000 else 0):
        port = draw.randint(first, last)
        if _bind(port) == port:
            return port
    return _bind(0)


def ephemeral_range():
    """The kernel's range for ports it picks itself (Linux's default if it cannot be read)."""
    try:
        with open("/proc/sys/net/ipv4/ip_local_port_range") as f:
            lo, hi = (int(x) for x in f.read().split())
        if 0 < lo <= hi <= 65535:
            return lo, hi
    except (OSError, ValueError):
        pass
    return 32768, 60999


def _bind(port):
    # weft's rendezvous listens on every address ([::] dual-stack): the port must be free there.
    # Returns the port bound (the kernel's pick for 0), or -1 if it is taken.
    try:
        s = socket.socket(socket.AF_INET6, socket.SOCK_STREAM)
        addr = ("::", port)
    except OSError:
        s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        addr = ("0.0.0.0", port)
    with s:
        try:
            s.bind(addr)
        except OSError:
            return -1
        return s.getsockname()[1]


def _bracket(host):
    return f"[{host}]" if ":" in host and not host.startswith("[") else host
