/* errors.c -- the NCCL front end's library calls: version, error strings, the per-thread last
 * error, and the translation of weft's results, dtypes and ops into NCCL's. */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "nccl/nccl_internal.h"

static __thread char last_error[1024];

ncclResult_t nccl_fail(ncclResult_t code, const char *fmt, ...) {
  va_list ap;
  int n = snprintf(last_error, sizeof last_error, "weft: ");
  va_start(ap, fmt);
  vsnprintf(last_error + n, sizeof last_error - (size_t)n, fmt, ap);
  va_end(ap);
  return code;
}

/* weft's codes onto NCCL's: argument errors stay argument errors; what a peer or the network
 * did (a timeout, a closed connection, an earlier failure) is ncclRemoteError, as NCCL reports
 * a peer that went away; a disagreement between ranks and use of an aborted communicator are
 * misuse. */
ncclResult_t nccl_from_weft(weft_result_t r) {
  ncclResult_t code;
  switch (r) {
    case WEFT_SUCCESS:
      return ncclSuccess;
    case WEFT_ERR_INVALID_ARGUMENT:
      code = ncclInvalidArgument;
      break;
    case WEFT_ERR_SYSTEM:
    case WEFT_ERR_NO_MEMORY:
      code = ncclSystemError;
      break;
    case WEFT_ERR_TIMEOUT:
    case WEFT_ERR_REMOTE:
    case WEFT_ERR_COMM_FAILED:
      code = ncclRemoteError;
      break;
    case WEFT_ERR_MISMATCH:
    case WEFT_ERR_UNSUPPORTED:
    case WEFT_ERR_ABORTED:
      code = ncclInvalidUsage;
      break;
    default:
      code = ncclInternalError;
      break;
  }
  return nccl_fail(code, "%s", weft_last_error());
}

ncclResult_t nccl_check_comm(const struct ncclComm *c, const char *call) {
  ncclResult_t res = nccl_check_handle(c, call);
  return res == ncclSuccess ? nccl_comm_ready((struct ncclComm *)c, call) : res;
}

ncclResult_t nccl_check_handle(const struct ncclComm *c, const char *call) {
  if (!c) return nccl_fail(ncclInvalidArgument, "%s: comm is NULL", call);
  /* Atomic: ncclCommAbort may turn it from another thread. */
  unsigned magic = __atomic_load_n(&c->magic, __ATOMIC_ACQUIRE);
  if (magic == NCCL_COMM_DEAD)
    return nccl_fail(ncclInvalidUsage, "%s: the communicator was aborted", call);
  if (magic != NCCL_COMM_MAGIC)
    return nccl_fail(ncclInvalidArgument, "%s: comm %p is not a live communicator", call,
                     (const void *)c);
  return ncclSuccess;
}

ncclResult_t nccl_dtype(ncclDataType_t t, weft_dtype_t *out, const char *call) {
  static const weft_dtype_t map[] = {
      [ncclInt8] = WEFT_INT8,         [ncclUint8] = WEFT_UINT8,     [ncclInt32] = WEFT_INT32,
      [ncclUint32] = WEFT_UINT32,     [ncclInt64] = WEFT_INT64,     [ncclUint64] = WEFT_UINT64,
      [ncclFloat16] = WEFT_FLOAT16,   [ncclFloat32] = WEFT_FLOAT32, [ncclFloat64] = WEFT_FLOAT64,
      [ncclBfloat16] = WEFT_BFLOAT16, [ncclFloat8e4m3] = WEFT_FLOAT8_E4M3,
      [ncclFloat8e5m2] = WEFT_FLOAT8_E5M2,
  };
  if ((int)t >= 0 && (int)t < ncclNumTypes) {
    *out = map[t];
    return ncclSuccess;
  }
  return nccl_fail(ncclInvalidArgument, "%s: invalid datatype %d", call, (int)t);
}

ncclResult_t nccl_op(ncclRedOp_t op, weft_op_t *out, const char *call) {
  switch (op) {
    case ncclSum:
      *out = WEFT_SUM;
      return ncclSuccess;
    case ncclProd:
      *out = WEFT_PROD;
      return ncclSuccess;
    case ncclMax:
      *out = WEFT_MAX;
      return ncclSuccess;
    case ncclMin:
      *out = WEFT_MIN;
      return ncclSuccess;
    case ncclAvg:
      *out = WEFT_AVG;
      return ncclSuccess;
    default:
      return nccl_fail(ncclInvalidArgument, "%s: invalid reduction operation %d", call, (int)op);
  }
}

NCCL_API(ncclResult_t, ncclGetVersion, int *version) {
  if (!version) return nccl_fail(ncclInvalidArgument, "ncclGetVersion: version is NULL");
  const char *debug = getenv("WEFT_DEBUG");
  static int said;
  if (debug && *debug && strcmp(debug, "0") != 0 &&
      !__atomic_exchange_n(&said, 1, __ATOMIC_RELAXED))
    fprintf(stderr, "weft %d.%d.%d behind the NCCL %d.%d.%d API (libnccl.so.2)\n",
            weft_version() / 10000, weft_version() / 100 % 100, weft_version() % 100, NCCL_MAJOR,
            NCCL_MINOR, NCCL_PATCH);
  *version = NCCL_VERSION_CODE;
  return ncclSuccess;
}

NCCL_API(const char *, ncclGetErrorString, ncclResult_t result) {
  switch (result) {
    case ncclSuccess:
      return "success";
    case ncclUnhandledCudaError:
      return "a CUDA call failed";
    case ncclSystemError:
      return "an operating-system call failed";
    case ncclInternalError:
      return "internal error in weft";
    case ncclInvalidArgument:
      return "an argument is invalid";
    case ncclInvalidUsage:
      return "the call is not allowed here";
    case ncclRemoteError:
      return "a peer failed or the network broke";
    case ncclInProgress:
      return "operation still in progress";
    default:
      return "unknown result";
  }
}

/* The message of this thread's last failed call, whatever the communicator (NCCL keeps one per
 * thread too); every message starts with "weft: ". */
NCCL_API(const char *, ncclGetLastError, ncclComm_t comm) {
  (void)comm;
  return last_error;
}
