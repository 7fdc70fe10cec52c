/* xfer_queue.h -- internal: the singly linked queue of xfer parts that the slot transports (shm,
 * cuda_ipc, ibverbs) keep per direction, and posting a whole message as one part of it. */
#ifndef WEFT_TRANSPORT_XFER_QUEUE_H_
#define WEFT_TRANSPORT_XFER_QUEUE_H_

#include "transport/transport.h"

static inline void xfer_queue_push(xfer_part_t **head, xfer_part_t **tail, xfer_part_t *p) {
  p->next = NULL;
  if (*tail)
    (*tail)->next = p;
  else
    *head = p;
  *tail = p;
}

/* Unlinks the head part (the caller decides whether its message is complete). */
static inline void xfer_queue_pop(xfer_part_t **head, xfer_part_t **tail) {
  *head = (*head)->next;
  if (!*head) *tail = NULL;
}

/* Unlinks the head part and completes its message. */
static inline void xfer_queue_pop_done(xfer_part_t **head, xfer_part_t **tail) {
  xfer_t *x = (*head)->owner;
  xfer_queue_pop(head, tail);
  x->parts_left = 0;
  x->complete = 1;
}

/* Queues a message of len bytes at ptr as one part (ptr NULL marks an in-place receive); an
 * empty message completes at once and queues nothing. */
static inline void xfer_queue_post(xfer_part_t **head, xfer_part_t **tail, char *ptr, size_t len,
                                   xfer_t *x) {
  x->complete = len == 0;
  x->parts_left = len == 0 ? 0 : 1;
  x->data = NULL;
  if (len == 0) return;
  xfer_part_t *p = &x->parts[0];
  p->owner = x;
  p->ptr = ptr;
  p->left = len;
  xfer_queue_push(head, tail, p);
}

#endif /* WEFT_TRANSPORT_XFER_QUEUE_H_ */
