"""bootstrap.py -- a weft communicator for a torch process group, found through the c10d store.

Rank 0 picks a free port, publishes tcp://host:port in the store the backend creator received
(already prefixed per group by torch), and every rank joins that rendezvous with weft_comm_init_url.
"""
import os
import socket

from ..comm import Comm

URL_KEY = "weft/init_url"


def connect(store, rank, size):
    if rank == 0:
        url = f"tcp://{_bracket(advertised_host(store))}:{_free_port()}"
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


def _free_port():
    # weft's rendezvous listens on every address ([::] dual-stack); ask the kernel for a port
    # free there. Another process could take it before weft binds it; weft then fails with
    # "address already in use" rather than hanging.
    try:
        s = socket.socket(socket.AF_INET6, socket.SOCK_STREAM)
        addr = ("::", 0)
    except OSError:
        s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        addr = ("0.0.0.0", 0)
    with s:
        s.bind(addr)
        return s.getsockname()[1]


def _bracket(host):
    return f"[{host}]" if ":" in host and not host.startswith("[") else host
