"""sparse.py -- all_reduce (SUM) of torch.sparse_coo tensors: what every rank sends and how the
result is put together, for ProcessGroupWeft.allreduce.

torch has no sparse reduction a backend could run element-wise: ranks hold different numbers of
non-zeros at different indices. So, as gloo does, every rank gathers every rank's non-zeros and
sums them itself:

  1. each rank coalesces its input (duplicates summed: fewer non-zeros to send) and all ranks
     all_gather a fixed-size record of it (nnz, sparse_dim, dense_dim, dtype, shape), so that
     each knows what every other will send, and all refuse alike a mismatch of shape or dtype;
  2. one collective carries every rank's block: its indices (sparse_dim x nnz int64) then its
     values (nnz x the dense shape), packed as bytes, each block padded to 8 bytes so that the next
     block's indices stay aligned;
  3. each rank lays the blocks end to end as one uncoalesced tensor and coalesces it, which sums
     the entries of equal index; the input takes the result in place (Tensor.copy_, as gloo's).

Which collective in step 2, chosen from the records (so every rank chooses alike): an all_gather
of the blocks padded to the largest one, unless the padding would add more than PAD_LIMIT_BYTES
in all (size x the largest block - the blocks' sum), then an all_to_allv in which every rank sends
its block as it is to every rank. The all_to_allv moves each block's exact bytes, which is what
matters when one rank holds far more non-zeros than the others (the gradient of a table most of
whose hot rows one rank's batch touched): results/2026-11-27-sparse-allreduce/ measured the
padded all_gather 1.1-1.5x slower with 10000 rows on one rank and 100 on the others. For small,
near-even blocks the two measured alike on loopback; the all_gather is kept there for its
message count (weft's all_to_allv sends a count token to each peer ahead of each part). Indices
and values go as one buffer of bytes, so step 2 is one collective, not two (gloo runs an
allgatherv for each). Step 1 runs before the call returns, even with async_op=True (each rank
needs the records to size its receive); steps 2 and 3 as the call asks.
"""
import hashlib

import torch

from . import tensors as tz

# The value dtypes torch can coalesce (and so sum) as sparse tensors, on 1.13 and 2.x: torch 2.x
# has no coalesce for uint32, uint64 or the fp8 types. The position is the dtype's code in the
# gathered record.
SUMMABLE = (torch.int8, torch.uint8, torch.int32, torch.int64, torch.float16, torch.bfloat16,
            torch.float32, torch.float64)

# The gathered record, int64s: nnz, sparse_dim, dense_dim, dtype code, ndim, a digest of the whole
# shape (what is compared), then the first _SIZES sizes (for the message when shapes differ).
_NNZ, _SPARSE, _DENSE, _DTYPE, _NDIM, _DIGEST, _FIRST = range(7)
_SIZES = 9
RECORD = _FIRST + _SIZES
# Step 2 pads the blocks for an all_gather while that adds at most this many bytes in all; else
# all_to_allv. -1: always all_to_allv. Every rank must use the same value (the tests set it).
PAD_LIMIT_BYTES = 256 * 1024
_ALIGN = 8  # bytes: an int64 index block must start at a multiple of its element size
# torch 2.x warns on a sparse_coo_tensor() that does not say whether to check its indices; they
# come from other ranks' coalesced tensors, so no check (as gloo's C++). torch 1.13 has no such
# argument, and no warning.
_UNCHECKED = {"check_invariants": False} if int(torch.__version__.split(".")[0]) >= 2 else {}


def check_op(reduce_op, what):
    """Only SUM has a meaning for sparse tensors here (torch coalesces by summing); every other
    op is refused before anything is sent, on every rank alike."""
    if reduce_op != torch.distributed.ReduceOp.SUM:
        name = getattr(reduce_op, "op", reduce_op)
        raise ValueError(f"weft: {what}: reduce op {name} is not supported for sparse tensors "
                         f"(torch.sparse_coo); only ReduceOp.SUM is, as with gloo")


