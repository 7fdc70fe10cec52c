/* report.c -- weft-sim's rows: sizes and bandwidths as nccl-tests computes them. */
#include "tools/sim/report.h"

#include <stdint.h>
#include <stdio.h>

double simrep_bus_factor(weft_coll_t coll, int p) {
  if (p < 1) return 0;
  switch (coll) {
    case WEFT_COLL_ALL_REDUCE:
      return 2.0 * (p - 1) / p;
    case WEFT_COLL_ALL_GATHER:
    case WEFT_COLL_REDUCE_SCATTER:
    case WEFT_COLL_GATHER:
    case WEFT_COLL_SCATTER:
    case WEFT_COLL_ALL_TO_ALL:
    case WEFT_COLL_ALL_TO_ALLV:
      return (double)(p - 1) / p;
    case WEFT_COLL_BROADCAST:
    case WEFT_COLL_REDUCE:
    case WEFT_COLL_SEND:
    case WEFT_COLL_RECV:
    case WEFT_COLL_P2P_GROUP:
      return 1;
    default:
      return 0;
  }
}

simrep_shape_t simrep_shape(weft_coll_t coll, int nranks, size_t esize, size_t bytes) {
  simrep_shape_t sh = {0, 0, 0};
  if (coll == WEFT_COLL_BARRIER) return sh;
  size_t count = bytes / esize;
  if (coll == WEFT_COLL_ALL_GATHER || coll == WEFT_COLL_REDUCE_SCATTER ||
      coll == WEFT_COLL_GATHER || coll == WEFT_COLL_SCATTER || coll == WEFT_COLL_ALL_TO_ALL ||
      coll == WEFT_COLL_ALL_TO_ALLV) {
    /* nccl-tests: every rank contributes count / p elements; the size is what they add up to
     * (gather and scatter: the root's whole buffer; all_to_all: one rank's sendbuf, count / p
     * elements for each peer). */
    sh.sched_count = count / (size_t)nranks;
    count = sh.sched_count * (size_t)nranks;
  } else {
    sh.sched_count = count;
  }
  sh.count = count;
  sh.bytes = count * esize;
  return sh;
}

void simrep_sizes_begin(simrep_sizes_t *it, size_t minbytes, size_t maxbytes, size_t stepfactor,
                        size_t stepbytes) {
  *it = (simrep_sizes_t){minbytes, maxbytes, stepfactor, stepbytes, 0, 0, minbytes > maxbytes};
}

static void step(simrep_sizes_t *it) {
  size_t s = it->next, next;
  if (it->stepfactor > 1)
    next = s == 0 ? 1 : (s > SIZE_MAX / it->stepfactor ? 0 : s * it->stepfactor);
  else
    next = it->stepbytes == 0 || s > SIZE_MAX - it->stepbytes ? 0 : s + it->stepbytes;
  /* A step that cannot grow the size (overflow, -i 0) ends the walk instead of looping. */
  if (next <= s || next > it->maxbytes) it->done = 1;
  it->next = next;
}

int simrep_sizes_next(simrep_sizes_t *it, weft_coll_t coll, int nranks, size_t esize,
                      simrep_shape_t *shape) {
  while (!it->done) {
    size_t raw = it->next;
    simrep_shape_t sh = simrep_shape(coll, nranks, esize, raw);
    step(it);
    if (coll == WEFT_COLL_BARRIER) it->done = 1; /* one row: a barrier has no size */
    if (sh.bytes == 0 && raw != 0 && coll != WEFT_COLL_BARRIER) continue;
    if (it->have && sh.bytes == it->last) continue;
    it->have = 1;
    it->last = sh.bytes;
    *shape = sh;
    return 1;
  }
  return 0;
}

cost_model_t simrep_cost_model(const sim_model_t *m, int nranks) {
  int one_node = m->ranks_per_node <= 0 || m->ranks_per_node >= nranks;
  cost_model_t c = {one_node ? m->alpha : m->inter_alpha, one_node ? m->beta : m->inter_beta,
                    m->gamma, (double)m->slice_bytes};
  return c;
}

int simrep_header(char *buf, size_t len) {
  return snprintf(buf, len,
                  "#%11s %12s %9s %18s %11s %8s %8s %11s %9s\n"
                  "#%11s %12s %9s %18s %11s %8s %8s %11s %9s\n",
                  "size", "count", "type", "algorithm", "time", "algbw", "busbw", "model", "sim/",
                  "(B)", "(elements)", "", "", "(us)", "(GB/s)", "(GB/s)", "(us)", "model");
}

int simrep_row(char *buf, size_t len, const simrep_shape_t *sh, weft_dtype_t dtype,
               weft_algo_t algo, weft_coll_t coll, int nranks, double time_s, double model_s) {
  double algbw = time_s > 0 ? (double)sh->bytes / 1e9 / time_s : 0;
  double busbw = algbw * simrep_bus_factor(coll, nranks);
  char model[16] = "N/A", ratio[16] = "N/A";
  if (model_s >= 0) {
    snprintf(model, sizeof model, "%.2f", model_s * 1e6);
    if (model_s > 0) snprintf(ratio, sizeof ratio, "%.3f", time_s / model_s);
  }
  return snprintf(buf, len, "%12zu %12zu %9s %18s %11.2f %8.2f %8.2f %11s %9s\n", sh->bytes,
                  sh->count, weft_dtype_name(dtype), weft_algo_name(algo), time_s * 1e6, algbw,
                  busbw, model, ratio);
}
