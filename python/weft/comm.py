"""comm.py -- Comm: a weft communicator and its collectives, over the C API through ctypes.

Buffers are numpy arrays, objects with the buffer protocol, or weft.Buffer. A call that gets only
`sendbuf` works in place. Every collective takes `async_op=True` to return a Request instead of
waiting, and `algo=` to force an algorithm for that call (as weft_call_t.algo does).
"""
import ctypes
import threading

from . import _lib
from .buffers import as_buffer
from .dtypes import Coll, Op, to_algo, to_op
from .errors import WeftError, check
from .request import Request


class P2POp:
    """One send or receive of Comm.p2p_group: kind "send" or "recv", the buffer (as the
    collectives take it; `dtype=` overrides its element type), the peer rank, and a tag that a
    send shares with the receive it is meant for."""

    __slots__ = ("kind", "buf", "peer", "tag", "dtype")

    def __init__(self, kind, buf, peer, tag=0, dtype=None):
        kind = {"send": Coll.SEND, "recv": Coll.RECV}.get(kind, kind)
        if kind not in (Coll.SEND, Coll.RECV):
            raise ValueError(f"weft: P2POp: kind must be 'send' or 'recv', got {kind!r}")
        self.kind, self.buf, self.peer, self.tag, self.dtype = kind, buf, int(peer), int(tag), dtype

    def __repr__(self):
        return f"P2POp({self.kind.name.lower()!r}, peer={self.peer}, tag={self.tag})"


