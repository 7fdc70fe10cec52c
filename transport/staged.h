/* staged.h -- internal: device buffers over any host connection, staged through pinned host memory.
 *
 * staged_wrap() decorates a connection that only moves host memory (TCP) so that it also carries
 * xfers whose buffer is device memory (xfer_t.device = 1): a send copies the device buffer into a
 * pinned host slot on a queue of its own, then sends the slot over the inner connection; a receive
 * lands in a pinned slot and is copied to the device on another queue (or lent in place: device
 * work reads mapped pinned memory directly). A fused step may instead borrow a send slot
 * (lend_send), write it with device work and commit it: sent with no copy. Host xfers pass
 * through to the inner connection unchanged. Both directions stay ordered streams as transport.h
 * requires, host and device messages interleaved.
 *
 * The wrapper does not own the inner connection: the communicator keeps using it directly for
 * host calls, never at the same time as the wrapper. close() on the wrapper leaves `inner` open;
 * close the wrapper first. After a failure (an error from progress or wait, or an abortive close)
 * the inner connection may still hold transfers that point into the wrapper's slots: it must not
 * be progressed again, only closed. */
#ifndef WEFT_TRANSPORT_STAGED_H_
#define WEFT_TRANSPORT_STAGED_H_

#include "common/config.h"
#include "include/weft.h"
#include "transport/transport.h"

#ifdef __cplusplus
extern "C" {
#endif

struct dev_engine;

/* Wraps `inner` (not owned). Slots, each cfg->slice_bytes of pinned host memory from `dev`:
 * max(2, cfg->slices_in_flight, or 4 where that is 0) for receiving, at least cfg->shm_slots as
 * well for sending (lend_send lends them; staged.c says why so many); device messages longer
 * than a slot travel as several slot-sized pieces (both ends cut them alike, so the inner
 * connection sees the same message lengths on both sides). *out is closed with
 * (*out)->ops->close(*out, abortive). */
weft_result_t staged_wrap(conn_t *inner, struct dev_engine *dev, const weft_config_t *cfg,
                          conn_t **out);

/* The wrapper's ops (create, connect and the other transport-level entries are NULL: it is made
 * by staged_wrap, not by a transport). */
extern const transport_ops_t staged_conn_ops;

#ifdef __cplusplus
}
#endif

#endif /* WEFT_TRANSPORT_STAGED_H_ */
