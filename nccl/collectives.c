/* collectives.c -- NCCL's collectives and point-to-point calls onto weft's: each checks its
 * communicator, translates the datatype and operation, and describes the call as a weft_call_t
 * that group.c runs now or queues inside a group. Counts, roots and the in-place conventions are
 * NCCL's and weft's alike (weft.h took them from NCCL); ncclBcast is the in-place broadcast. */
#include "nccl/nccl_internal.h"

static ncclResult_t coll(const char *name, weft_coll_t kind, const void *sendbuff, void *recvbuff,
                         size_t count, ncclDataType_t datatype, int has_op, ncclRedOp_t op,
                         int root, ncclComm_t comm, cudaStream_t stream) {
  ncclResult_t res = nccl_check_comm(comm, name);
  if (res != ncclSuccess) return nccl_refused(res);
  weft_call_t call = {.coll = kind,
                      .sendbuf = sendbuff,
                      .recvbuf = recvbuff,
                      .count = count,
                      .root = root,
                      .algo = WEFT_ALGO_AUTO};
  if ((res = nccl_dtype(datatype, &call.dtype, name)) != ncclSuccess) return nccl_refused(res);
  unsigned char factor[8];
  if (has_op && (int)op >= ncclNumOps)
    res = nccl_premul_lookup(comm, op, datatype, &call, factor, name);
  else if (has_op)
    res = nccl_op(op, &call.op, name);
  if (res != ncclSuccess) return nccl_refused(res);
  return nccl_issue(comm, &call, NULL, stream);
}

NCCL_API(ncclResult_t, ncclAllReduce, const void *sendbuff, void *recvbuff, size_t count,
         ncclDataType_t datatype, ncclRedOp_t op, ncclComm_t comm, cudaStream_t stream) {
  return coll("ncclAllReduce", WEFT_COLL_ALL_REDUCE, sendbuff, recvbuff, count, datatype, 1, op, 0,
              comm, stream);
}

NCCL_API(ncclResult_t, ncclBroadcast, const void *sendbuff, void *recvbuff, size_t count,
         ncclDataType_t datatype, int root, ncclComm_t comm, cudaStream_t stream) {
  return coll("ncclBroadcast", WEFT_COLL_BROADCAST, sendbuff, recvbuff, count, datatype, 0, ncclSum,
              root, comm, stream);
}

NCCL_API(ncclResult_t, ncclBcast, void *buff, size_t count, ncclDataType_t datatype, int root,
         ncclComm_t comm, cudaStream_t stream) {
  return coll("ncclBcast", WEFT_COLL_BROADCAST, buff, buff, count, datatype, 0, ncclSum, root, comm,
              stream);
}

NCCL_API(ncclResult_t, ncclReduce, const void *sendbuff, void *recvbuff, size_t count,
         ncclDataType_t datatype, ncclRedOp_t op, int root, ncclComm_t comm, cudaStream_t stream) {
  return coll("ncclReduce", WEFT_COLL_REDUCE, sendbuff, recvbuff, count, datatype, 1, op, root,
              comm, stream);
}

NCCL_API(ncclResult_t, ncclAllGather, const void *sendbuff, void *recvbuff, size_t sendcount,
         ncclDataType_t datatype, ncclComm_t comm, cudaStream_t stream) {
  return coll("ncclAllGather", WEFT_COLL_ALL_GATHER, sendbuff, recvbuff, sendcount, datatype, 0,
              ncclSum, 0, comm, stream);
}

NCCL_API(ncclResult_t, ncclReduceScatter, const void *sendbuff, void *recvbuff, size_t recvcount,
         ncclDataType_t datatype, ncclRedOp_t op, ncclComm_t comm, cudaStream_t stream) {
  return coll("ncclReduceScatter", WEFT_COLL_REDUCE_SCATTER, sendbuff, recvbuff, recvcount,
              datatype, 1, op, 0, comm, stream);
}

NCCL_API(ncclResult_t, ncclAlltoAll, const void *sendbuff, void *recvbuff, size_t count,
         ncclDataType_t datatype, ncclComm_t comm, cudaStream_t stream) {
  return coll("ncclAlltoAll", WEFT_COLL_ALL_TO_ALL, sendbuff, recvbuff, count, datatype, 0, ncclSum,
              0, comm, stream);
}

/* count: the elements each rank sends (recvbuff on the root holds nranks * count). */
NCCL_API(ncclResult_t, ncclGather, const void *sendbuff, void *recvbuff, size_t count,
         ncclDataType_t datatype, int root, ncclComm_t comm, cudaStream_t stream) {
  return coll("ncclGather", WEFT_COLL_GATHER, sendbuff, recvbuff, count, datatype, 0, ncclSum, root,
              comm, stream);
}

/* count: the elements each rank receives (sendbuff on the root holds nranks * count). */
NCCL_API(ncclResult_t, ncclScatter, const void *sendbuff, void *recvbuff, size_t count,
         ncclDataType_t datatype, int root, ncclComm_t comm, cudaStream_t stream) {
  return coll("ncclScatter", WEFT_COLL_SCATTER, sendbuff, recvbuff, count, datatype, 0, ncclSum,
              root, comm, stream);
}

static ncclResult_t p2p(const char *name, weft_coll_t kind, void *buf, size_t count,
                        ncclDataType_t datatype, int peer, ncclComm_t comm, cudaStream_t stream) {
  ncclResult_t res = nccl_check_comm(comm, name);
  if (res != ncclSuccess) return nccl_refused(res);
  weft_p2p_op_t op = {.kind = kind, .buf = buf, .count = count, .peer = peer, .tag = 0};
  if ((res = nccl_dtype(datatype, &op.dtype, name)) != ncclSuccess) return nccl_refused(res);
  if (peer < 0 || peer >= comm->nranks)
    return nccl_refused(nccl_fail(ncclInvalidArgument, "%s: peer %d is not a rank of %d", name,
                                  peer, comm->nranks));
  return nccl_issue(comm, NULL, &op, stream);
}

NCCL_API(ncclResult_t, ncclSend, const void *sendbuff, size_t count, ncclDataType_t datatype,
         int peer, ncclComm_t comm, cudaStream_t stream) {
  /* weft_p2p_op_t's buf is read-only for a send. */
  return p2p("ncclSend", WEFT_COLL_SEND, (void *)sendbuff, count, datatype, peer, comm, stream);
}

NCCL_API(ncclResult_t, ncclRecv, void *recvbuff, size_t count, ncclDataType_t datatype, int peer,
         ncclComm_t comm, cudaStream_t stream) {
  return p2p("ncclRecv", WEFT_COLL_RECV, recvbuff, count, datatype, peer, comm, stream);
}
