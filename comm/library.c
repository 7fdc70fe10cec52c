/* library.c -- version, build features, and the names of result codes, dtypes and ops. */
#include <string.h>

#include "collectives/algorithms.h"
#include "common/error.h"
#include "include/weft.h"

int weft_version(void) { return WEFT_VERSION_CODE; }

unsigned weft_build_features(void) {
#ifdef WEFT_HAVE_CUDA
  return WEFT_FEATURE_CUDA;
#else
  return 0;
#endif
}

const char *weft_last_error(void) { return err_last(); }

const char *weft_result_string(weft_result_t r) {
  switch (r) {
    case WEFT_SUCCESS: return "success";
    case WEFT_ERR_INVALID_ARGUMENT: return "invalid argument";
    case WEFT_ERR_SYSTEM: return "system error";
    case WEFT_ERR_TIMEOUT: return "timeout";
    case WEFT_ERR_REMOTE: return "remote error";
    case WEFT_ERR_MISMATCH: return "mismatch between ranks";
    case WEFT_ERR_COMM_FAILED: return "communicator failed earlier";
    case WEFT_ERR_UNSUPPORTED: return "unsupported";
    case WEFT_ERR_NO_MEMORY: return "out of memory";
    case WEFT_ERR_INTERNAL: return "internal error";
    case WEFT_ERR_ABORTED: return "aborted";
  }
  return "unknown result code";
}

int weft_algo_supported(weft_coll_t coll, weft_algo_t algo) {
  if ((unsigned)coll >= WEFT_NUM_COLLS) return 0;
  return algo == WEFT_ALGO_AUTO || algo_lookup(coll, algo) != NULL;
}
