/* algo_file.c -- WEFT_ALGO_FILE and weft_comm_load_algo: an MSCCL program loaded for a
 * communicator, once every rank has agreed it loaded the same one. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "collectives/msccl_import.h"
#include "comm/comm.h"
#include "common/error.h"

/* What a rank says in the agreement when it has no program to offer: it could not load the file
 * (or was asked to unload, UNLOAD). A real hash equal to one of them is moved off it. */
#define HASH_FAILED 0ull
#define HASH_UNLOAD 1ull

void comm_algo_release(weft_comm_t *c) {
  msccl_free(c->algo_prog);
  c->algo_prog = NULL;
}

/* Every rank's hash, through a ring all_gather (the one algorithm every size has; a loaded
 * all_gather program is not used, since the call names its algorithm). */
static weft_result_t exchange(weft_comm_t *c, uint64_t mine, uint64_t *all) {
  weft_call_t k;
  memset(&k, 0, sizeof k);
  k.coll = WEFT_COLL_ALL_GATHER;
  k.sendbuf = &mine;
  k.recvbuf = all;
  k.count = 1;
  k.dtype = WEFT_UINT64;
  k.op = WEFT_SUM;
  k.algo = c->nranks > 1 ? WEFT_ALGO_RING : WEFT_ALGO_AUTO;
  return comm_submit(c, &k);
}

weft_result_t comm_algo_load(weft_comm_t *c, const char *path) {
  msccl_program_t *p = NULL;
  weft_result_t res = WEFT_SUCCESS;
  char why[ERR_MSG_MAX] = "";
  uint64_t mine = HASH_UNLOAD;
  if (path) {
    res = msccl_load(path, &p);
    if (res == WEFT_SUCCESS && msccl_ngpus(p) != c->nranks)
      res = WEFT_ERR(WEFT_ERR_INVALID_ARGUMENT,
                     "%s is a program for %d ranks (ngpus) but the communicator has %d", path,
                     msccl_ngpus(p), c->nranks);
    if (res != WEFT_SUCCESS) {
      snprintf(why, sizeof why, "%s", err_last());
      mine = HASH_FAILED;
    } else {
      mine = msccl_hash(p);
      if (mine <= HASH_UNLOAD) mine += 2; /* keep the two words above for what they mean */
    }
  }
  weft_result_t own = res;
  /* Every rank takes part, even one that failed to read the file: the others would wait for it
   * otherwise. They all learn of the failure and all fail alike. */
  uint64_t *all = calloc((size_t)c->nranks, sizeof *all);
  if (!all) {
    msccl_free(p);
    return WEFT_ERR(WEFT_ERR_NO_MEMORY, "rank %d: out of memory loading an algorithm", c->rank);
  }
  res = exchange(c, mine, all);
  if (res != WEFT_SUCCESS) {
    err_context(res, "rank %d: agreeing on algorithm file %s", c->rank, path ? path : "(none)");
  } else if (own != WEFT_SUCCESS) {
    res = err_set_message(own, why);
    err_context(res, "rank %d: weft_comm_load_algo", c->rank);
  } else {
    for (int r = 0; r < c->nranks && res == WEFT_SUCCESS; r++) {
      if (all[r] == mine) continue;
      if (all[r] == HASH_FAILED)
        res = WEFT_ERR(WEFT_ERR_INVALID_ARGUMENT,
                       "rank %d: weft_comm_load_algo(%s): rank %d could not load its algorithm "
                       "file (its own error says why)",
                       c->rank, path ? path : "NULL", r);
      else
        res = WEFT_ERR(WEFT_ERR_MISMATCH,
                       "rank %d: weft_comm_load_algo(%s): rank %d loaded %s (hash %016llx, this "
                       "rank's %016llx): every rank must load the same program",
                       c->rank, path ? path : "NULL", r,
                       all[r] == HASH_UNLOAD ? "none" : "another program",
                       (unsigned long long)all[r], (unsigned long long)mine);
    }
  }
  free(all);
  if (res != WEFT_SUCCESS) {
    msccl_free(p);
    return res;
  }
  comm_algo_release(c);
  c->algo_prog = p;
  if (p && c->config.debug >= 1 && c->rank == 0)
    fprintf(stderr, "weft: loaded algorithm \"%s\" (%s on %d ranks, %d channels) from %s\n",
            msccl_name(p), weft_coll_name(msccl_coll(p)), msccl_ngpus(p), msccl_nchannels(p), path);
  return WEFT_SUCCESS;
}

weft_result_t weft_comm_load_algo(weft_comm_t *comm, const char *path) {
  WEFT_CHECK(comm_enter(comm, "weft_comm_load_algo", COMM_RUNS));
  weft_result_t res = comm_algo_load(comm, path);
  comm_leave(comm, COMM_RUNS);
  return res;
}
