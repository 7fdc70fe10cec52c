/* sizes.c -- the message sizes one weft-bench run walks through. */
#include "tools/bench/sizes.h"

#include <stdint.h>

void bench_sizes_begin(bench_sizes_t *it, size_t minbytes, size_t maxbytes, size_t stepfactor,
                       size_t stepbytes, size_t eltsize) {
  it->next = minbytes;
  it->maxbytes = maxbytes;
  it->stepfactor = stepfactor;
  it->stepbytes = stepbytes;
  it->eltsize = eltsize ? eltsize : 1;
  it->last_row = 0;
  it->have_row = 0;
  it->done = minbytes > maxbytes;
}

/* Moves it->next one step on; marks the walk done when the step cannot make progress. */
static void step(bench_sizes_t *it) {
  size_t size = it->next;
  size_t next;
  if (it->stepfactor > 1) {
    if (size == 0) {
      next = 1;
    } else if (size > SIZE_MAX / it->stepfactor) {
      it->done = 1;
      return;
    } else {
      next = size * it->stepfactor;
    }
  } else {
    if (it->stepbytes == 0 || size > SIZE_MAX - it->stepbytes) {
      it->done = 1;
      return;
    }
    next = size + it->stepbytes;
  }
  it->next = next;
  if (next > it->maxbytes) it->done = 1;
}

int bench_sizes_next(bench_sizes_t *it, size_t *bytes) {
  while (!it->done) {
    size_t raw = it->next;
    size_t rounded = raw - raw % it->eltsize;
    step(it);
    if (rounded == 0 && raw != 0) continue;
    if (it->have_row && rounded == it->last_row) continue;
    it->have_row = 1;
    it->last_row = rounded;
    *bytes = rounded;
    return 1;
  }
  return 0;
}

size_t bench_sizes_max(size_t maxbytes, size_t eltsize) {
  if (eltsize == 0) eltsize = 1;
  return maxbytes - maxbytes % eltsize;
}
