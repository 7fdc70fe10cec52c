/* main.c -- weft-sim: predicted time and bus bandwidth of any algorithm, size by size. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "collectives/algorithms.h"
#include "collectives/msccl_import.h"
#include "common/error.h"
#include "tools/sim/cli.h"
#include "tools/sim/report.h"
#include "tools/sim/sim.h"
#include "tools/sim/topology.h"

/* Network mode: what the topology resolved to. 1 if it does not fit the run. */
static int print_network(const simcli_t *o) {
  if (!o->model.topo) return 0;
  net_t *net = net_create();
  topo_net_t tn = {0};
  char line[512];
  weft_result_t res = net ? topo_build(o->model.topo, &o->model, o->nranks, net, &tn)
                          : WEFT_ERR(WEFT_ERR_NO_MEMORY, "weft-sim: out of memory");
  if (res == WEFT_SUCCESS) {
    topo_describe(&tn, line, sizeof line);
    printf("# network: %s\n", line);
  } else {
    fprintf(stderr, "weft-sim: %s\n", err_last());
  }
  topo_net_free(&tn);
  net_free(net);
  return res != WEFT_SUCCESS;
}

static int print_params(const simcli_t *o) {
  const sim_model_t *m = &o->model;
  int rpn = m->ranks_per_node > 0 ? m->ranks_per_node : o->nranks;
  printf("# weft-sim %s: %d ranks, %d per node, %s, slice %zu B, window %d, call descriptions %s\n",
         weft_coll_name(o->coll), o->nranks, rpn, weft_dtype_name(o->dtype), m->slice_bytes,
         m->window, m->headers ? "on" : "off");
  printf("# alpha %g s, beta %g s/B, gamma %g s/B, beta_mem %g s/B", m->alpha, m->beta, m->gamma,
         m->beta_mem);
  if (rpn < o->nranks && !m->topo)
    printf("; between nodes: alpha %g s, beta %g s/B", m->inter_alpha, m->inter_beta);
  printf("\n");
  if (print_network(o)) return 1;
  printf("#\n");
  return 0;
}

static void print_message(void *arg, int from, int to, double bytes, double start, double end,
                          const char *step) {
  (void)arg;
  printf("#   msg %5d -> %-5d %12.0f B %12.3f .. %12.3f us  %s\n", from, to, bytes, start * 1e6,
         end * 1e6, step);
}

/* One row for one algorithm and size; the failure message names the algorithm. */
static int row(const simcli_t *o, const algo_entry_t *e, const simrep_shape_t *sh) {
  sim_call_t call = {o->coll, e->algo, o->nranks, sh->sched_count, o->dtype, simcli_root(o)};
  sim_result_t r;
  if (sim_run(&o->model, &call, o->trace ? print_message : NULL, NULL, &r) != WEFT_SUCCESS) {
    fprintf(stderr, "weft-sim: %s %s, %zu bytes: %s\n", weft_coll_name(o->coll),
            weft_algo_name(e->algo), sh->bytes, err_last());
    return 1;
  }
  cost_model_t cm = simrep_cost_model(&o->model, o->nranks);
  /* The closed forms count ports, not shared links: no closed form in network mode. */
  double model = e->cost && !o->model.topo ? e->cost(&cm, o->nranks, (double)sh->bytes) : -1;
  char line[256];
  simrep_row(line, sizeof line, sh, o->dtype, e->algo, o->coll, o->nranks, r.time, model);
  fputs(line, stdout);
  return 0;
}

/* One row for an MSCCL program (--algo-file): every rank's schedule from the importer, replayed
 * as the table's are. A size the program cannot cut is a comment, not a failure. */
