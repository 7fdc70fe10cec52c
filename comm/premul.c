/* premul.c -- WEFT_PREMUL_SUM: this rank's input times its factor, into a buffer the
 * communicator keeps, then the call as WEFT_SUM from that buffer.
 *
 * Scaling first, once, is what the op means (NCCL's PreMulSum scales each contribution before it
 * is summed), and it leaves every algorithm and schedule as it is: they only ever see a sum. The
 * buffer grows to the largest input seen and lives until the communicator is freed, so repeated
 * calls (a training loop's gradients) allocate nothing; device memory in particular is costly to
 * allocate and free, since freeing synchronizes the device. */
#include <stdlib.h>
#include <string.h>

#include "comm/comm.h"
#include "kernels/reduce.h"

/* The communicator's scaling buffer of at least `bytes`, host or device memory. */
static weft_result_t premul_buffer(weft_comm_t *c, size_t bytes, int device, void **out) {
  comm_premul_t *p = &c->premul;
  void **buf = device ? &p->dev : &p->host;
  size_t *have = device ? &p->dev_bytes : &p->host_bytes;
  if (*buf && *have >= bytes) {
    *out = *buf;
    return WEFT_SUCCESS;
  }
  if (device) {
    if (*buf) c->dev->ops->release(c->dev, *buf, 0);
    *buf = NULL;
    *have = 0;
    WEFT_CHECK_CTX(c->dev->ops->alloc(c->dev, bytes, 0, buf),
                   "rank %d: premul_sum: allocating %zu bytes of device memory to scale the "
                   "input into",
                   c->rank, bytes);
  } else {
    void *grown = realloc(*buf, bytes);
    if (!grown)
      return WEFT_ERR(WEFT_ERR_NO_MEMORY,
                      "rank %d: premul_sum: out of memory for %zu bytes to scale the input into",
                      c->rank, bytes);
    *buf = grown;
  }
  *have = bytes;
  *out = *buf;
  return WEFT_SUCCESS;
}

/* The factor's value: copied from the caller's host memory, or read from device memory now,
 * when the call runs (after the stream's earlier work, which may have produced it). */
static weft_result_t read_factor(weft_comm_t *c, const weft_call_t *k, size_t esize,
                                 unsigned char *factor) {
  if (!k->scalar_on_device) {
    memcpy(factor, k->scalar, esize);
    return WEFT_SUCCESS;
  }
  if (!c->dev)
    return WEFT_ERR(WEFT_ERR_INVALID_ARGUMENT,
                    "rank %d: premul_sum: scalar_on_device is set but this communicator has no "
                    "device engine (WEFT_DEVICE=%s): pass the factor in host memory",
                    c->rank, c->config.device);
  dev_queue_t *q;
  WEFT_CHECK(exec_device_queue(&c->exec, &q));
  WEFT_CHECK_CTX(c->dev->ops->copy(q, factor, k->scalar, esize),
                 "rank %d: premul_sum: reading the factor from device memory at %p", c->rank,
                 k->scalar);
  return c->dev->ops->drain(q, c->config.timeout_ms);
}

weft_result_t comm_run_premul(weft_comm_t *c, const weft_call_t *k, size_t send_count, int device) {
  size_t esize = weft_dtype_size(k->dtype);
  unsigned char factor[8];
  WEFT_CHECK(read_factor(c, k, esize, factor));
  weft_call_t sum = *k;
  sum.op = WEFT_SUM;
  sum.scalar = NULL;
  sum.scalar_on_device = 0;
  if (send_count > 0) {
    void *buf = NULL;
    WEFT_CHECK(premul_buffer(c, send_count * esize, device, &buf));
    if (device) {
      dev_queue_t *q;
      WEFT_CHECK(exec_device_queue(&c->exec, &q));
      WEFT_CHECK(c->dev->ops->premul(q, buf, k->sendbuf, send_count, k->dtype, factor));
      /* The executor's transports read the buffer from queues of their own. */
      WEFT_CHECK(c->dev->ops->drain(q, c->config.timeout_ms));
    } else {
      kern_premul(buf, k->sendbuf, send_count, k->dtype, factor);
    }
    sum.sendbuf = buf;
  }
  return comm_call(c, &sum);
}

void comm_premul_release(weft_comm_t *c) {
  free(c->premul.host);
  if (c->premul.dev && c->dev) c->dev->ops->release(c->dev, c->premul.dev, 0);
  memset(&c->premul, 0, sizeof c->premul);
}
