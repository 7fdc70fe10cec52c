/* clock.h -- internal: monotonic time for timeouts and benchmarks. */
#ifndef WEFT_COMMON_CLOCK_H_
#define WEFT_COMMON_CLOCK_H_

#include <stdint.h>
#include <time.h>

static inline int64_t clock_now_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (int64_t)ts.tv_sec * 1000000000LL + ts.tv_nsec;
}

static inline int64_t clock_now_ms(void) { return clock_now_ns() / 1000000; }

#endif /* WEFT_COMMON_CLOCK_H_ */