class Comm:
    """A communicator. Comm() joins the job the launcher's environment describes
    (weft_comm_init_env: RANK, WORLD_SIZE, MASTER_ADDR, MASTER_PORT, ...);
    Comm(rank=, size=, master_addr=, master_port=) or Comm(url="tcp://host:port", rank=, size=)
    name it explicitly. Use it as a context manager, or call destroy() (abort() on error paths)."""

    def __init__(self, rank=None, size=None, master_addr=None, master_port=None, url=None,
                 _handle=None):
        self._lib = _lib.load()
        self._pending = []  # Requests issued and not yet seen complete: they own live buffers
        self._lock = threading.RLock()
        if _handle is not None:
            self._handle = _handle
        else:
            self._handle = self._init(rank, size, master_addr, master_port, url)
        self._rank = self._query(self._lib.weft_comm_rank)
        self._size = self._query(self._lib.weft_comm_size)

    def _init(self, rank, size, master_addr, master_port, url):
        lib = self._lib
        handle = ctypes.c_void_p()
        explicit = (rank, size, master_addr, master_port, url)
        if all(v is None for v in explicit):
            check(lib, lib.weft_comm_init_env(ctypes.byref(handle)), "weft_comm_init_env")
        elif url is not None:
            if master_addr is not None or master_port is not None:
                raise ValueError("weft: give either url or master_addr/master_port, not both")
            _need(rank=rank, size=size)
            check(lib, lib.weft_comm_init_url(ctypes.byref(handle), url.encode(), int(size),
                                              int(rank)), "weft_comm_init_url")
        else:
            _need(rank=rank, size=size, master_addr=master_addr, master_port=master_port)
            check(lib, lib.weft_comm_init(ctypes.byref(handle), int(size), int(rank),
                                          str(master_addr).encode(), int(master_port)),
                  "weft_comm_init")
        return handle

    # ---- identity ----------------------------------------------------------------------------

    @property
    def rank(self):
        return self._rank

    @property
    def size(self):
        return self._size

    @property
    def local_rank(self):
        return self._query(self._lib.weft_comm_local_rank)

    @property
    def local_size(self):
        return self._query(self._lib.weft_comm_local_size)

    @property
    def closed(self):
        return self._handle is None

    def _query(self, fn):
        out = ctypes.c_int()
        check(self._lib, fn(self._live(), ctypes.byref(out)), fn.__name__)
        return out.value

    def _live(self):
        if self._handle is None:
            raise WeftError("weft: the communicator was destroyed")
        return self._handle

    # ---- collectives -------------------------------------------------------------------------

    def all_reduce(self, sendbuf, recvbuf=None, op=Op.SUM, *, dtype=None, algo=None,
                   async_op=False, stream=None):
        """recvbuf[i] = op over all ranks of sendbuf[i]; in place without recvbuf."""
        send, recv = self._pair(sendbuf, recvbuf, dtype)
        _same_count(send, recv, "all_reduce")
        return self._call(Coll.ALL_REDUCE, send, recv, send.count, op, 0, algo, async_op,
                          _out(sendbuf, recvbuf), stream=stream)

    def broadcast(self, sendbuf, recvbuf=None, root=0, *, dtype=None, algo=None, async_op=False,
                  stream=None):
        """recvbuf = root's sendbuf on every rank; in place without recvbuf."""
        send, recv = self._pair(sendbuf, recvbuf, dtype)
        _same_count(send, recv, "broadcast")
        return self._call(Coll.BROADCAST, send, recv, send.count, Op.SUM, root, algo, async_op,
                          _out(sendbuf, recvbuf), stream=stream)

    def reduce(self, sendbuf, recvbuf=None, op=Op.SUM, root=0, *, dtype=None, algo=None,
               async_op=False, stream=None):
        """recvbuf on the root = op over all ranks of sendbuf; in place without recvbuf."""
        send, recv = self._pair(sendbuf, recvbuf, dtype)
        _same_count(send, recv, "reduce")
        return self._call(Coll.REDUCE, send, recv, send.count, op, root, algo, async_op,
                          _out(sendbuf, recvbuf), stream=stream)

    def all_gather(self, sendbuf, recvbuf, *, dtype=None, algo=None, async_op=False, stream=None):
        """recvbuf[r * n + i] = rank r's sendbuf[i] (n = len(sendbuf), recvbuf holds size * n)."""
        send = as_buffer(sendbuf, dtype, what="sendbuf")
        recv = as_buffer(recvbuf, dtype or send.dtype, writable=True, what="recvbuf")
        if recv.count != send.count * self._size:
            raise ValueError(f"weft: all_gather: recvbuf holds {recv.count} elements, needs "
                             f"{self._size} x {send.count}")
        return self._call(Coll.ALL_GATHER, send, recv, send.count, Op.SUM, 0, algo, async_op,
                          recvbuf, stream=stream)

    def reduce_scatter(self, sendbuf, recvbuf, op=Op.SUM, *, dtype=None, algo=None,
                       async_op=False, stream=None):
        """recvbuf[i] = op over all ranks of sendbuf[rank * n + i] (n = len(recvbuf))."""
        send = as_buffer(sendbuf, dtype, what="sendbuf")
        recv = as_buffer(recvbuf, dtype or send.dtype, writable=True, what="recvbuf")
        if send.count != recv.count * self._size:
            raise ValueError(f"weft: reduce_scatter: sendbuf holds {send.count} elements, needs "
                             f"{self._size} x {recv.count}")
        return self._call(Coll.REDUCE_SCATTER, send, recv, recv.count, op, 0, algo, async_op,
                          recvbuf, stream=stream)

    def gather(self, sendbuf, recvbuf=None, root=0, *, dtype=None, algo=None, async_op=False,
               stream=None):
        """On the root, recvbuf[r * n + i] = rank r's sendbuf[i] (n = len(sendbuf), recvbuf holds
        size * n); the other ranks may leave recvbuf out. In place on the root: sendbuf is
        recvbuf[root * n:(root + 1) * n]. Returns recvbuf."""
        send = as_buffer(sendbuf, dtype, what="sendbuf")
        recv = None
        if self._rank == root or recvbuf is not None:
            if recvbuf is None:
                raise ValueError("weft: gather: the root needs a recvbuf")
            recv = as_buffer(recvbuf, dtype or send.dtype, writable=True, what="recvbuf")
            if self._rank == root and recv.count != send.count * self._size:
                raise ValueError(f"weft: gather: recvbuf holds {recv.count} elements, needs "
                                 f"{self._size} x {send.count}")
        return self._call(Coll.GATHER, send, recv, send.count, Op.SUM, root, algo, async_op,
                          recvbuf, stream=stream)

    def scatter(self, sendbuf, recvbuf, root=0, *, dtype=None, algo=None, async_op=False,
                stream=None):
        """recvbuf[i] = the root's sendbuf[rank * n + i] (n = len(recvbuf)); the root's sendbuf
        holds size * n, the other ranks may pass None. In place on the root: recvbuf is
        sendbuf[root * n:(root + 1) * n]. Returns recvbuf."""
        recv = as_buffer(recvbuf, dtype, writable=True, what="recvbuf")
        send = None
        if self._rank == root or sendbuf is not None:
            if sendbuf is None:
                raise ValueError("weft: scatter: the root needs a sendbuf")
            send = as_buffer(sendbuf, dtype or recv.dtype, what="sendbuf")
            if self._rank == root and send.count != recv.count * self._size:
                raise ValueError(f"weft: scatter: sendbuf holds {send.count} elements, needs "
                                 f"{self._size} x {recv.count}")
        return self._call(Coll.SCATTER, send, recv, recv.count, Op.SUM, root, algo, async_op,
                          recvbuf, stream=stream)

    def all_to_all(self, sendbuf, recvbuf, *, dtype=None, algo=None, async_op=False,
                   stream=None):
        """Block j of sendbuf goes to rank j; block i of recvbuf comes from rank i. Both hold
        size * n elements (n per peer) and must be distinct. Returns recvbuf."""
        send = as_buffer(sendbuf, dtype, what="sendbuf")
        recv = as_buffer(recvbuf, dtype or send.dtype, writable=True, what="recvbuf")
        if send.count % self._size or recv.count != send.count:
            raise ValueError(f"weft: all_to_all: sendbuf and recvbuf hold {send.count} and "
                             f"{recv.count} elements, each needs {self._size} x n")
        return self._call(Coll.ALL_TO_ALL, send, recv, send.count // self._size, Op.SUM, 0, algo,
                          async_op, recvbuf, stream=stream)

    def all_to_allv(self, sendbuf, send_counts, recvbuf, recv_counts, *, send_displs=None,
                    recv_displs=None, dtype=None, async_op=False, stream=None):
        """send_counts[j] elements from sendbuf[send_displs[j]:] go to rank j; recv_counts[i]
        elements from rank i land at recvbuf[recv_displs[i]:]. Counts and displacements are in
        elements, one per rank; displacements default to the counts' prefix sums. Rank i's
        send_counts[j] must equal rank j's recv_counts[i] (else both fail). Returns recvbuf."""
        send = as_buffer(sendbuf, dtype, what="sendbuf")
        recv = as_buffer(recvbuf, dtype or send.dtype, writable=True, what="recvbuf")
        arrays = []
        for name, values, of in (("send_counts", send_counts, None),
                                 ("send_displs", send_displs, send_counts),
                                 ("recv_counts", recv_counts, None),
                                 ("recv_displs", recv_displs, recv_counts)):
            if values is None:  # prefix sums of the counts
                values, total = [], 0
                for c in of:
                    values.append(total)
                    total += int(c)
            values = [int(v) for v in values]
            if len(values) != self._size or min(values, default=0) < 0:
                raise ValueError(f"weft: all_to_allv: {name} needs {self._size} values >= 0, got "
                                 f"{values}")
            arrays.append((ctypes.c_size_t * self._size)(*values))
        for (counts, displs, buf, what) in ((arrays[0], arrays[1], send, "sendbuf"),
                                            (arrays[2], arrays[3], recv, "recvbuf")):
            end = max((d + c for c, d in zip(counts, displs) if c), default=0)
            if end > buf.count:
                raise ValueError(f"weft: all_to_allv: {what} holds {buf.count} elements, the "
                                 f"counts and displacements reach {end}")
        extra = dict(zip(("send_counts", "send_displs", "recv_counts", "recv_displs"), arrays))
        return self._call(Coll.ALL_TO_ALLV, send, recv, 0, Op.SUM, 0, None, async_op, recvbuf,
                          extra=extra, stream=stream)

    def barrier(self, *, algo=None, async_op=False, stream=None):
        """Returns once every rank has entered it."""
        return self._call(Coll.BARRIER, None, None, 0, Op.SUM, 0, algo, async_op, None,
                          stream=stream)

    def send(self, buf, peer, *, tag=0, dtype=None, async_op=False, stream=None):
        """Sends buf to `peer`, which receives it with recv() of the same count, dtype and tag."""
        return self.p2p_group([P2POp("send", buf, peer, tag, dtype)], async_op=async_op,
                              stream=stream)

    def recv(self, buf, peer=None, *, tag=0, dtype=None, async_op=False, stream=None):
        """Receives into buf what `peer` sends with this tag; returns buf.

        peer None (or weft.ANY_SOURCE) receives from any source: the first message with this tag
        that any rank sends (include/weft.h: each sender's messages in order, racing senders
        matched first come first, the others left for later receives); returns the rank it came
        from instead. With async_op the Request's `source` tells the rank once it completes (and
        wait() returns buf). Host buffers only, no stream."""
        if peer is not None and int(peer) != _lib.ANY_SOURCE:
            result = self.p2p_group([P2POp("recv", buf, peer, tag, dtype)], async_op=async_op,
                                    stream=stream)
            if async_op:
                result._source = int(peer)
            return result if async_op else buf
        b = as_buffer(buf, dtype, writable=True, what="buf")
        array = (_lib.P2POpT * 1)(_lib.P2POpT(int(Coll.RECV), b.address, b.count, int(b.dtype),
                                              _lib.ANY_SOURCE, int(tag)))
        source = ctypes.c_int(-1)
        extra = {"ops": array, "nops": 1, "keep": [b, source],
                 "source": ctypes.pointer(source)}
        result = self._call(Coll.P2P_GROUP, None, None, 0, Op.SUM, -1, None, async_op, buf,
                            extra=extra, stream=stream, source=source)
        return result if async_op else source.value

    def p2p_group(self, ops, *, async_op=False, stream=None):
        """Runs the P2POps together; they complete together, whatever their order and sizes.
        Between two ranks, sends and receives pair up by tag (in list order among equal tags).
        Returns None (a Request with async_op)."""
        ops = list(ops)
        array = (_lib.P2POpT * max(len(ops), 1))()
        bufs = []
        for i, op in enumerate(ops):
            if not isinstance(op, P2POp):
                raise TypeError(f"weft: p2p_group: op {i} is {type(op).__name__}, not P2POp")
            is_recv = op.kind == Coll.RECV
            b = as_buffer(op.buf, op.dtype, writable=is_recv, what="buf")
            bufs.append(b)
            array[i] = _lib.P2POpT(int(op.kind), b.address, b.count, int(b.dtype), op.peer, op.tag)
        extra = {"ops": array, "nops": len(ops), "keep": bufs}
        return self._call(Coll.P2P_GROUP, None, None, 0, Op.SUM, -1, None, async_op, None,
                          extra=extra, stream=stream)

    def _pair(self, sendbuf, recvbuf, dtype):
        if recvbuf is None:
            buf = as_buffer(sendbuf, dtype, writable=True, what="buffer")
            return buf, buf
        send = as_buffer(sendbuf, dtype, what="sendbuf")
        return send, as_buffer(recvbuf, dtype or send.dtype, writable=True, what="recvbuf")

    def _call(self, coll, send, recv, count, op, root, algo, async_op, result, extra=None,
              stream=None, source=None):
        # stream: a CUDA stream (a cudaStream_t as an int, torch.cuda.current_stream().cuda_stream)
        # for device buffers: the call is enqueued on it and returns at once, as in NCCL, and the
        # stream's later work sees the result. None or 0 (NULL): the call runs before returning.
        if stream is not None and async_op:
            raise ValueError("weft: stream= and async_op=True do not go together: a call on a "
                             "stream is already asynchronous (synchronize the stream to wait)")
        ref = send if send is not None else recv
        dt = ref.dtype if ref is not None else 0
        if send is not None and recv is not None and send.dtype != recv.dtype:
            raise TypeError(f"weft: sendbuf is {send.dtype.name.lower()} but recvbuf is "
                            f"{recv.dtype.name.lower()}")
        call = _lib.CallT(int(coll), send.address if send else None, recv.address if recv else None,
                          count, int(dt), int(to_op(op)), int(root), int(to_algo(algo)))
        # Arrays the call points to (all_to_allv's counts, a group's ops) and their sizes: set
        # here, kept alive with the request ("keep": objects that only need to stay alive).
        for name, value in (extra or {}).items():
            if isinstance(value, int):
                setattr(call, name, value)
            elif name != "keep":
                setattr(call, name, ctypes.cast(value, ctypes.c_void_p))
        what = f"{coll.name.lower()} (count {count})"
        with self._lock:
            handle = self._live()
            self._reap()
            if not async_op:
                check(self._lib, self._lib.weft_call(ctypes.byref(call), handle,
                                                      None if stream is None else int(stream)),
                      what)
                return result
            req = ctypes.c_void_p()
            check(self._lib, self._lib.weft_call_async(ctypes.byref(call), handle,
                                                        ctypes.byref(req)), what)
            request = Request(req, result, (send, recv, extra), what, source)
            self._pending.append(request)
            return request

    def _reap(self):
        # Requests complete in issue order; free those that have, so that a caller who never
        # waits does not pile them up. A request another thread is waiting on is skipped.
        while self._pending:
            try:
                if not self._pending[0].test():
                    break
            except WeftError:
                pass  # the owner sees the error when it waits
            self._pending.pop(0)

    # ---- more communicators and the end ------------------------------------------------------

    def split(self, color, key=0):
        """Ranks with the same color form a new Comm, ordered by key then rank; color None (or
        negative) gives None. Collective over this communicator."""
        color = -1 if color is None or color < 0 else int(color)
        sub = ctypes.c_void_p()
        with self._lock:
            check(self._lib, self._lib.weft_comm_split(self._live(), color, int(key),
                                                       ctypes.byref(sub)), "weft_comm_split")
        return Comm(_handle=sub) if sub.value else None

    def dup(self):
        """A new Comm of the same ranks. Collective over this communicator."""
        sub = ctypes.c_void_p()
        with self._lock:
            check(self._lib, self._lib.weft_comm_dup(self._live(), ctypes.byref(sub)), "weft_comm_dup")
        return Comm(_handle=sub)

    def shrink(self, exclude=()):
        """A new Comm of the ranks still alive, minus `exclude` (ranks of this Comm), in their old
        order: weft_comm_shrink. Collective over the ranks that stay (those in `exclude` do not
        call it); works after a failure (WeftError COMM_FAILED, a dead peer) without the master.
        This Comm stays: abort() it once done with it."""
        ranks = [int(r) for r in exclude]
        array = (ctypes.c_int * max(len(ranks), 1))(*ranks)
        sub = ctypes.c_void_p()
        with self._lock:
            check(self._lib, self._lib.weft_comm_shrink(self._live(), array, len(ranks),
                                                        ctypes.byref(sub)), "weft_comm_shrink")
        return Comm(_handle=sub)

    def failed_ranks(self):
        """The ranks of this Comm that failed, as the ranks still alive agree on them
        (weft_comm_get_failed_ranks): collective over those ranks, each gets the same list."""
        room = self._size
        ranks = (ctypes.c_int * max(room, 1))()
        n = ctypes.c_int()
        with self._lock:
            check(self._lib, self._lib.weft_comm_get_failed_ranks(self._live(), ranks, room,
                                                                  ctypes.byref(n)),
                  "weft_comm_get_failed_ranks")
        return list(ranks[:n.value])

    def destroy(self):
        """Runs what is queued, closes connections in order and frees the communicator."""
        self._end(self._lib.weft_comm_destroy)

    def abort(self):
        """Frees the communicator without further communication; peers blocked on it fail
        promptly. Requests not yet started fail with ABORTED. Safe from any thread: a call
        blocked on this communicator in another thread raises WeftError (ABORTED) at once."""
        handle = self._handle
        if handle is None:
            return
        # Not under the lock, which a blocked call holds: weft_comm_abort is safe from any thread
        # and makes that call return; the rest (requests, the handle) then waits for the lock.
        res = self._lib.weft_comm_abort(handle)
        with self._lock:
            if self._handle is None:
                return  # closed meanwhile by another thread, whose outcome stands
            self._handle = None
            self._drain_pending()
        check(self._lib, res, "weft_comm_abort")

    def _end(self, fn):
        with self._lock:
            if self._handle is None:
                return
            handle, self._handle = self._handle, None
            res = fn(handle)
            self._drain_pending()
            check(self._lib, res, fn.__name__)

    def _drain_pending(self):
        # Every request stays valid after destroy/abort and must be completed to be freed.
        pending, self._pending = self._pending, []
        for request in pending:
            try:
                request.wait()
            except WeftError:
                pass

    def __enter__(self):
        return self

    def __exit__(self, exc_type, exc, tb):
        if exc_type is None:
            self.destroy()
        else:
            self.abort()  # the others must not wait for a rank that gave up
        return False

    def __repr__(self):
        if self._handle is None:
            return "<weft.Comm destroyed>"
        return f"<weft.Comm rank {self._rank} of {self._size}>"


def _need(**kw):
    missing = [k for k, v in kw.items() if v is None]
    if missing:
        raise ValueError("weft: Comm(...) needs " + ", ".join(missing)
                         + " (or no arguments at all, to read the launcher's environment)")


def _same_count(send, recv, what):
    if send is not recv and send.count != recv.count:
        raise ValueError(f"weft: {what}: sendbuf holds {send.count} elements, recvbuf {recv.count}")


def _out(sendbuf, recvbuf):
    return sendbuf if recvbuf is None else recvbuf
