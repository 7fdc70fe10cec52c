/* shm_cma.h -- internal: cross-memory attach (process_vm_readv) for the shm transport's
 * single-copy path: letting peers read this process, probing whether a peer can be read, and
 * reading a peer's bytes straight into a local buffer.
 *
 * Every call returns 0 or an errno value; the caller decides what a refusal means (shm.c falls
 * back to its slot path for that connection). */
#ifndef WEFT_TRANSPORT_SHM_CMA_H_
#define WEFT_TRANSPORT_SHM_CMA_H_

#include <stddef.h>
#include <stdint.h>

/* Lets local peers read this process under Yama's ptrace_scope 1 (where only an ancestor may
 * otherwise): without it every sibling rank's read is refused with EPERM. Harmless without Yama. */
void shm_cma_allow_peers(void);

/* Reads the 8-byte word at `addr` in process `pid` and checks that it holds `expect`: 0 when it
 * does, else the errno of the refusal (EINVAL where the word read back differs). */
int shm_cma_probe(int pid, uint64_t addr, uint64_t expect);

/* Copies `len` bytes at `addr` in process `pid` to `dst`; 0 or errno (ESRCH: the process is gone;
 * EFAULT: the range is not mapped there). */
int shm_cma_read(int pid, void *dst, uint64_t addr, size_t len);

#endif /* WEFT_TRANSPORT_SHM_CMA_H_ */
