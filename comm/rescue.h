/* rescue.h -- internal: the channel a communicator's survivors talk over after a failure.
 *
 * Every communicator opens one more TCP listener than its traffic needs, and publishes its
 * address with the transports' (boot_record_t.rescue). Nothing connects to it while the
 * communicator is healthy. After a failure, weft_comm_shrink and weft_comm_get_failed_ranks
 * (shrink.c) exchange small messages over it with the ranks still alive: it is a transport of its
 * own, so none of the connections the failure reset or left mid-message is reused, it needs no
 * master (the addresses were exchanged at creation), and it exists whatever WEFT_TRANSPORT chose
 * for the traffic (shm or ib only included). */
#ifndef WEFT_COMM_RESCUE_H_
#define WEFT_COMM_RESCUE_H_

#include <stddef.h>

#include "bootstrap/rendezvous.h"
#include "comm/comm.h"

/* Creates the listener (on comm->advertise, one socket per peer) and writes its address to
 * mine->rescue. */
weft_result_t rescue_open(weft_comm_t *comm, boot_record_t *mine);
/* Keeps every rank's rescue address from the creation's exchange. */
weft_result_t rescue_attach(weft_comm_t *comm, const boot_record_t *all);
/* Closes its connections and the listener (comm_free). */
void rescue_close(weft_comm_t *comm, int abortive);

/* One round: sends the `bytes` at `mine` to every peer p with talk[p] set and receives as many
 * from each into theirs + p * bytes. Connections are made on first use and kept for later rounds
 * (both ends must call this with the same talk pattern toward each other, in the same order). A
 * peer that cannot be reached, refuses, closes, or lets WEFT_TIMEOUT_MS pass without progress gets
 * lost[p] = 1, its connection dropped for good, and the first such reason goes to `why` (cap
 * bytes). Returns an error only for this rank's own trouble (memory). */
weft_result_t rescue_exchange(weft_comm_t *comm, const unsigned char *talk, const void *mine,
                              size_t bytes, void *theirs, unsigned char *lost, char *why,
                              size_t cap);

#endif /* WEFT_COMM_RESCUE_H_ */
