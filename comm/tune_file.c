/* tune_file.c -- reads WEFT_TUNE_FILE, the alpha-beta-gamma model that weft-bench --tune writes.
 *
 * Apart from cost_model.c, which measures the model on a live communicator, so that the parser of
 * this user-supplied file builds and is fuzzed (tests/fuzz/tune_file_fuzz.c) without the rest of
 * the library. */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "comm/comm.h"

/* fscanf reads "inf" and "nan" as numbers; a NaN passes every `< 0` test and an infinite cost
 * makes every algorithm tie, so both are refused like a negative one. */
static int usable(double x) { return isfinite(x) && x >= 0; }

weft_result_t cost_model_load(const char *path, cost_model_t *m) {
  FILE *f = fopen(path, "r");
  if (!f) return WEFT_ERR(WEFT_ERR_INVALID_ARGUMENT, "WEFT_TUNE_FILE=%s: cannot open it", path);
  char key[32];
  double v;
  int have = 0;
  while (fscanf(f, "%31s %lf", key, &v) == 2) {
    if (strcmp(key, "alpha") == 0) m->alpha = v, have |= 1;
    if (strcmp(key, "beta") == 0) m->beta = v, have |= 2;
    if (strcmp(key, "gamma") == 0) m->gamma = v, have |= 4;
  }
  fclose(f);
  if (have != 7 || !usable(m->alpha) || !usable(m->beta) || !usable(m->gamma))
    return WEFT_ERR(WEFT_ERR_INVALID_ARGUMENT,
                    "WEFT_TUNE_FILE=%s: needs lines \"alpha <s>\", \"beta <s/byte>\" and \"gamma "
                    "<s/byte>\" with finite values >= 0 (weft-bench --tune writes it)",
                    path);
  return WEFT_SUCCESS;
}
