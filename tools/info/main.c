/* main.c -- weft-info: what weft finds on this machine (build, transports, knobs, the algorithm
 * choice), as text or --json. Every probe is bounded in time and none is fatal. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "collectives/cost_constants.h"
#include "tools/info/info.h"

static const char *no_env(void *ctx, const char *name) {
  (void)ctx;
  (void)name;
  return NULL;
}

static void usage(FILE *f) {
  fprintf(f,
          "usage: weft-info [--json] [--ranks N] [--transport T]\n"
          "\n"
          "Prints what weft finds on this machine: its version and build, whether each\n"
          "transport (tcp, shm, cuda_ipc, staged, rdma) can run here and why not, the WEFT_*\n"
          "variables of the environment with their effective values (unknown ones flagged),\n"
          "and the algorithm the cost model picks for all_reduce at 1 KiB, 1 MiB and 256 MiB.\n"
          "\n"
          "  --json          one JSON object, for tools\n"
          "  --ranks N       ranks on one host for the algorithm choice (default 8)\n"
          "  --transport T   what joins them: tcp, shm, cuda_ipc, staged or rdma (default shm)\n"
          "  -h, --help      this text\n");
}

int main(int argc, char **argv) {
  int json = 0, nranks = 8;
  const char *transport = "shm";
  for (int i = 1; i < argc; i++) {
    const char *a = argv[i];
    if (strcmp(a, "--json") == 0) {
      json = 1;
    } else if (strcmp(a, "--ranks") == 0 || strcmp(a, "--transport") == 0) {
      if (i + 1 >= argc) {
        fprintf(stderr, "weft-info: %s needs a value\n", a);
        return 2;
      }
      const char *v = argv[++i];
      if (a[2] == 'r') {
        char *end;
        long n = strtol(v, &end, 10);
        if (*end || end == v || n < 1 || n > 1 << 20) {
          fprintf(stderr, "weft-info: --ranks %s: want a number of ranks from 1 to %d\n", v,
                  1 << 20);
          return 2;
        }
        nranks = (int)n;
      } else {
        transport = v;
      }
    } else if (strcmp(a, "-h") == 0 || strcmp(a, "--help") == 0) {
      usage(stdout);
      return 0;
    } else {
      fprintf(stderr, "weft-info: unknown argument '%s'\n", a);
      usage(stderr);
      return 2;
    }
  }
  if (cost_transport_from_name(transport) == COST_NUM_TRANSPORTS) {
    fprintf(stderr, "weft-info: --transport %s: want tcp, shm, cuda_ipc, staged or rdma\n",
            transport);
    return 2;
  }

  /* The whole environment as a communicator's init reads it; on a bad value, the defaults (each
   * knob is then shown on its own, with its own error). */
  weft_config_t cfg;
  char cfg_error[1024] = "";
  if (config_load(&cfg, NULL, NULL) != WEFT_SUCCESS) {
    snprintf(cfg_error, sizeof cfg_error, "%s", weft_last_error());
    config_load(&cfg, no_env, NULL);
  }

  emit_t e;
  emit_init(&e, stdout, json);
  info_build(&e);
  info_transports(&e, &cfg);
  info_knobs(&e, cfg_error);
  info_algorithms(&e, &cfg, nranks, transport);
  emit_finish(&e);
  memset(&cfg, 0, sizeof cfg); /* the job token */
  return 0;
}
