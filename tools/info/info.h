/* info.h -- internal to weft-info: the sections it prints, one function each. */
#ifndef WEFT_TOOLS_INFO_INFO_H_
#define WEFT_TOOLS_INFO_INFO_H_

#include "common/config.h"
#include "tools/info/emit.h"

/* Version, build features and the compiler that built this binary with the library. */
void info_build(emit_t *e);
/* tcp, shm, cuda_ipc, staged and rdma: whether each can run here and, where not, why. */
void info_transports(emit_t *e, const weft_config_t *cfg);
/* The WEFT_* variables of the environment: knobs with their effective values, unknown names
 * flagged. `cfg_error` is config_load's message when the environment holds a bad value, else "". */
void info_knobs(emit_t *e, const char *cfg_error);
/* The algorithm the cost model picks for all_reduce at a few sizes, `nranks` ranks on one host
 * joined by `transport` (a cost-model transport name). Returns -1 for an unknown transport. */
int info_algorithms(emit_t *e, const weft_config_t *cfg, int nranks, const char *transport);

#endif /* WEFT_TOOLS_INFO_INFO_H_ */
