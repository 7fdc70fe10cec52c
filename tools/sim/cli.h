/* cli.h -- private to weft-sim: its command line, parsed and checked. */
#ifndef WEFT_TOOLS_SIM_CLI_H_
#define WEFT_TOOLS_SIM_CLI_H_

#include <stddef.h>
#include <stdio.h>

#include "include/weft.h"
#include "tools/sim/sim.h"
#include "tools/sim/topology.h"

#ifdef __cplusplus
extern "C" {
#endif

#define SIMCLI_ALL_ALGOS WEFT_NUM_ALGOS /* -A all */

typedef struct {
  weft_coll_t coll;   /* -C, default all_reduce */
  weft_algo_t algo;   /* -A, default all (SIMCLI_ALL_ALGOS) */
  int nranks;         /* -p, default 8 */
  size_t minbytes;    /* -b, default 32M (nccl-tests' defaults for -b, -e, -i) */
  size_t maxbytes;    /* -e, default 32M */
  size_t stepbytes;   /* -i, default 1M; used when -f is not given */
  size_t stepfactor;  /* -f, 0 when not given */
  weft_dtype_t dtype; /* -d, default float32 */
  int root;           /* -r; -1: 0 for rooted collectives, the last rank for send/recv */
  sim_model_t model;  /* --alpha ... --no-header, from sim_model_defaults */
  int trace;          /* --trace: print every message */
  topo_t topo;        /* --topology, --net, --rank-order; model.topo points here when given */
  int has_topo;
  char algo_file[512]; /* --algo-file: an MSCCL program run instead of the table's algorithms */
  int jobs;            /* -j: rows simulated at once; 0: the cores online */
} simcli_t;

enum { SIMCLI_OK = 0, SIMCLI_HELP = 1, SIMCLI_ERROR = 2 };

/* Parses argv[1..argc) into `o`; SIMCLI_ERROR comes with a one-line message in `err`. Checks the
 * (collective, algorithm) pair against the table and lists what the collective has. */
int simcli_parse(int argc, const char *const *argv, simcli_t *o, char *err, size_t errlen);

/* Frees what parsing allocated (the topology's rank order); `o` may be parsed again after. */
void simcli_free(simcli_t *o);

/* The root a run uses once -r and -p are known. */
int simcli_root(const simcli_t *o);

void simcli_usage(FILE *out);

/* "4096", "64K", "1.5M", "1G": bytes with an optional K, M or G (powers of 1024); -1 if not. */
int simcli_parse_size(const char *text, size_t *bytes);

#ifdef __cplusplus
}
#endif

#endif /* WEFT_TOOLS_SIM_CLI_H_ */
