/* fuzz.h -- internal: what the fuzz targets in tests/fuzz share.
 *
 * A target checks what its parser promises (a decoded message re-encodes to the same bytes, a
 * refusal comes with a message), not only that it survives; FUZZ_CHECK turns a broken promise into
 * a crash, so that libFuzzer keeps the input like any other crash. */
#ifndef WEFT_TESTS_FUZZ_FUZZ_H_
#define WEFT_TESTS_FUZZ_FUZZ_H_

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#define FUZZ_CHECK(cond)                                                        \
  do {                                                                          \
    if (!(cond)) {                                                              \
      fprintf(stderr, "%s:%d: broken promise: %s\n", __FILE__, __LINE__, #cond); \
      abort();                                                                  \
    }                                                                           \
  } while (0)

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#endif /* WEFT_TESTS_FUZZ_FUZZ_H_ */
