/* nccl_internal.h -- internal to nccl/: the communicator wrapper, the export macro and the
 * translations between NCCL's names and codes and weft's, shared by the front end's files. */
#ifndef WEFT_NCCL_NCCL_INTERNAL_H_
#define WEFT_NCCL_NCCL_INTERNAL_H_

#include <pthread.h>

#include "include/weft.h"
#include "nccl/nccl.h"

/* Defines pncclX, the one definition, and makes ncclX a weak alias of it: NCCL's export scheme,
 * so that a profiler or shim may define ncclX itself and call through to pncclX. The body
 * follows the macro: NCCL_API(ncclResult_t, ncclCommCount, const ncclComm_t c, int *n) { ... } */
#define NCCL_API(ret, name, ...)                                                        \
  ret name(__VA_ARGS__) __attribute__((weak, alias("p" #name), visibility("default"))); \
  __attribute__((visibility("default"))) ret p##name(__VA_ARGS__)

/* An operator made by ncclRedOpCreatePreMulSum: op ncclNumOps + its index in the table. */
typedef struct {
  int live;
  ncclDataType_t dtype;
  int on_device;           /* ncclScalarDevice: `ptr` is read when each call runs */
  const void *ptr;         /* the device factor */
  unsigned char value[8];  /* ncclScalarHostImmediate: the factor, read at creation */
} nccl_premul_t;

/* What an ncclComm_t points to: weft's communicator and what NCCL's queries answer. */
#define NCCL_COMM_MAGIC 0x6e63636cu /* "nccl" */
#define NCCL_COMM_DEAD 0xdeadc0deu  /* aborted: the wrapper stays, its communicator is gone */
struct ncclComm {
  unsigned magic;
  weft_comm_t *w;
  int rank, nranks;
  int cuda_dev;               /* the CUDA device current at init, or 0 without a CUDA runtime */
  struct ncclComm *next_dead; /* init.c's list of aborted wrappers */
  /* A nonblocking init (config blocking = 0) runs on init_thread; until `initialized` is set
   * (release, by that thread) w and the fields above are not yet valid. init_res and init_err
   * are its outcome. init_mu guards the one join, made by the first call that needs the
   * communicator (nccl_comm_ready). A blocking init leaves a communicator with both set. */
  int nonblocking, initialized, joined;
  pthread_t init_thread;
  pthread_mutex_t init_mu;
  ncclResult_t init_res;
  char init_err[512];
  /* redop.c's operators, under ops_mu (a call on the communicator may read the table while
   * another thread creates or destroys an operator). */
  pthread_mutex_t ops_mu;
  nccl_premul_t *premul;
  int npremul;
};

/* init.c */
/* Waits for a nonblocking init to finish (at once for a blocking one); its failure, if any, is
 * returned with a message naming `call`. */
ncclResult_t nccl_comm_ready(struct ncclComm *c, const char *call);

/* errors.c */
/* Sets this thread's last error ("weft: " and the message) and returns `code`. */
ncclResult_t nccl_fail(ncclResult_t code, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
/* Translates a weft result; on failure the last error becomes "weft: <weft_last_error()>". */
ncclResult_t nccl_from_weft(weft_result_t r);
/* Checks a communicator handle: NULL, never made, destroyed or aborted give ncclInvalidArgument
 * (ncclInvalidUsage for aborted) with a message naming `call`; then waits for a nonblocking init
 * to finish (nccl_comm_ready). */
ncclResult_t nccl_check_comm(const struct ncclComm *c, const char *call);
/* The handle checks alone, without waiting for a nonblocking init. */
ncclResult_t nccl_check_handle(const struct ncclComm *c, const char *call);
ncclResult_t nccl_dtype(ncclDataType_t t, weft_dtype_t *out, const char *call);
ncclResult_t nccl_op(ncclRedOp_t op, weft_op_t *out, const char *call);

/* redop.c */
/* For an op of ncclNumOps or above: the PreMulSum operator it names on c, for `datatype`, set
 * into call (op WEFT_PREMUL_SUM and its factor: a host factor copied into `factor`, 8 bytes,
 * which the call then points at); ncclInvalidArgument naming `call_name` otherwise. */
ncclResult_t nccl_premul_lookup(struct ncclComm *c, ncclRedOp_t op, ncclDataType_t datatype,
                                weft_call_t *call, unsigned char *factor, const char *call_name);
/* Frees the operator table (the communicator's wrapper is going). */
void nccl_premul_free(struct ncclComm *c);

/* env.c */
/* Sets the WEFT_* variables that the user's NCCL_* ones stand for (docs/gpus.md),
 * leaving those already set. Runs when the library loads; tests call it again. */
void nccl_env_apply(void);

/* group.c */
/* Runs `call` on c now, or queues it when this thread is inside ncclGroupStart/End. */
ncclResult_t nccl_issue(struct ncclComm *c, const weft_call_t *call, const weft_p2p_op_t *p2p,
                        cudaStream_t stream);
/* A call refused before it could be queued: inside a group, the group's end fails too (NCCL
 * fails the whole group). Returns `res`. */
ncclResult_t nccl_refused(ncclResult_t res);

#endif /* WEFT_NCCL_NCCL_INTERNAL_H_ */
