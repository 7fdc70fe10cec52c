/* tune_file.c -- reads WEFT_TUNE_FILE: the alpha-beta-gamma model that weft-bench --tune writes,
 * and single constants of the committed table (collectives/cost_constants.c) to replace.
 *
 * Apart from cost_model.c, which applies the result to a communicator, so that the parser of
 * this user-supplied file builds and is fuzzed (tests/fuzz/tune_file_fuzz.c) without the rest of
 * the library: it needs cost_constants.h's names only, not its table. */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "comm/comm.h"

/* fscanf reads "inf" and "nan" as numbers; a NaN passes every `< 0` test and an infinite cost
 * makes every algorithm tie, so both are refused like a negative one. */
static int usable(double x) { return isfinite(x) && x >= 0; }

static const char *const transports[COST_NUM_TRANSPORTS] = COST_TRANSPORT_NAMES;

/* "<transport>.<intra|inter>.<alpha|beta|gamma>": where in the table, or NULL. */
static double *table_slot(cost_table_t *t, const char *key) {
  char name[32], where[32], param[32];
  const char *d1 = strchr(key, '.'), *d2 = d1 ? strchr(d1 + 1, '.') : NULL;
  if (!d1 || !d2 || (size_t)(d1 - key) >= sizeof name || (size_t)(d2 - d1 - 1) >= sizeof where ||
      strlen(d2 + 1) >= sizeof param)
    return NULL;
  snprintf(name, sizeof name, "%.*s", (int)(d1 - key), key);
  snprintf(where, sizeof where, "%.*s", (int)(d2 - d1 - 1), d1 + 1);
  snprintf(param, sizeof param, "%s", d2 + 1);
  int w = strcmp(where, "intra") == 0 ? COST_INTRA : strcmp(where, "inter") == 0 ? COST_INTER : -1;
  for (int i = 0; w >= 0 && i < COST_NUM_TRANSPORTS; i++) {
    if (strcmp(name, transports[i]) != 0) continue;
    cost_link_t *l = &t->link[i][w];
    if (strcmp(param, "alpha") == 0) return &l->alpha;
    if (strcmp(param, "beta") == 0) return &l->beta;
    if (strcmp(param, "gamma") == 0) return &l->gamma;
  }
  return NULL;
}

weft_result_t cost_tune_load(const char *path, cost_tune_t *tune) {
  FILE *f = fopen(path, "r");
  if (!f) return WEFT_ERR(WEFT_ERR_INVALID_ARGUMENT, "WEFT_TUNE_FILE=%s: cannot open it", path);
  cost_model_t *m = &tune->model;
  char key[32];
  double v;
  int have = 0;
  tune->has_model = 0;
  tune->overrides = 0;
  while (fscanf(f, "%31s %lf", key, &v) == 2) {
    if (strcmp(key, "alpha") == 0) m->alpha = v, have |= 1;
    if (strcmp(key, "beta") == 0) m->beta = v, have |= 2;
    if (strcmp(key, "gamma") == 0) m->gamma = v, have |= 4;
    if (!strchr(key, '.')) continue; /* other plain words: ignored, as always */
    double *slot = table_slot(&tune->table, key);
    if (!slot || !usable(v)) {
      fclose(f);
      return WEFT_ERR(WEFT_ERR_INVALID_ARGUMENT,
                      "WEFT_TUNE_FILE=%s: \"%s %g\" is not \"<transport>.<intra|inter>."
                      "<alpha|beta|gamma> <value>\" with transport tcp, shm, cuda_ipc, staged or "
                      "rdma and a finite value >= 0",
                      path, key, v);
    }
    *slot = v;
    tune->overrides++;
  }
  fclose(f);
  if ((have != 0 || tune->overrides == 0) &&
      (have != 7 || !usable(m->alpha) || !usable(m->beta) || !usable(m->gamma)))
    return WEFT_ERR(WEFT_ERR_INVALID_ARGUMENT,
                    "WEFT_TUNE_FILE=%s: needs lines \"alpha <s>\", \"beta <s/byte>\" and \"gamma "
                    "<s/byte>\" with finite values >= 0 (weft-bench --tune writes it), or "
                    "single constants such as \"shm.intra.beta <s/byte>\"",
                    path);
  tune->has_model = have == 7;
  return WEFT_SUCCESS;
}

weft_result_t cost_model_load(const char *path, cost_model_t *m) {
  cost_tune_t tune;
  memset(&tune, 0, sizeof tune);
  tune.model = *m;
  WEFT_CHECK(cost_tune_load(path, &tune));
  if (!tune.has_model)
    return WEFT_ERR(WEFT_ERR_INVALID_ARGUMENT,
                    "WEFT_TUNE_FILE=%s: needs lines \"alpha <s>\", \"beta <s/byte>\" and \"gamma "
                    "<s/byte>\" with finite values >= 0 (weft-bench --tune writes it)",
                    path);
  *m = tune.model;
  return WEFT_SUCCESS;
}
