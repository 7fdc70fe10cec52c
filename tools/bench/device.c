/* device.c -- weft-bench's -G: the buffers in device memory, the calls on a stream.
 *
 * The data patterns are written and checked on the host, in mirrors of the two buffers, and copied
 * over around the check's call; the timed loops touch only device memory. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tools/bench/bench.h"
#include "tools/bench/pattern.h"

/* Long enough for a 1 GiB row on a slow link. */
#define SYNC_TIMEOUT_MS 600000

weft_result_t bench_device_open(bench_t *b) {
  /* The communicator must use the same engine, or it would not know the buffers. */
  setenv("WEFT_DEVICE", b->args.device, 0);
  weft_result_t res = dev_engine_open(b->args.device, &b->dev);
  if (res == WEFT_SUCCESS && !b->dev) res = WEFT_ERR_UNSUPPORTED;
  if (res == WEFT_SUCCESS) res = b->dev->ops->queue_create(b->dev, &b->queue);
  if (res == WEFT_SUCCESS) res = b->dev->ops->stream_create(b->dev, &b->stream);
  return res;
}

weft_result_t bench_device_alloc(bench_t *b) {
  const dev_ops_t *d = b->dev->ops;
  b->host_send = malloc(b->alloc);
  b->host_recv = malloc(b->alloc);
  if (!b->host_send || !b->host_recv) {
    fprintf(stderr, "weft-bench: rank %d: cannot allocate 2 x %zu bytes\n", b->rank, b->alloc);
    return WEFT_ERR_NO_MEMORY;
  }
  weft_result_t res = d->alloc(b->dev, b->alloc, 0, &b->send);
  if (res == WEFT_SUCCESS) res = d->alloc(b->dev, b->alloc, 0, &b->recv);
  if (res != WEFT_SUCCESS) {
    fprintf(stderr, "weft-bench: rank %d: device buffers of 2 x %zu bytes: %s\n", b->rank,
            b->alloc, weft_last_error());
    return res;
  }
  bench_pattern_t p;
  bench_pattern_init(&p, b->args.coll, b->args.dtype, b->args.op, b->nranks, b->args.root);
  bench_pattern_fill(&p, b->rank, b->host_send, b->alloc / b->eltsize);
  bench_pattern_fill(&p, b->rank, b->host_recv, b->alloc / b->eltsize);
  return bench_device_upload(b, b->alloc);
}

void bench_device_close(bench_t *b) {
  const dev_ops_t *d = b->dev->ops;
  if (b->send) d->release(b->dev, b->send, 0);
  if (b->recv) d->release(b->dev, b->recv, 0);
  if (b->stream) d->stream_destroy(b->dev, b->stream);
  if (b->queue) d->queue_destroy(b->queue);
  dev_engine_close(b->dev);
  free(b->host_send);
  free(b->host_recv);
  b->dev = NULL;
}

weft_result_t bench_sync(bench_t *b) {
  if (!b->dev) return WEFT_SUCCESS;
  weft_result_t res = b->dev->ops->stream_sync(b->dev, b->stream, SYNC_TIMEOUT_MS);
  weft_result_t async_err = WEFT_SUCCESS;
  /* A failed enqueued call shows up here, not where it was enqueued. */
  if (res == WEFT_SUCCESS) res = weft_comm_get_async_error(b->comm, &async_err);
  return res != WEFT_SUCCESS ? res : async_err;
}

static weft_result_t copy_both(bench_t *b, void *dst1, const void *src1, void *dst2,
                               const void *src2, size_t bytes) {
  const dev_ops_t *d = b->dev->ops;
  weft_result_t res = d->copy(b->queue, dst1, src1, bytes);
  if (res == WEFT_SUCCESS) res = d->copy(b->queue, dst2, src2, bytes);
  return res != WEFT_SUCCESS ? res : d->drain(b->queue, SYNC_TIMEOUT_MS);
}

weft_result_t bench_device_upload(bench_t *b, size_t bytes) {
  if (!b->dev) return WEFT_SUCCESS;
  return copy_both(b, b->send, b->host_send, b->recv, b->host_recv, bytes);
}

weft_result_t bench_device_download(bench_t *b, size_t bytes) {
  if (!b->dev) return WEFT_SUCCESS;
  return copy_both(b, b->host_send, b->send, b->host_recv, b->recv, bytes);
}

void *bench_host_view(const bench_t *b, void *p) {
  if (!b->dev || !p) return p;
  char *c = p;
  if (c >= (char *)b->send && c < (char *)b->send + b->alloc)
    return (char *)b->host_send + (c - (char *)b->send);
  return (char *)b->host_recv + (c - (char *)b->recv);
}
