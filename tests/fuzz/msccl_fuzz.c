/* msccl_fuzz.c -- MSCCL programs (collectives/msccl_import.c over collectives/xml_reader.c). The
 * input is the file's text. Reading either fails with WEFT_ERR_INVALID_ARGUMENT (or out of memory)
 * and a message, or gives a program whose every rank's schedule, for the smallest count it runs,
 * builds and passes sched_validate (msccl_build runs it). */
#include <string.h>

#include "collectives/msccl_import.h"
#include "common/error.h"
#include "tests/fuzz/fuzz.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  msccl_program_t *p = NULL;
  err_clear();
  weft_result_t res = msccl_parse((const char *)data, size, "fuzz.xml", &p);
  if (res != WEFT_SUCCESS) {
    FUZZ_CHECK(res == WEFT_ERR_INVALID_ARGUMENT || res == WEFT_ERR_NO_MEMORY);
    FUZZ_CHECK(err_last()[0] != 0);
    FUZZ_CHECK(p == NULL);
    return 0;
  }
  int n = msccl_ngpus(p);
  weft_coll_t coll = msccl_coll(p);
  /* The smallest count msccl_applies accepts: try the first few. */
  size_t count = 0;
  for (size_t c = 1; c <= 64 && count == 0; c++) {
    int use = 0;
    if (msccl_applies(p, coll, n, c, &use) == WEFT_SUCCESS && use) count = c;
  }
  for (int r = 0; r < n && r < 16 && count > 0; r++)
    for (int in_place = 0; in_place < 2; in_place++) {
      sched_args_t a;
      memset(&a, 0, sizeof a);
      a.coll = coll;
      a.rank = r;
      a.nranks = n;
      a.count = count;
      a.in_place = in_place;
      schedule_t s;
      res = msccl_build(p, &s, &a);
      FUZZ_CHECK(res == WEFT_SUCCESS || res == WEFT_ERR_INVALID_ARGUMENT ||
                 res == WEFT_ERR_NO_MEMORY);
      if (res == WEFT_SUCCESS) sched_free(&s);
    }
  msccl_free(p);
  return 0;
}