class Plan:
    """One rank's part of a sparse all_reduce of tensor t over `size` ranks: the record to gather
    (record), then, once agree() has read every rank's, step 2's buffers (issue() runs it), and
    finish(), which writes the sum into t."""

    def __init__(self, t, rank, size, what):
        self.t, self.rank, self.size, self.what = t, rank, size, what
        if t.device.type not in ("cpu", "cuda"):
            raise TypeError(f"weft: {what}: the weft backend takes CPU and CUDA tensors, got one "
                            f"on {t.device}")
        self.records = torch.empty(size * RECORD, dtype=torch.int64)
        if t.dtype not in SUMMABLE:
            # Refused once the records are gathered (agree), so that the other ranks refuse
            # too instead of waiting for this one's non-zeros until the timeout.
            self.record = torch.zeros(RECORD, dtype=torch.int64)
            self.record[_DTYPE] = -1
            return
        with torch.no_grad():
            # On the host: the exchange and the sum run there (gloo does the same for CUDA).
            local = t.detach().coalesce().cpu()
        self.sparse_dim, self.dense_dim = local.sparse_dim(), local.dense_dim()
        self.shape = tuple(local.shape)
        self.indices = local.indices()
        self.values = local.values()
        self.dense_shape = self.shape[self.sparse_dim:]
        # Bytes of one non-zero: its sparse_dim indices, then its dense block of values.
        self.value_bytes = _numel(self.dense_shape) * self.values.element_size()
        self.entry_bytes = 8 * self.sparse_dim + self.value_bytes
        # One tensor made from a list: a torch call per field would cost more than the gather.
        record = [local._nnz(), self.sparse_dim, self.dense_dim, SUMMABLE.index(t.dtype),
                  len(self.shape), _digest(self.shape)] + list(self.shape[:_SIZES])
        self.record = torch.tensor(record + [0] * (RECORD - len(record)), dtype=torch.int64)

    def agree(self):
        """Reads the gathered records: raises if a rank's tensor differs from this one in shape,
        layout or dtype (every rank reads the same records, so all raise alike); else chooses
        step 2's collective (padded) and prepares its buffers (sendbuf, recvbuf) and, in bytes,
        where each rank's block lands (recv_displs) and, for all_to_allv, its counts."""
        rows = self.records.view(self.size, RECORD).tolist()
        mine = rows[self.rank]
        unsummable = [r for r in range(self.size) if rows[r][_DTYPE] < 0]
        if unsummable:
            names = ", ".join(str(d).replace("torch.", "") for d in SUMMABLE)
            ranks = ", ".join(f"rank {r}" for r in unsummable)
            mine_note = f" ({self.t.dtype} here)" if self.rank in unsummable else ""
            raise TypeError(f"weft: {self.what}: torch cannot sum sparse tensors of the dtype "
                            f"{ranks} passed{mine_note}; sparse dtypes supported: {names}")
        for r in range(self.size):
            if rows[r][_SPARSE:_FIRST] != mine[_SPARSE:_FIRST]:
                raise ValueError(f"weft: {self.what}: the sparse tensors differ across ranks: "
                                 f"rank {r} has {_describe(rows[r])}, rank {self.rank} has "
                                 f"{_describe(mine)}; all must have the same shape, sparse_dim "
                                 f"and dtype")
        self.nnz = [row[_NNZ] for row in rows]
        self.recv_counts = [_block_bytes(n, self.entry_bytes) for n in self.nnz]
        self.recv_displs = _prefix_sums(self.recv_counts)
        mine_bytes = self.recv_counts[self.rank]
        largest = max(self.recv_counts)
        self.padded = self.size * largest - sum(self.recv_counts) <= PAD_LIMIT_BYTES
        if self.padded:  # each block at a multiple of the largest
            self.recv_displs = [r * largest for r in range(self.size)]
            send_bytes, recv_bytes = largest, self.size * largest
        else:
            self.send_counts = [mine_bytes] * self.size
            self.send_displs = [0] * self.size  # every rank gets the same block
            send_bytes, recv_bytes = mine_bytes, sum(self.recv_counts)
        # At least one byte each: an empty tensor's data pointer may be NULL.
        self.sendbuf = torch.zeros(max(send_bytes, 1), dtype=torch.uint8)
        self.recvbuf = torch.empty(max(recv_bytes, 1), dtype=torch.uint8)
        nnz = self.nnz[self.rank]
        index_bytes = 8 * self.sparse_dim * nnz
        if nnz:
            self.sendbuf[:index_bytes].view(torch.int64).copy_(self.indices.reshape(-1))
            self.sendbuf[index_bytes:index_bytes + nnz * self.value_bytes].view(
                self.t.dtype).copy_(self.values.reshape(-1))

    def issue(self, calls, async_op):
        """Step 2 on `calls` (the communicator as process_group._Calls calls it): what it
        returns."""
        send = tz.as_buffer(self.sendbuf, self.what)
        recv = tz.as_buffer(self.recvbuf, self.what)
        if self.padded:
            return calls.all_gather(send, recv, async_op=async_op)
        return calls.all_to_allv(send, self.send_counts, recv, self.recv_counts,
                                 send_displs=self.send_displs, recv_displs=self.recv_displs,
                                 async_op=async_op)

    def finish(self):
        """Sums every rank's non-zeros and writes the coalesced result into the input, in place
        (its indices and values are replaced, its nnz may change)."""
        indices, values = [], []
        for nnz, at in zip(self.nnz, self.recv_displs):
            index_bytes = 8 * self.sparse_dim * nnz
            block = self.recvbuf[at:at + index_bytes + nnz * self.value_bytes]
            indices.append(block[:index_bytes].view(torch.int64).view(self.sparse_dim, nnz))
            values.append(block[index_bytes:].view(self.t.dtype).view(nnz, *self.dense_shape))
        with torch.no_grad():
            total = torch.sparse_coo_tensor(torch.cat(indices, 1), torch.cat(values), self.shape,
                                            **_UNCHECKED)
            total = total.coalesce().to(self.t.device)
            self.t.copy_(total)


def _block_bytes(nnz, entry_bytes):
    n = nnz * entry_bytes
    return (n + _ALIGN - 1) // _ALIGN * _ALIGN


def _prefix_sums(counts):
    out, total = [], 0
    for c in counts:
        out.append(total)
        total += c
    return out


def _numel(shape):
    n = 1
    for s in shape:
        n *= s
    return n


def _digest(shape):
    """A 63-bit digest of the shape, the same in every process (Python's hash() is salted)."""
    text = ",".join(str(int(s)) for s in shape).encode()
    return int.from_bytes(hashlib.blake2b(text, digest_size=8).digest(), "little") >> 1


def _describe(row):
    ndim = row[_NDIM]
    sizes = [str(s) for s in row[_FIRST:_FIRST + min(ndim, _SIZES)]]
    if ndim > _SIZES:
        sizes.append("...")
    return (f"shape ({', '.join(sizes)}) with sparse_dim {int(row[_SPARSE])}, dtype "
            f"{str(SUMMABLE[row[_DTYPE]]).replace('torch.', '')}")
