/* tcp_iov.h -- internal: how much of a lane's queue of parts one sendmsg or recvmsg takes.
 *
 * Several queued parts go per system call, so that a collective's call description and its first
 * slice leave in one segment and wake the receiver once, not twice: up to TCP_IOV_PARTS of them.
 * But at most TCP_SYSCALL_BYTES in all: a 1 MiB sendmsg holds the socket while it copies the whole
 * of it in, and a 1 MiB recvmsg copies all of it out before the executor reduces any of it. Over
 * loopback, where both ends run on the host's cores, 256 KiB calls let one side's copy overlap the
 * other's and keep what is reduced in cache: with 16 slices of 64 KiB in flight, 2 ranks, 1-2 MiB
 * all-reduces ran at 5.9-6.1 GB/s capped against 3.4-6.0 uncapped, and 128 or 512 KiB calls were
 * slower than 256 (results/2026-11-28-tcp-depth). */
#ifndef WEFT_TRANSPORT_TCP_IOV_H_
#define WEFT_TRANSPORT_TCP_IOV_H_

#include <stddef.h>
#include <sys/uio.h>

#include "transport/transport.h"

#ifdef __cplusplus
extern "C" {
#endif

#define TCP_IOV_PARTS 16
#define TCP_SYSCALL_BYTES ((size_t)256 * 1024)

/* Fills iov (TCP_IOV_PARTS entries) from the queue starting at `p`; returns how many are used.
 * The last one may cover only the front of its part. */
static inline int tcp_iov_gather(const xfer_part_t *p, struct iovec *iov) {
  int n = 0;
  size_t total = 0;
  for (; p && n < TCP_IOV_PARTS && total < TCP_SYSCALL_BYTES; p = p->next) {
    size_t room = TCP_SYSCALL_BYTES - total;
    size_t len = p->left < room ? p->left : room;
    iov[n].iov_base = p->ptr;
    iov[n].iov_len = len;
    n++;
    total += len;
  }
  return n;
}

#ifdef __cplusplus
}
#endif

#endif /* WEFT_TRANSPORT_TCP_IOV_H_ */
