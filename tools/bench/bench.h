/* bench.h -- private to weft-bench's binary: one run's state, shared by main.c, runner.c,
 * sweep.c and tuning.c. */
#ifndef WEFT_TOOLS_BENCH_BENCH_H_
#define WEFT_TOOLS_BENCH_BENCH_H_

#include <stddef.h>
#include <stdint.h>

#include "device/device.h"
#include "include/weft.h"
#include "tools/bench/args.h"
#include "tools/bench/shape.h"

typedef struct {
  bench_args_t args;
  weft_comm_t *comm;
  int rank;
  int nranks;
  size_t eltsize;
  void *send; /* `alloc` bytes each: the largest row's send and receive buffers */
  void *recv;
  size_t alloc;
  uint64_t wrong; /* summed over ranks, rows and tables: the exit status */
  /* -G: send and recv are device memory; the patterns are written and checked in host mirrors
   * copied over through `queue`, and every call is enqueued on `stream`. */
  dev_engine_t *dev;
  dev_queue_t *queue;
  void *stream;
  void *host_send, *host_recv;
} bench_t;

/* ---- device.c: -G. */

/* Opens the engine -G names (and makes the communicator use the same one), a queue, a stream. */
weft_result_t bench_device_open(bench_t *b);
/* Device buffers of b->alloc bytes each, host mirrors filled with `fill`'s data, uploaded. */
weft_result_t bench_device_alloc(bench_t *b);
void bench_device_close(bench_t *b);
/* Waits for the calls enqueued on the stream (nothing on host buffers). */
weft_result_t bench_sync(bench_t *b);
/* The first `bytes` of both buffers from the host mirrors to the device, or back. */
weft_result_t bench_device_upload(bench_t *b, size_t bytes);
weft_result_t bench_device_download(bench_t *b, size_t bytes);
/* Where a pointer into send/recv lies in the host mirrors (itself on host buffers; NULL stays
 * NULL). */
void *bench_host_view(const bench_t *b, void *p);

/* Prints a failed weft call with the rank and weft's message; returns res. */
weft_result_t bench_report(const bench_t *b, weft_result_t res, const char *what, size_t bytes);

#define BENCH_CHECK(b, call, what, bytes)                                                  \
  do {                                                                                     \
    weft_result_t check_res_ = (call);                                                     \
    if (check_res_ != WEFT_SUCCESS) return bench_report((b), check_res_, (what), (bytes)); \
  } while (0)

/* ---- runner.c: one collective, any algorithm. */

/* Runs `coll` once with per-rank `count` (weft's count argument) through weft_call with `algo`. */
weft_result_t bench_call(bench_t *b, bench_coll_t coll, weft_algo_t algo, const void *send,
                         void *recv, size_t count);

/* Time per call in microseconds: -w untimed calls, a barrier, -n timed ones; combined over ranks
 * as `average` says (BENCH_TIME_RANK0: this rank's own). */
weft_result_t bench_time(bench_t *b, bench_coll_t coll, weft_algo_t algo, const bench_shape_t *sh,
                         int in_place, bench_average_t average, double *time_us);

/* Runs the call once on pattern.h's data; *wrong = wrong elements summed over ranks. */
weft_result_t bench_check(bench_t *b, bench_coll_t coll, weft_algo_t algo, const bench_shape_t *sh,
                          int in_place, int64_t *wrong);

/* How sendrecv overlaps its two halves, for the header: one line ending in '\n'. */
const char *bench_sendrecv_note(void);

/* ---- sweep.c: nccl-tests' tables. */

/* Parameters and the ranks' pids and hosts (rank 0 prints). */
weft_result_t bench_print_header(bench_t *b);

/* One table per algorithm in algos[0 .. nalgos): every size from -b to -e, out of place and in
 * place, with -c's check. */
weft_result_t bench_sweep(bench_t *b, const weft_algo_t *algos, int nalgos);

/* ---- tuning.c: --tune. */

/* Bytes each of the two buffers needs for --tune's fit on `nranks` ranks. */
size_t bench_tune_alloc(int nranks);

/* Fits and writes the cost model, then prints the crossover table over -b .. -e. */
weft_result_t bench_tune(bench_t *b);

#endif /* WEFT_TOOLS_BENCH_BENCH_H_ */
