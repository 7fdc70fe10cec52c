/* emulated.h -- internal to device/: the emulated engine's memory registry, shared by
 * emulated_mem.c (allocations, IPC) and emulated_engine.c (queues, gates, the vtable). */
#ifndef WEFT_DEVICE_EMULATED_H_
#define WEFT_DEVICE_EMULATED_H_

#include <stddef.h>

#include "device/device.h"

typedef struct emu_engine emu_engine_t;

/* Memory: device allocations are memfd mappings, pinned host memory is aligned host memory. */
weft_result_t emu_mem_kind(dev_engine_t *e, const void *p, dev_mem_t *kind, int *device);
weft_result_t emu_alloc(dev_engine_t *e, size_t bytes, int host_pinned, void **out);
void emu_release(dev_engine_t *e, void *p, int host_pinned);
weft_result_t emu_ipc_export(dev_engine_t *e, void *p, size_t bytes, dev_ipc_handle_t *h);
weft_result_t emu_ipc_import(dev_engine_t *e, const dev_ipc_handle_t *h, void **out);
void emu_ipc_close(dev_engine_t *e, void *p);
/* Checks [p, p + bytes) as device work would touch it: inside one allocation if it starts in
 * one (else it is an illegal address on a GPU), and, unless allow_pageable (a copy), device or
 * pinned memory (a kernel cannot reach pageable host memory). `what` names the operation. */
weft_result_t emu_mem_check(const void *p, size_t bytes, int allow_pageable, const char *what);
/* Frees every allocation and mapping `e` made (engine close). */
void emu_mem_release_all(dev_engine_t *e);

/* Bytes per element, 0 for an unknown dtype. */
size_t emu_dtype_size(weft_dtype_t dtype);

#endif /* WEFT_DEVICE_EMULATED_H_ */
