/* redop.c -- ncclRedOpCreatePreMulSum and ncclRedOpDestroy: per-communicator operators that
 * multiply each rank's input by its own factor before the sum, on weft's WEFT_PREMUL_SUM.
 *
 * An operator is op ncclNumOps + its slot in the communicator's table, as NCCL numbers them; a
 * destroyed slot is reused by the next creation. A host factor (ncclScalarHostImmediate) is read
 * at creation, so the caller's variable may go at once; a device factor (ncclScalarDevice) is
 * read by each call when it runs, in stream order, and must stay until the calls that use it
 * have run. NCCL lets an operator be destroyed as soon as the last call given it has returned:
 * every call copies what it needs (the host value or the device pointer) when issued. */
#include <stdlib.h>
#include <string.h>

#include "nccl/nccl_internal.h"

#define MAX_OPERATORS 1024 /* per communicator: far beyond any real use, and bounds the table */

NCCL_API(ncclResult_t, ncclRedOpCreatePreMulSum, ncclRedOp_t *op, void *scalar,
         ncclDataType_t datatype, ncclScalarResidence_t residence, ncclComm_t comm) {
  const char *name = "ncclRedOpCreatePreMulSum";
  ncclResult_t res = nccl_check_comm(comm, name);
  if (res != ncclSuccess) return res;
  weft_dtype_t dtype;
  if ((res = nccl_dtype(datatype, &dtype, name)) != ncclSuccess) return res;
  if (!op) return nccl_fail(ncclInvalidArgument, "%s: op is NULL", name);
  if (!scalar) return nccl_fail(ncclInvalidArgument, "%s: scalar is NULL", name);
  if (residence != ncclScalarDevice && residence != ncclScalarHostImmediate)
    return nccl_fail(ncclInvalidArgument,
                     "%s: residence %d is neither ncclScalarDevice (0) nor "
                     "ncclScalarHostImmediate (1)",
                     name, (int)residence);
  nccl_premul_t entry = {.live = 1, .dtype = datatype, .on_device = residence == ncclScalarDevice};
  if (entry.on_device)
    entry.ptr = scalar;
  else
    memcpy(entry.value, scalar, weft_dtype_size(dtype));
  pthread_mutex_lock(&comm->ops_mu);
  int slot = 0;
  while (slot < comm->npremul && comm->premul[slot].live) slot++;
  if (slot == comm->npremul) {
    nccl_premul_t *grown = slot < MAX_OPERATORS
                               ? realloc(comm->premul, (size_t)(slot + 1) * sizeof *grown)
                               : NULL;
    if (!grown) {
      pthread_mutex_unlock(&comm->ops_mu);
      return nccl_fail(slot < MAX_OPERATORS ? ncclSystemError : ncclInvalidUsage,
                       "%s: %d operators are live on this communicator; destroy some first", name,
                       slot);
    }
    comm->premul = grown;
    comm->npremul = slot + 1;
  }
  comm->premul[slot] = entry;
  pthread_mutex_unlock(&comm->ops_mu);
  *op = (ncclRedOp_t)(ncclNumOps + slot);
  return ncclSuccess;
}

NCCL_API(ncclResult_t, ncclRedOpDestroy, ncclRedOp_t op, ncclComm_t comm) {
  const char *name = "ncclRedOpDestroy";
  ncclResult_t res = nccl_check_comm(comm, name);
  if (res != ncclSuccess) return res;
  if ((int)op < ncclNumOps)
    return nccl_fail(ncclInvalidArgument, "%s: op %d is a built-in operator, not one made by "
                     "ncclRedOpCreatePreMulSum", name, (int)op);
  int slot = (int)op - ncclNumOps;
  pthread_mutex_lock(&comm->ops_mu);
  int live = slot < comm->npremul && comm->premul[slot].live;
  if (live) comm->premul[slot].live = 0;
  pthread_mutex_unlock(&comm->ops_mu);
  if (!live)
    return nccl_fail(ncclInvalidArgument,
                     "%s: op %d was not made by ncclRedOpCreatePreMulSum on this communicator, or "
                     "was destroyed already",
                     name, (int)op);
  return ncclSuccess;
}

ncclResult_t nccl_premul_lookup(struct ncclComm *c, ncclRedOp_t op, ncclDataType_t datatype,
                                weft_call_t *call, unsigned char *factor, const char *call_name) {
  int slot = (int)op - ncclNumOps;
  pthread_mutex_lock(&c->ops_mu);
  nccl_premul_t e = {0};
  if (slot >= 0 && slot < c->npremul) e = c->premul[slot];
  pthread_mutex_unlock(&c->ops_mu);
  if (!e.live)
    return nccl_fail(ncclInvalidArgument,
                     "%s: invalid reduction operation %d (not built in, and no live operator of "
                     "ncclRedOpCreatePreMulSum on this communicator)",
                     call_name, (int)op);
  if (e.dtype != datatype)
    return nccl_fail(ncclInvalidArgument,
                     "%s: operator %d was made for datatype %d, but the call passes datatype %d",
                     call_name, (int)op, (int)e.dtype, (int)datatype);
  call->op = WEFT_PREMUL_SUM;
  call->scalar_on_device = e.on_device;
  if (e.on_device) {
    call->scalar = e.ptr;
  } else {
    memcpy(factor, e.value, sizeof e.value);
    call->scalar = factor;
  }
  return ncclSuccess;
}

void nccl_premul_free(struct ncclComm *c) {
  free(c->premul);
  c->premul = NULL;
  c->npremul = 0;
}
