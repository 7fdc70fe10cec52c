/* tune_file_fuzz.c -- the WEFT_TUNE_FILE reader (comm/tune_file.c). The input is the file's text
 * (in a memfd, so nothing touches the disk). The reader either fails with
 * WEFT_ERR_INVALID_ARGUMENT and a message naming the variable, or gives a model whose alpha, beta
 * and gamma are finite and >= 0: the algorithm choice divides and compares by them. */
#include <math.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "comm/comm.h"
#include "tests/fuzz/fuzz.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  int fd = memfd_create("weft-tune", MFD_CLOEXEC);
  FUZZ_CHECK(fd >= 0);
  FUZZ_CHECK(write(fd, data, size) == (ssize_t)size);
  char path[64];
  snprintf(path, sizeof path, "/proc/self/fd/%d", fd);
  cost_model_t m = {1, 1, 1, 65536, 0};
  err_clear();
  weft_result_t res = cost_model_load(path, &m);
  if (res != WEFT_SUCCESS) {
    FUZZ_CHECK(res == WEFT_ERR_INVALID_ARGUMENT);
    FUZZ_CHECK(strstr(err_last(), "WEFT_TUNE_FILE") != NULL);
  } else {
    FUZZ_CHECK(isfinite(m.alpha) && m.alpha >= 0);
    FUZZ_CHECK(isfinite(m.beta) && m.beta >= 0);
    FUZZ_CHECK(isfinite(m.gamma) && m.gamma >= 0);
  }
  close(fd);
  return 0;
}
