/* main.c -- weft-sim: predicted time and bus bandwidth of any algorithm, size by size.
 *
 * Rows (one algorithm at one size) are independent calls of the engine, which keeps no state
 * between calls: -j of them run at once on worker threads, and each row's text is printed in the
 * order of a serial run as soon as the rows before it are. With --trace the engine prints as it
 * goes, so rows run one at a time on the main thread. */
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

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

/* What one row prints: its lines for stdout, or the failure for stderr. */
typedef struct {
  char out[1024];
  size_t len;
  char err[768];
  int failed;
} row_text_t;

static void add(row_text_t *t, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  int n = vsnprintf(t->out + t->len, sizeof t->out - t->len, fmt, ap);
  va_end(ap);
  if (n > 0) t->len += (size_t)n < sizeof t->out - t->len ? (size_t)n : sizeof t->out - t->len - 1;
}

static void fail(row_text_t *t, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(t->err, sizeof t->err, fmt, ap);
  va_end(ap);
  t->failed = 1;
}

/* Under an estimated row: what it was estimated from (sim.h's SIM_REPLAY_ESTIMATE). */
static void add_estimate_note(row_text_t *t, const sim_result_t *r, size_t esize) {
  if (!r->estimated) return;
  add(t, "#   ^ estimated from replays of %zu and %zu bytes, extrapolated (--replay estimate)\n",
      r->estimated_from[0] * esize, r->estimated_from[1] * esize);
}

/* One row for one algorithm and size; the failure message names the algorithm. */
/* Above this many ranks a sweep of all algorithms (-A all) leaves the one-round all-reduce out:
 * every rank folds every other's input in rank order, p^2 messages and no symmetry that would let
 * one rank's replay stand for the others (at 256 ranks and 1 GiB it alone takes minutes). It is
 * the choice for small calls on oversubscribed hosts only; -A linear still runs it. */
#define SWEEP_LINEAR_MAX_RANKS 64

static int sweep_leaves_out(const simcli_t *o, const algo_entry_t *e) {
  return o->algo == SIMCLI_ALL_ALGOS && e->coll == WEFT_COLL_ALL_REDUCE &&
         e->algo == WEFT_ALGO_LINEAR && o->nranks > SWEEP_LINEAR_MAX_RANKS;
}

static void row(const simcli_t *o, const algo_entry_t *e, const simrep_shape_t *sh, row_text_t *t) {
  if (sweep_leaves_out(o, e)) {
    add(t,
        "# %s linear: left out above %d ranks (p^2 messages, each rank replayed; -A linear runs "
        "it)\n",
        weft_coll_name(o->coll), SWEEP_LINEAR_MAX_RANKS);
    return;
  }
  sim_call_t call = {o->coll, e->algo, o->nranks, sh->sched_count, o->dtype, simcli_root(o)};
  sim_result_t r;
  if (sim_run(&o->model, &call, o->trace ? print_message : NULL, NULL, &r) != WEFT_SUCCESS) {
    fail(t, "weft-sim: %s %s, %zu bytes: %s\n", weft_coll_name(o->coll), weft_algo_name(e->algo),
         sh->bytes, err_last());
    return;
  }
  cost_model_t cm = simrep_cost_model(&o->model, o->nranks);
  /* The closed forms count ports, not shared links: no closed form in network mode. */
  double model = e->cost && !o->model.topo ? e->cost(&cm, o->nranks, (double)sh->bytes) : -1;
  char line[256];
  simrep_row(line, sizeof line, sh, o->dtype, e->algo, o->coll, o->nranks, r.time, model);
  add(t, "%s", line);
  add_estimate_note(t, &r, weft_dtype_size(o->dtype));
}

/* One row for an MSCCL program (--algo-file): every rank's schedule from the importer, replayed
 * as the table's are. A size the program cannot cut is a comment, not a failure. */
static void program_row(const simcli_t *o, const msccl_program_t *p, const simrep_shape_t *sh,
                        row_text_t *t) {
  int use = 0;
  if (msccl_applies(p, o->coll, o->nranks, sh->sched_count, &use) != WEFT_SUCCESS) {
    fail(t, "weft-sim: %s\n", err_last());
    return;
  }
  if (!use) {
    add(t,
        "# %zu bytes: count %zu is not a multiple of %zu, which the program needs (a call of "
        "it takes the normal choice)\n",
        sh->bytes, sh->sched_count, msccl_count_unit(p, o->nranks));
    return;
  }
  schedule_t *s = calloc((size_t)o->nranks, sizeof *s);
  if (!s) {
    fail(t, "weft-sim: out of memory\n");
    return;
  }
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
    fail(t, "weft-sim: %s, %zu bytes: %s\n", o->algo_file, sh->bytes, err_last());
    return;
  }
  char line[256];
  simrep_row(line, sizeof line, sh, o->dtype, WEFT_ALGO_AUTO, o->coll, o->nranks, r.time, -1);
  char *name = strstr(line, " auto ");
  if (name) memcpy(name + 1, "file", 4); /* the algorithm column: the program's */
  add(t, "%s", line);
}

