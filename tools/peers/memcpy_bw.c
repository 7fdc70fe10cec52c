/* memcpy_bw.c -- this machine's single-thread memcpy bandwidth: 256 MiB buffers, median of 9 copies. */
#include "peer_common.h"

int main(void) {
  size_t bytes = (size_t)256 << 20; /* far beyond any cache: measures DRAM, as big all-reduces do */
  char *src = malloc(bytes), *dst = malloc(bytes);
  memset(src, 1, bytes), memset(dst, 0, bytes); /* fault the pages in before timing */
  double t[9];
  for (int i = 0; i < 9; i++) {
    double t0 = peer_now_us();
    memcpy(dst, src, bytes);
    t[i] = peer_now_us() - t0;
  }
  printf("memcpy_GBps %.3f\n", bytes / peer_median(t, 9) / 1e3);
  int ok = dst[bytes / 2] == 1; /* uses the copy so it is not optimized away */
  free(src), free(dst);
  return ok ? 0 : 1;
}
