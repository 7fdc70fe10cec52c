/* env.h -- internal: who am I in the job? Rank, world size and master from the launcher's
 * variables.
 *
 * Pure logic over a getenv-like callback, so tests feed it a map instead of the real environment.
 * Precedence and every variable are documented in env.c. */
#ifndef WEFT_BOOTSTRAP_ENV_H_
#define WEFT_BOOTSTRAP_ENV_H_

#include <stdint.h>

#include "include/weft.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Returns the variable's value, or NULL when it is unset. */
typedef const char *(*boot_getenv_fn)(void *ctx, const char *name);

typedef struct {
  int rank, world_size;       /* required */
  int local_rank, local_size; /* -1 when the launcher did not say */
  char master_host[256];      /* without brackets, e.g. "::1" */
  int master_port;
  char job_id[128];   /* "" when none */
  const char *source; /* "WEFT", "torchrun", "Open MPI", "Slurm": the family that gave rank/size */
} boot_env_t;

/* Fills `out` or fails with WEFT_ERR_INVALID_ARGUMENT naming the variable and its value. */
weft_result_t boot_env_resolve(boot_getenv_fn get, void *ctx, boot_env_t *out);
/* The same over the process environment (getenv). */
weft_result_t boot_env_resolve_process(boot_env_t *out);

/* FNV-1a 64 of the job id (also of ""); never 0, so that 0 stays free to mean "unset". */
uint64_t boot_job_hash(const char *job_id);

#ifdef __cplusplus
}
#endif

#endif /* WEFT_BOOTSTRAP_ENV_H_ */
