/* agree.h -- internal: the settings every rank of a communicator must share, checked at init.
 *
 * Each rank publishes its settings with its addresses (boot_record_t.settings) and, once every
 * record is in, compares them all before any transport connects: a setting that differs fails
 * init on every rank alike, naming the setting, both values and the ranks holding them, instead
 * of a crash or a stall when the first slice arrives where the peer did not expect it. */
#ifndef WEFT_COMM_AGREE_H_
#define WEFT_COMM_AGREE_H_

#include <stdint.h>

#include "bootstrap/rendezvous.h"
#include "comm/comm.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Fills mine->settings from the communicator's configuration and cost model; `job_id` is the
 * boot_job_hash() of the launcher's job id. */
void agree_fill(const weft_comm_t *c, uint64_t job_id, boot_record_t *mine);

/* WEFT_SUCCESS when every record's settings equal rank 0's; else WEFT_ERR_MISMATCH naming the
 * first setting that differs (in the table's order) on the lowest rank that differs, so every
 * rank reports the same pair. */
weft_result_t agree_check(const weft_comm_t *c, const boot_record_t *all);

#ifdef __cplusplus
}
#endif

#endif /* WEFT_COMM_AGREE_H_ */
