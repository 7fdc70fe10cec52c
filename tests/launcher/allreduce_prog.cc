// allreduce_prog.cc -- a rank for weft-run tests: joins from the environment, all-reduces, checks
// the sum, destroys.
#include <cstdio>
#include <vector>

extern "C" {
#include "include/weft.h"
}

int main() {
  weft_comm_t* comm;
  if (weft_comm_init_env(&comm) != WEFT_SUCCESS) {
    fprintf(stderr, "init: %s\n", weft_last_error());
    return 1;
  }
  std::vector<float> x(1000, 1.0f);
  if (weft_all_reduce(x.data(), x.data(), x.size(), WEFT_FLOAT32, WEFT_SUM, comm, nullptr) !=
      WEFT_SUCCESS) {
    fprintf(stderr, "all_reduce: %s\n", weft_last_error());
    return 1;
  }
  int n = 0;
  weft_comm_size(comm, &n);
  if (x[0] != (float)n || x[999] != (float)n) {
    fprintf(stderr, "all_reduce: got %g, want %d\n", x[0], n);
    return 1;
  }
  printf("sum ok\n");
  if (weft_comm_destroy(comm) != WEFT_SUCCESS) {
    fprintf(stderr, "destroy: %s\n", weft_last_error());
    return 1;
  }
  return 0;
}
