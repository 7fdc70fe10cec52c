/* shm_cma.c -- process_vm_readv for the shm transport's single-copy path (shm_cma.h). */
#include "transport/shm_cma.h"

#include <errno.h>
#include <sys/prctl.h>
#include <sys/uio.h>

void shm_cma_allow_peers(void) {
#ifdef PR_SET_PTRACER
  /* Fails with EINVAL where Yama is absent, which is what it would allow anyway. */
  (void)prctl(PR_SET_PTRACER, PR_SET_PTRACER_ANY, 0, 0, 0);
#endif
}

int shm_cma_read(int pid, void *dst, uint64_t addr, size_t len) {
  char *d = dst;
  while (len > 0) {
    struct iovec local = {d, len};
    struct iovec remote = {(void *)(uintptr_t)addr, len};
    ssize_t got = process_vm_readv(pid, &local, 1, &remote, 1, 0);
    if (got < 0 && errno == EINTR) continue;
    if (got < 0) return errno;
    /* A short read stops at a page the peer has not mapped: the next call reports it. */
    if (got == 0) return EFAULT;
    d += got;
    addr += (uint64_t)got;
    len -= (size_t)got;
  }
  return 0;
}

int shm_cma_probe(int pid, uint64_t addr, uint64_t expect) {
  uint64_t word = 0;
  int err = shm_cma_read(pid, &word, addr, sizeof word);
  if (err) return err;
  return word == expect ? 0 : EINVAL;
}
