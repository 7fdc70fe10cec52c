/* weft_bench.c -- times weft_all_reduce (float32 sum, in place) with the rows of peer_common.h. */
#include "include/weft.h"
#include "tools/peers/peer_common.h"

/* Any failure ends the run with weft's own message: compare.sh turns a failed run into n/a. */
#define CHECK(call)                                                    \
  do {                                                                 \
    if ((call) != WEFT_SUCCESS) {                                      \
      fprintf(stderr, "weft_bench: %s: %s\n", #call, weft_last_error()); \
      exit(1);                                                         \
    }                                                                  \
  } while (0)

int main(int argc, char **argv) {
  weft_comm_t *comm;
  CHECK(weft_comm_init_env(&comm));
  int rank, nranks;
  CHECK(weft_comm_rank(comm, &rank));
  CHECK(weft_comm_size(comm, &nranks));
  peer_args_t a = peer_parse_args(argc, argv);
  /* The label comes from compare.sh, not WEFT_TRANSPORT: compare.sh greps the binary for that
   * name to learn whether the library reads it, so this driver must not contain it. */
  const char *variant = getenv("PEER_VARIANT");
  /* PEER_ASYNC=1: each call as weft_iall_reduce and weft_wait(-1), the path of DDP's buckets. */
  const char *async_env = getenv("PEER_ASYNC");
  int async = async_env && strcmp(async_env, "1") == 0;
  if (rank == 0) peer_header("weft", variant ? variant : "auto", nranks);
  float *buf = malloc(a.maxbytes), *pristine = malloc(a.maxbytes);
  double *t = malloc(sizeof *t * peer_max_iters(&a));
  peer_fill(pristine, a.maxbytes / sizeof(float), rank);
  for (size_t bytes = a.minbytes; bytes <= a.maxbytes; bytes *= 2) {
    size_t count = bytes / sizeof(float);
    int iters = peer_iters(&a, bytes);
    for (int i = -a.warmup; i < iters; i++) {
      memcpy(buf, pristine, bytes); /* in place, refilled outside the timed region */
      CHECK(weft_barrier(comm, NULL));
      double t0 = peer_now_us();
      if (async) {
        weft_request_t *req;
        CHECK(weft_iall_reduce(buf, buf, count, WEFT_FLOAT32, WEFT_SUM, comm, &req));
        CHECK(weft_wait(req, -1));
      } else {
        CHECK(weft_all_reduce(buf, buf, count, WEFT_FLOAT32, WEFT_SUM, comm, NULL));
      }
      if (i >= 0) t[i] = peer_now_us() - t0;
    }
    double wrong = (double)peer_check(buf, count, nranks);
    CHECK(weft_all_reduce(t, t, (size_t)iters, WEFT_FLOAT64, WEFT_MAX, comm, NULL));
    CHECK(weft_all_reduce(&wrong, &wrong, 1, WEFT_FLOAT64, WEFT_SUM, comm, NULL));
    if (rank == 0) peer_row(bytes, iters, peer_median(t, iters), nranks, (long)wrong);
  }
  free(buf), free(pristine), free(t);
  CHECK(weft_comm_destroy(comm));
  return 0;
}