static int program_row(const simcli_t *o, const msccl_program_t *p, const simrep_shape_t *sh) {
  int use = 0;
  if (msccl_applies(p, o->coll, o->nranks, sh->sched_count, &use) != WEFT_SUCCESS) {
    fprintf(stderr, "weft-sim: %s\n", err_last());
    return 1;
  }
  if (!use) {
    printf(
        "# %zu bytes: count %zu is not a multiple of %zu, which the program needs (a call of "
        "it takes the normal choice)\n",
        sh->bytes, sh->sched_count, msccl_count_unit(p, o->nranks));
    return 0;
  }
  schedule_t *s = calloc((size_t)o->nranks, sizeof *s);
  if (!s) return fprintf(stderr, "weft-sim: out of memory\n"), 1;
  weft_result_t res = WEFT_SUCCESS;
  int built = 0;
  for (; built < o->nranks && res == WEFT_SUCCESS; built++) {
    sched_args_t a;
    memset(&a, 0, sizeof a);
    a.coll = o->coll;
    a.rank = built;
    a.nranks = o->nranks;
    a.count = sh->sched_count;
    res = msccl_build(p, &s[built], &a);
  }
  if (res != WEFT_SUCCESS) built--; /* the failed one holds nothing */
  sim_result_t r;
  if (res == WEFT_SUCCESS)
    res = sim_run_schedules(&o->model, o->nranks, weft_dtype_size(o->dtype), s,
                            o->trace ? print_message : NULL, NULL, &r);
  for (int i = 0; i < built; i++) sched_free(&s[i]);
  free(s);
  if (res != WEFT_SUCCESS) {
    fprintf(stderr, "weft-sim: %s, %zu bytes: %s\n", o->algo_file, sh->bytes, err_last());
    return 1;
  }
  char line[256];
  simrep_row(line, sizeof line, sh, o->dtype, WEFT_ALGO_AUTO, o->coll, o->nranks, r.time, -1);
  char *name = strstr(line, " auto ");
  if (name) memcpy(name + 1, "file", 4); /* the algorithm column: the program's */
  fputs(line, stdout);
  return 0;
}

int main(int argc, char **argv) {
  simcli_t o;
  char err[512], line[512];
  int rc = simcli_parse(argc, (const char *const *)argv, &o, err, sizeof err);
  if (rc == SIMCLI_HELP) return simcli_usage(stdout), 0;
  if (rc != SIMCLI_OK) {
    fprintf(stderr, "weft-sim: %s\n", err);
    return 2;
  }
  msccl_program_t *prog = NULL;
  if (o.algo_file[0]) {
    if (msccl_load(o.algo_file, &prog) != WEFT_SUCCESS) {
      fprintf(stderr, "weft-sim: %s\n", err_last());
      return simcli_free(&o), 2;
    }
    o.coll = msccl_coll(prog);
    o.nranks = msccl_ngpus(prog);
    if (o.model.ranks_per_node > o.nranks) o.model.ranks_per_node = o.nranks;
  }
  if (print_params(&o)) return simcli_free(&o), msccl_free(prog), 2;
  if (prog)
    printf("# program \"%s\" from %s, %d channels\n#\n", msccl_name(prog), o.algo_file,
           msccl_nchannels(prog));
  simrep_header(line, sizeof line);
  fputs(line, stdout);
  size_t esize = weft_dtype_size(o.dtype);
  simrep_sizes_t it;
  simrep_shape_t sh;
  int failed = 0;
  simrep_sizes_begin(&it, o.minbytes, o.maxbytes, o.stepfactor, o.stepbytes);
  while (!failed && simrep_sizes_next(&it, o.coll, o.nranks, esize, &sh)) {
    if (prog) failed = program_row(&o, prog, &sh);
    for (int i = 0; i < algo_count() && !failed && !prog; i++) {
      const algo_entry_t *e = algo_at(i);
      if (e->coll == o.coll && (o.algo == SIMCLI_ALL_ALGOS || e->algo == o.algo))
        failed = row(&o, e, &sh);
    }
    fflush(stdout);
  }
  msccl_free(prog);
  simcli_free(&o);
  return failed;
}
