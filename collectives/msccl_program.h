/* msccl_program.h -- internal to msccl_import.c, msccl_order.c and msccl_build.c: a read MSCCL
 * program as data (gpus of tbs of steps) and the step types' properties. */
#ifndef WEFT_COLLECTIVES_MSCCL_PROGRAM_H_
#define WEFT_COLLECTIVES_MSCCL_PROGRAM_H_

#include <stdint.h>

#include "collectives/msccl_import.h"

enum { BUF_I = 0, BUF_O = 1, BUF_S = 2 };

typedef enum { T_S, T_R, T_RCS, T_RRS, T_RRC, T_RRCS, T_CPY, T_RE, T_NOP } step_type_t;

static const char *const msccl_type_names[]
    __attribute__((unused)) = {"s", "r", "rcs", "rrs", "rrc", "rrcs", "cpy", "re", "nop"};

static inline int type_sends(step_type_t t) {
  return t == T_S || t == T_RCS || t == T_RRS || t == T_RRCS;
}
static inline int type_recvs(step_type_t t) {
  return t == T_R || t == T_RCS || t == T_RRS || t == T_RRC || t == T_RRCS;
}
/* Reads its local source range (srcbuf/srcoff): sends from it, or reduces with it. */
static inline int type_reads_src(step_type_t t) {
  return t == T_S || t == T_RRS || t == T_RRC || t == T_RRCS || t == T_CPY || t == T_RE;
}
/* Writes its local destination range (dstbuf/dstoff). */
static inline int type_writes_dst(step_type_t t) {
  return t == T_R || t == T_RCS || t == T_RRC || t == T_RRCS || t == T_CPY || t == T_RE;
}

typedef struct {
  step_type_t type;
  int srcbuf, srcoff, dstbuf, dstoff, cnt;
  int depid, deps; /* tb index and step, -1: none */
  int line;
  int send_idx, recv_idx; /* its place among its tb's sends / receives (channel order) */
} step_t;

typedef struct {
  int id, send, recv, chan, line;
  step_t *steps;
  int nsteps;
  int send_pair, recv_pair; /* reference execution: its (sender, receiver) streams, -1: none */
} tb_t;

typedef struct {
  int id, line;
  int chunks[3]; /* i, o, s */
  tb_t *tbs;
  int ntbs;
  /* The order its steps ran in the reference execution: (tb, step) pairs. */
  int *run_tb, *run_step;
  int nrun;
} gpu_t;

struct msccl_program {
  char name[128];
  char what[256]; /* the file, for messages */
  weft_coll_t coll;
  int ngpus, nchannels, nchunksperloop, inplace;
  gpu_t *gpus;
  uint64_t hash;
};

/* Runs the program in rounds (msccl_import.h) and records, per gpu, the order its steps ran
 * (run_tb, run_step); a program that stops is refused, naming the step that could not run. */
weft_result_t msccl_reference_run(msccl_program_t *p);

#endif /* WEFT_COLLECTIVES_MSCCL_PROGRAM_H_ */
