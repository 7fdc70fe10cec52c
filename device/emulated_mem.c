/* emulated_mem.c -- the emulated engine's memory: memfd "device" allocations, pinned host memory,
 * and IPC by opening the exporter's memfd through /proc. */
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/error.h"
#include "kernels/devprog.h"
#include "device/emulated.h"

#define IPC_MAGIC 0x57464950u /* "WFIP" */
#define PINNED_ALIGN 4096

typedef enum { KIND_ALLOC, KIND_IMPORT, KIND_PINNED } entry_kind_t;

typedef struct {
  char *base;
  size_t bytes;
  entry_kind_t kind;
  int fd; /* KIND_ALLOC: the memfd, kept open so that other processes can open it by /proc path */
  dev_engine_t *owner;
} entry_t;

/* What an exported handle carries. The memfd stays open in the exporter for as long as the
 * allocation lives, so /proc/<pid>/fd/<fd> names it exactly then. */
typedef struct {
  uint32_t magic;
  int32_t pid;
  int32_t fd;
  uint32_t reserved;
  uint64_t bytes;
  uint64_t inode; /* tells the allocation from a later one that got the same descriptor number */
} ipc_wire_t;

_Static_assert(sizeof(ipc_wire_t) <= DEV_IPC_HANDLE_BYTES, "IPC handle grew");

/* One table for the whole process, not one per engine: CUDA's pointer table is process-wide too
 * (cudaPointerGetAttributes answers for any allocation of the process, whichever code made it),
 * so an engine asked about a buffer that another engine allocated or imported -- another
 * communicator's, a test's -- must say DEVICE, as it would on a GPU. */
static pthread_mutex_t reg_mu = PTHREAD_MUTEX_INITIALIZER;
static entry_t *reg;
static size_t reg_len, reg_cap;

static weft_result_t reg_add(const entry_t *en) {
  pthread_mutex_lock(&reg_mu);
  if (reg_len == reg_cap) {
    size_t cap = reg_cap ? 2 * reg_cap : 16;
    entry_t *grown = realloc(reg, cap * sizeof *grown);
    if (!grown) {
      pthread_mutex_unlock(&reg_mu);
      return WEFT_ERR(WEFT_ERR_NO_MEMORY, "emulated device: growing the allocation table");
    }
    reg = grown;
    reg_cap = cap;
  }
  reg[reg_len++] = *en;
  pthread_mutex_unlock(&reg_mu);
  return WEFT_SUCCESS;
}

/* Removes the entry of `kind` that starts at p into *out; 0 when there is none. */
static int reg_take(const void *p, entry_kind_t kind, entry_t *out) {
  int found = 0;
  pthread_mutex_lock(&reg_mu);
  for (size_t i = 0; i < reg_len; i++) {
    if (reg[i].base == p && reg[i].kind == kind) {
      *out = reg[i];
      reg[i] = reg[--reg_len];
      found = 1;
      break;
    }
  }
  if (reg_len == 0) { /* the last one gone: leave nothing for a leak checker to report */
    free(reg);
    reg = NULL;
    reg_cap = 0;
  }
  pthread_mutex_unlock(&reg_mu);
  return found;
}

static void entry_free(const entry_t *en) {
  switch (en->kind) {
    case KIND_ALLOC:
      munmap(en->base, en->bytes);
      close(en->fd);
      break;
    case KIND_IMPORT:
      munmap(en->base, en->bytes);
      break;
    case KIND_PINNED:
      free(en->base);
      break;
  }
}

size_t emu_dtype_size(weft_dtype_t dtype) { return (size_t)dp_dtype_size(dtype); }

weft_result_t emu_mem_check(const void *p, size_t bytes, int allow_pageable, const char *what) {
  const char *c = p;
  int found = 0, overrun = 0;
  pthread_mutex_lock(&reg_mu);
  for (size_t i = 0; i < reg_len; i++) {
    if (c >= reg[i].base && c < reg[i].base + reg[i].bytes) {
      found = 1;
      overrun = bytes > (size_t)(reg[i].base + reg[i].bytes - c);
      break;
    }
  }
  pthread_mutex_unlock(&reg_mu);
  if (overrun)
    return WEFT_ERR(WEFT_ERR_INVALID_ARGUMENT,
                    "emulated device: %s: %zu bytes at %p run past the end of their allocation "
                    "(an illegal address on a GPU)",
                    what, bytes, p);
  if (!found && !allow_pageable && bytes)
    return WEFT_ERR(WEFT_ERR_INVALID_ARGUMENT,
                    "emulated device: %s: %p is pageable host memory, which a GPU kernel cannot "
                    "read or write (device memory or alloc(host_pinned = 1) only)",
                    what, p);
  return WEFT_SUCCESS;
}

