/* hello.c -- a program built against an installed weft, the way a user's would be: includes
 * <weft.h>, links -lweft, joins the job weft-run describes and checks one all-reduce. */
#include <stdio.h>
#include <weft.h>

int main(void) {
  /* The header and the library it loaded must be the same release. */
  if (weft_version() != WEFT_VERSION_CODE) {
    fprintf(stderr, "hello: weft_version() %d, weft.h says %d\n", weft_version(),
            WEFT_VERSION_CODE);
    return 1;
  }
  weft_comm_t *comm;
  if (weft_comm_init_env(&comm) != WEFT_SUCCESS) {
    fprintf(stderr, "hello: %s\n", weft_last_error());
    return 1;
  }
  int rank = 0, size = 0;
  weft_comm_rank(comm, &rank);
  weft_comm_size(comm, &size);
  enum { N = 1000 };
  static float x[N];
  for (int i = 0; i < N; i++) x[i] = (float)(rank + 1 + i);
  if (weft_all_reduce(x, x, N, WEFT_FLOAT32, WEFT_SUM, comm, NULL) != WEFT_SUCCESS) {
    fprintf(stderr, "hello: %s\n", weft_last_error());
    weft_comm_abort(comm);
    return 1;
  }
  for (int i = 0; i < N; i++) {
    float want = (float)(size * (size + 1) / 2 + size * i);
    if (x[i] != want) {
      fprintf(stderr, "hello: rank %d: x[%d] = %g, want %g\n", rank, i, x[i], want);
      weft_comm_abort(comm);
      return 1;
    }
  }
  printf("hello: rank %d of %d: all_reduce correct (weft %d)\n", rank, size, weft_version());
  return weft_comm_destroy(comm) == WEFT_SUCCESS ? 0 : 1;
}
