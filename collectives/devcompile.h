/* devcompile.h -- internal: compiles one rank's schedule into a device program
 * (kernels/devprog.h, which says what a program means and the order its loop keeps). */
#ifndef WEFT_COLLECTIVES_DEVCOMPILE_H_
#define WEFT_COLLECTIVES_DEVCOMPILE_H_

#include <stddef.h>

#include "collectives/schedule.h"
#include "include/weft.h"
#include "kernels/devprog.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Compiles `s`, one rank's schedule of a call on `dtype` with `op` among `nranks` ranks, for links
 * whose slots hold `slot_bytes`. WEFT_ERR_UNSUPPORTED, with the reason, for what the device loop
 * does not take: tokens (barriers, a p2p group's tag checks), ops that wait for a whole
 * dependency (dep_whole), more than DP_MAX_LINKS links, a slot smaller than one element. The
 * decision depends on this rank's schedule, never on its buffers; for most algorithms every rank
 * of a call decides alike, but not for all: binomial gather and scatter refuse their inner ranks
 * (dep_whole) and compile their leaves, and a linear root with more peers than DP_MAX_LINKS is
 * refused alone. A caller that launches device programs must therefore make one decision for all
 * ranks (refuse those shapes outright, or agree) before any rank launches. The schedule's
 * call-description exchange (hdr_to, hdr_from) is not part of the program: the caller checks
 * descriptions before launching. */
weft_result_t dp_compile(const schedule_t *s, weft_dtype_t dtype, weft_op_t op, int nranks,
                         size_t slot_bytes, dp_program_t *out);

#ifdef __cplusplus
}
#endif

#endif /* WEFT_COLLECTIVES_DEVCOMPILE_H_ */
