/* shape.h -- private to weft-bench: the buffers one row moves, by nccl-tests' conventions. */
#ifndef WEFT_TOOLS_BENCH_SHAPE_H_
#define WEFT_TOOLS_BENCH_SHAPE_H_

#include <stddef.h>

#include "tools/bench/types.h"

#ifdef __cplusplus
extern "C" {
#endif

/* One row of a sweep, as nccl-tests' *GetCollByteCount functions lay it out (e: element size,
 * n: ranks, r: rank, c: the count):
 *
 *   collective      size column     count c          send   recv   in place
 *   all_reduce      S               S/e              c      c      send = recv
 *   broadcast       S               S/e              c      c      send = recv
 *   reduce          S               S/e              c      c      send = recv
 *   all_gather      S (gathered)    S/e/n, 4-align   c      n c    send = recv + r c
 *   reduce_scatter  S (scattered)   S/e/n, 4-align   n c    c      recv = send + r c
 *   sendrecv        S               S/e              c      c      none
 *   barrier         0               0                0      0      none
 *   gather          S (root's)      S/e/n, 4-align   c      n c    send = recv + r c
 *   scatter         S (root's)      S/e/n, 4-align   n c    c      recv = send + r c
 *   alltoall        S (one rank's)  S/e/n, 4-align   n c    n c    none (c per peer)
 *
 * The count is what weft's call takes (all_gather's and gather's sendcount, reduce_scatter's and
 * scatter's recvcount). nccl-tests rounds the per-rank count of these four down to a multiple of
 * 4 elements and prints the resulting total as the size. Gather's n c receive buffer and
 * scatter's n c send buffer are the root's; the other ranks pass NULL there (weft.h). */
typedef struct {
  size_t bytes;       /* the size column: max(send, recv) bytes */
  size_t count;       /* the count column: elements per rank, weft's count argument */
  size_t send_count;  /* elements the send buffer holds */
  size_t recv_count;  /* elements the receive buffer holds */
  size_t send_offset; /* in place: sendbuf = buffer + rank * send_offset elements */
  size_t recv_offset; /* in place: recvbuf = buffer + rank * recv_offset elements */
  int has_in_place;   /* weft.h defines an in-place layout for it */
} bench_shape_t;

/* The row for a sweep size of `bytes` on `nranks` ranks with `eltsize`-byte elements. */
bench_shape_t bench_shape(bench_coll_t coll, int nranks, size_t eltsize, size_t bytes);

/* What sweep sizes are rounded down to so that each gives a distinct row: the element size, or
 * 4 n elements for all_gather, reduce_scatter, gather and scatter. */
size_t bench_shape_granule(bench_coll_t coll, int nranks, size_t eltsize);

#ifdef __cplusplus
}
#endif

#endif /* WEFT_TOOLS_BENCH_SHAPE_H_ */
