/* handles.h -- internal: the table of live communicators and requests.
 *
 * A weft_comm_t * or weft_request_t * is a plain pointer the caller keeps; after
 * weft_comm_destroy, weft_comm_abort, weft_wait or a finishing weft_test it points at freed
 * memory, and nothing read through it can be trusted. So no entry point reads a handle before
 * looking it up here: a handle that is not in the table is refused with a message instead of
 * crashing. The table is process-wide by necessity (a handle is checked before there is any
 * object to hang state on); it is the library's only such state besides per-thread errors.
 *
 * One mutex guards the table and the lifecycle fields that comm.c and async.c keep in the
 * objects (who is inside a communicator, who is closing it, who waits on a request), so that
 * "is it live" and "I am using it" are decided together: an object is freed only after it left
 * the table, and it leaves only once nobody is inside it. The condition variable wakes whoever
 * waits for such a change (a closer for the callers to leave, a second closer for the first).
 *
 * What the table cannot catch: freed memory that the allocator hands to a new communicator (or
 * request) at the same address makes the stale handle name the new object. */
#ifndef WEFT_COMM_HANDLES_H_
#define WEFT_COMM_HANDLES_H_

/* A destroyed or aborted communicator stays in the table as such (a few bytes each), so that
 * using it says what happened to it, and weft_comm_destroy after weft_comm_abort (what torch
 * does to a hung group) is told apart from a double destroy. A new object at the same address
 * replaces the entry. Requests leave the table when freed: there may be millions of them. */
typedef enum {
  HANDLE_NONE = 0,
  HANDLE_COMM = 1,
  HANDLE_COMM_DESTROYED = 2,
  HANDLE_COMM_ABORTED = 3,
  HANDLE_REQUEST = 4
} handle_kind_t;

/* The table's mutex; every other call here expects it held. */
void handles_lock(void);
void handles_unlock(void);

/* Adds `h` as `kind`, or changes the kind of an entry; -1 when out of memory. */
int handles_add(const void *h, handle_kind_t kind);
/* What the table says `h` is (HANDLE_NONE: not there). */
handle_kind_t handles_kind(const void *h);
/* Whether `h` is in the table as a handle of `kind`. */
int handles_live(const void *h, handle_kind_t kind);
void handles_remove(const void *h);

/* Waits for handles_changed() (releasing the mutex meanwhile), and signals waiters. */
void handles_wait(void);
void handles_changed(void);

#endif /* WEFT_COMM_HANDLES_H_ */