/* Every row of the run, in print order, and the workers that fill them. */
typedef struct {
  simrep_shape_t shape;
  const algo_entry_t *entry; /* NULL: the program's row */
  row_text_t text;
  int done;
} job_t;

typedef struct {
  const simcli_t *o;
  const msccl_program_t *prog;
  job_t *jobs;
  int njobs, next, stop;
  pthread_mutex_t lock;
  pthread_cond_t done;
} jobs_t;

static void run_job(jobs_t *js, job_t *j) {
  if (j->entry)
    row(js->o, j->entry, &j->shape, &j->text);
  else
    program_row(js->o, js->prog, &j->shape, &j->text);
}

static void *worker(void *arg) {
  jobs_t *js = arg;
  pthread_mutex_lock(&js->lock);
  while (!js->stop && js->next < js->njobs) {
    job_t *j = &js->jobs[js->next++];
    pthread_mutex_unlock(&js->lock);
    run_job(js, j);
    pthread_mutex_lock(&js->lock);
    j->done = 1;
    pthread_cond_broadcast(&js->done);
  }
  pthread_mutex_unlock(&js->lock);
  return NULL;
}

/* Prints row i once it is done; 1 if it failed (then the others stop being started). */
static int print_job(jobs_t *js, int i) {
  job_t *j = &js->jobs[i];
  pthread_mutex_lock(&js->lock);
  while (!j->done) pthread_cond_wait(&js->done, &js->lock);
  if (j->text.failed) js->stop = 1;
  pthread_mutex_unlock(&js->lock);
  if (j->text.failed) return fputs(j->text.err, stderr), 1;
  fwrite(j->text.out, 1, j->text.len, stdout);
  fflush(stdout);
  return 0;
}

/* The rows of the run: sizes in order, and at each size the table's algorithms in order. */
static int list_jobs(const simcli_t *o, const msccl_program_t *prog, jobs_t *js) {
  size_t esize = weft_dtype_size(o->dtype);
  simrep_sizes_t it;
  simrep_shape_t sh;
  int cap = 0;
  simrep_sizes_begin(&it, o->minbytes, o->maxbytes, o->stepfactor, o->stepbytes);
  while (simrep_sizes_next(&it, o->coll, o->nranks, esize, &sh)) {
    for (int i = prog ? -1 : 0; i < (prog ? 0 : algo_count()); i++) {
      const algo_entry_t *e = i < 0 ? NULL : algo_at(i);
      if (e && !(e->coll == o->coll && (o->algo == SIMCLI_ALL_ALGOS || e->algo == o->algo)))
        continue;
      if (js->njobs == cap) {
        cap = cap ? 2 * cap : 64;
        job_t *v = realloc(js->jobs, sizeof *v * (size_t)cap);
        if (!v) return fprintf(stderr, "weft-sim: out of memory\n"), 1;
        js->jobs = v;
      }
      js->jobs[js->njobs++] = (job_t){.shape = sh, .entry = e};
    }
  }
  return 0;
}

static int run_jobs(simcli_t *o, const msccl_program_t *prog) {
  jobs_t js = {.o = o, .prog = prog};
  if (o->model.replay == SIM_REPLAY_ESTIMATE &&
      !(o->model.estimate_cache = sim_estimate_cache_create()))
    return fprintf(stderr, "weft-sim: out of memory\n"), 1;
  if (list_jobs(o, prog, &js))
    return free(js.jobs), sim_estimate_cache_free(o->model.estimate_cache), 1;
  int failed = 0;
  long cores = sysconf(_SC_NPROCESSORS_ONLN);
  int nthreads = o->trace ? 0 : (o->jobs > 0 ? o->jobs : (cores > 0 ? (int)cores : 1));
  if (nthreads > js.njobs) nthreads = js.njobs;
  if (nthreads <= 1) {
    /* One at a time on this thread: a trace prints its messages before its row. */
    for (int i = 0; i < js.njobs && !failed; i++) {
      run_job(&js, &js.jobs[i]);
      js.jobs[i].done = 1;
      failed = print_job(&js, i);
    }
    sim_estimate_cache_free(o->model.estimate_cache);
    return free(js.jobs), failed;
  }
  pthread_mutex_init(&js.lock, NULL);
  pthread_cond_init(&js.done, NULL);
  pthread_t *t = calloc((size_t)nthreads, sizeof *t);
  int started = 0;
  for (; t && started < nthreads; started++)
    if (pthread_create(&t[started], NULL, worker, &js) != 0) break;
  if (started == 0) {
    fprintf(stderr, "weft-sim: cannot start a worker thread (try -j 1)\n");
    failed = 1;
  }
  for (int i = 0; i < js.njobs && !failed; i++) failed = print_job(&js, i);
  pthread_mutex_lock(&js.lock);
  js.stop = 1;
  pthread_mutex_unlock(&js.lock);
  for (int i = 0; i < started; i++) pthread_join(t[i], NULL);
  free(t);
  pthread_cond_destroy(&js.done);
  pthread_mutex_destroy(&js.lock);
  free(js.jobs);
  sim_estimate_cache_free(o->model.estimate_cache);
  return failed;
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
  int failed = run_jobs(&o, prog);
  msccl_free(prog);
  simcli_free(&o);
  return failed;
}
