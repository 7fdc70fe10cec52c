/* goal_main.c -- weft-sim-goal: one call's schedules as GOAL text for LogGOPSim, with weft-sim's
 * time for the same call and the LogGOPSim parameters that match its model. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/error.h"
#include "tools/sim/cli.h"
#include "tools/sim/goal.h"
#include "tools/sim/report.h"
#include "tools/sim/sim.h"

/* GOAL times are integers: picoseconds keep a 10 GB/s beta (100 ps per byte) exact. */
static const double kUnit = 1e-12;

static void usage(FILE *f) {
  fprintf(f,
          "usage: weft-sim-goal OUT.goal [weft-sim flags]\n"
          "Writes the schedules of one call (-C, -A, -p, size -b) as GOAL text to OUT.goal,\n"
          "prints weft-sim's time for it and LogGOPSim's matching parameters (times in ps).\n"
          "All of weft-sim's flags apply; -A must name one algorithm, -b one size.\n");
}

int main(int argc, char **argv) {
  if (argc >= 2 && (strcmp(argv[1], "-h") == 0 || strcmp(argv[1], "--help") == 0)) {
    usage(stdout);
    return 0;
  }
  if (argc < 2 || argv[1][0] == '-') {
    usage(stderr);
    return 2;
  }
  simcli_t o;
  char err[512];
  /* simcli_parse reads argv[1..argc): hand it the flags after OUT.goal. */
  int rc = simcli_parse(argc - 1, (const char *const *)argv + 1, &o, err, sizeof err);
  if (rc == SIMCLI_HELP) return usage(stdout), simcli_usage(stdout), 0;
  if (rc != SIMCLI_OK) {
    fprintf(stderr, "weft-sim-goal: %s\n", err);
    return 2;
  }
  if (o.algo == SIMCLI_ALL_ALGOS) {
    fprintf(stderr, "weft-sim-goal: -A must name one algorithm\n");
    return 2;
  }
  size_t esize = o.coll == WEFT_COLL_BARRIER ? 1 : weft_dtype_size(o.dtype);
  simrep_shape_t sh = simrep_shape(o.coll, o.nranks, weft_dtype_size(o.dtype), o.minbytes);
  sim_call_t call = {o.coll, o.algo, o.nranks, sh.sched_count, o.dtype, simcli_root(&o)};
  sim_result_t r;
  if (sim_run(&o.model, &call, NULL, NULL, &r) != WEFT_SUCCESS) {
    fprintf(stderr, "weft-sim-goal: %s\n", err_last());
    return 1;
  }
  schedule_t *scheds = calloc((size_t)o.nranks, sizeof *scheds);
  FILE *out = fopen(argv[1], "w");
  if (!scheds || !out) {
    fprintf(stderr, "weft-sim-goal: cannot write %s\n", argv[1]);
    free(scheds);
    if (out) fclose(out);
    return 1;
  }
  goal_stats_t st;
  weft_result_t res = goal_build(&o.model, &call, scheds);
  if (res == WEFT_SUCCESS) {
    res = goal_write(out, &o.model, o.nranks, esize, scheds, kUnit, &st);
    goal_free(scheds, o.nranks);
  }
  free(scheds);
  if (fclose(out) != 0 && res == WEFT_SUCCESS)
    res = WEFT_ERR(WEFT_ERR_SYSTEM, "weft-sim-goal: closing %s failed", argv[1]);
  if (res != WEFT_SUCCESS) {
    fprintf(stderr, "weft-sim-goal: %s\n", err_last());
    return 1;
  }
  goal_loggp_t p = goal_loggp(&o.model, kUnit);
  printf("# %s %s, %d ranks, %zu bytes: %ld sends, %ld recvs, %ld calcs -> %s\n",
         weft_coll_name(o.coll), weft_algo_name(o.algo), o.nranks, sh.bytes, st.sends, st.recvs,
         st.calcs, argv[1]);
  printf("weft-sim: %.0f ps (%ld messages)\n", r.time / kUnit, r.messages);
  printf("LogGOPSim: -L %ld -o %ld -g %ld -G %ld -O %ld -S %ld\n", p.L, p.o, p.g, p.G, p.O, p.S);
  return 0;
}