weft_result_t emu_mem_kind(dev_engine_t *e, const void *p, dev_mem_t *kind, int *device) {
  (void)e;
  const char *c = p;
  *kind = DEV_MEM_HOST;
  if (device) *device = -1;
  pthread_mutex_lock(&reg_mu);
  for (size_t i = 0; i < reg_len; i++) {
    if (reg[i].kind != KIND_PINNED && c >= reg[i].base && c < reg[i].base + reg[i].bytes) {
      *kind = DEV_MEM_DEVICE;
      /* Imported memory reads as the importer's device: CUDA maps it into that context. */
      if (device) *device = reg[i].owner->device;
      break;
    }
  }
  pthread_mutex_unlock(&reg_mu);
  return WEFT_SUCCESS;
}

static weft_result_t alloc_device(dev_engine_t *e, size_t bytes, void **out) {
  int fd = memfd_create("weft-emulated-device", MFD_CLOEXEC);
  if (fd < 0)
    return WEFT_ERR(WEFT_ERR_SYSTEM, "emulated device: memfd_create for %zu bytes: %s", bytes,
                    strerror(errno));
  /* Reserved now, as cudaMalloc does: running out of memory fails here instead of with SIGBUS at
   * first touch. */
  int rc = posix_fallocate(fd, 0, (off_t)bytes);
  if (rc != 0) {
    close(fd);
    return WEFT_ERR(rc == ENOSPC ? WEFT_ERR_NO_MEMORY : WEFT_ERR_SYSTEM,
                    "emulated device: reserving %zu bytes of device memory: %s", bytes,
                    strerror(rc));
  }
  void *p = mmap(NULL, bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  if (p == MAP_FAILED) {
    int err = errno;
    close(fd);
    return WEFT_ERR(WEFT_ERR_SYSTEM, "emulated device: mmap of %zu bytes: %s", bytes,
                    strerror(err));
  }
  entry_t en = {p, bytes, KIND_ALLOC, fd, e};
  weft_result_t res = reg_add(&en);
  if (res != WEFT_SUCCESS) {
    entry_free(&en);
    return res;
  }
  *out = p;
  return WEFT_SUCCESS;
}

static weft_result_t alloc_pinned(dev_engine_t *e, size_t bytes, void **out) {
  void *p = NULL;
  int rc = posix_memalign(&p, PINNED_ALIGN, bytes);
  if (rc != 0)
    return WEFT_ERR(WEFT_ERR_NO_MEMORY, "emulated device: %zu bytes of pinned host memory: %s",
                    bytes, strerror(rc));
  entry_t en = {p, bytes, KIND_PINNED, -1, e};
  weft_result_t res = reg_add(&en);
  if (res != WEFT_SUCCESS) {
    free(p);
    return res;
  }
  *out = p;
  return WEFT_SUCCESS;
}

weft_result_t emu_alloc(dev_engine_t *e, size_t bytes, int host_pinned, void **out) {
  *out = NULL;
  if (bytes == 0) return WEFT_SUCCESS; /* as cudaMalloc(&p, 0): NULL, and release(NULL) is fine */
  return host_pinned ? alloc_pinned(e, bytes, out) : alloc_device(e, bytes, out);
}

void emu_release(dev_engine_t *e, void *p, int host_pinned) {
  (void)e;
  entry_t en;
  if (p && reg_take(p, host_pinned ? KIND_PINNED : KIND_ALLOC, &en)) entry_free(&en);
}

void emu_mem_release_all(dev_engine_t *e) {
  for (;;) {
    entry_t en;
    int found = 0;
    pthread_mutex_lock(&reg_mu);
    for (size_t i = 0; i < reg_len; i++) {
      if (reg[i].owner == e) {
        en = reg[i];
        found = 1;
        break;
      }
    }
    pthread_mutex_unlock(&reg_mu);
    if (!found) return;
    if (reg_take(en.base, en.kind, &en)) entry_free(&en);
  }
}

weft_result_t emu_ipc_export(dev_engine_t *e, void *p, size_t bytes, dev_ipc_handle_t *h) {
  (void)e;
  ipc_wire_t w;
  memset(&w, 0, sizeof w);
  pthread_mutex_lock(&reg_mu);
  for (size_t i = 0; i < reg_len; i++) {
    if (reg[i].base == p && reg[i].kind == KIND_ALLOC) {
      w.magic = IPC_MAGIC;
      w.fd = reg[i].fd;
      w.bytes = reg[i].bytes;
      break;
    }
  }
  pthread_mutex_unlock(&reg_mu);
  if (w.magic != IPC_MAGIC)
    return WEFT_ERR(WEFT_ERR_INVALID_ARGUMENT,
                    "emulated device: ipc_export of %p: not the start of a device allocation", p);
  if (bytes > w.bytes)
    return WEFT_ERR(WEFT_ERR_INVALID_ARGUMENT,
                    "emulated device: ipc_export of %zu bytes from an allocation of %llu", bytes,
                    (unsigned long long)w.bytes);
  struct stat st;
  if (fstat(w.fd, &st) != 0)
    return WEFT_ERR(WEFT_ERR_SYSTEM, "emulated device: ipc_export: fstat of the memfd: %s",
                    strerror(errno));
  w.inode = (uint64_t)st.st_ino;
  w.pid = (int32_t)getpid();
  memset(h, 0, sizeof *h);
  memcpy(h->bytes, &w, sizeof w);
  return WEFT_SUCCESS;
}

weft_result_t emu_ipc_import(dev_engine_t *e, const dev_ipc_handle_t *h, void **out) {
  ipc_wire_t w;
  memcpy(&w, h->bytes, sizeof w);
  *out = NULL;
  if (w.magic != IPC_MAGIC)
    return WEFT_ERR(WEFT_ERR_INVALID_ARGUMENT,
                    "emulated device: ipc_import: not a handle of the emulated engine (magic %#x)",
                    w.magic);
  /* CUDA refuses to open a handle in the process that exported it; so does the emulation, so that
   * code which would fail on a GPU fails here too. */
  if (w.pid == (int32_t)getpid())
    return WEFT_ERR(WEFT_ERR_INVALID_ARGUMENT,
                    "emulated device: ipc_import of a handle this process exported (CUDA cannot "
                    "open its own IPC handles either: use the pointer)");
  char path[64];
  snprintf(path, sizeof path, "/proc/%d/fd/%d", (int)w.pid, (int)w.fd);
  int fd = open(path, O_RDWR | O_CLOEXEC);
  if (fd < 0)
    return WEFT_ERR(WEFT_ERR_SYSTEM,
                    "emulated device: ipc_import: open %s: %s (has the exporting process exited "
                    "or released the allocation?)",
                    path, strerror(errno));
  struct stat st;
  if (fstat(fd, &st) != 0 || (uint64_t)st.st_ino != w.inode || (uint64_t)st.st_size < w.bytes) {
    close(fd);
    return WEFT_ERR(WEFT_ERR_INVALID_ARGUMENT,
                    "emulated device: ipc_import: %s is not the exported allocation of %llu bytes "
                    "(released, and the descriptor reused?)",
                    path, (unsigned long long)w.bytes);
  }
  void *p = mmap(NULL, (size_t)w.bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  int err = errno;
  close(fd); /* the mapping keeps the memory alive */
  if (p == MAP_FAILED)
    return WEFT_ERR(WEFT_ERR_SYSTEM, "emulated device: ipc_import: mmap of %s (%llu bytes): %s",
                    path, (unsigned long long)w.bytes, strerror(err));
  entry_t en = {p, (size_t)w.bytes, KIND_IMPORT, -1, e};
  weft_result_t res = reg_add(&en);
  if (res != WEFT_SUCCESS) {
    entry_free(&en);
    return res;
  }
  *out = p;
  return WEFT_SUCCESS;
}

void emu_ipc_close(dev_engine_t *e, void *p) {
  (void)e;
  entry_t en;
  if (p && reg_take(p, KIND_IMPORT, &en)) entry_free(&en);
}
