/* reduce_bw.c -- this machine's speed at weft's reduce-on-arrival, float32 sum, one thread.
 *
 * Measured the way a large ring all-reduce reduces: dst = local + incoming, where local and dst
 * are big buffers (256 MiB, far beyond any cache, like the user's sendbuf and recvbuf) and
 * incoming is one 64 KiB slice that has just arrived (warm in cache, reused). Prints bytes of dst
 * written per second, median of 9 passes; compare.sh's loopback limit charges it per byte reduced. */
#include "kernels/reduce.h"
#include "peer_common.h"

#define SLICE ((size_t)64 << 10)

int main(void) {
  size_t bytes = (size_t)256 << 20;
  float *local = malloc(bytes), *dst = malloc(bytes), *incoming = malloc(SLICE);
  if (!local || !dst || !incoming) return 1;
  memset(local, 0, bytes), memset(dst, 0, bytes); /* fault the pages in before timing */
  for (size_t i = 0; i < SLICE / sizeof(float); i++) incoming[i] = 1.0f;
  kern_reduce_fn sum = kern_reduce_lookup(WEFT_FLOAT32, WEFT_SUM);
  size_t per = SLICE / sizeof(float);
  double t[9];
  for (int k = 0; k < 9; k++) {
    double t0 = peer_now_us();
    for (size_t off = 0; off < bytes / sizeof(float); off += per) sum(dst + off, local + off, incoming, per);
    t[k] = peer_now_us() - t0;
  }
  printf("reduce_GBps %.3f\n", bytes / peer_median(t, 9) / 1e3);
  int ok = dst[bytes / sizeof(float) / 2] == 1.0f; /* uses the result so it is not optimized away */
  free(local), free(dst), free(incoming);
  return ok ? 0 : 1;
}
