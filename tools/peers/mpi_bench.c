/* mpi_bench.c -- times MPI_Allreduce (float32 sum, in place) with the rows of peer_common.h. */
#include <mpi.h>

#include "peer_common.h"

int main(int argc, char **argv) {
  MPI_Init(&argc, &argv);
  int rank, nranks;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &nranks);
  peer_args_t a = peer_parse_args(argc, argv);
  const char *variant = getenv("PEER_VARIANT"); /* set by compare.sh: which mpirun flags */
  if (rank == 0) peer_header("openmpi", variant ? variant : "default", nranks);
  float *buf = malloc(a.maxbytes), *pristine = malloc(a.maxbytes);
  double *t = malloc(sizeof *t * peer_max_iters(&a));
  peer_fill(pristine, a.maxbytes / sizeof(float), rank);
  for (size_t bytes = a.minbytes; bytes <= a.maxbytes; bytes *= 2) {
    size_t count = bytes / sizeof(float);
    int iters = peer_iters(&a, bytes);
    for (int i = -a.warmup; i < iters; i++) {
      /* In place like Gloo and torch; refill outside the timed region so sums never overflow. */
      memcpy(buf, pristine, bytes);
      MPI_Barrier(MPI_COMM_WORLD);
      double t0 = peer_now_us();
      MPI_Allreduce(MPI_IN_PLACE, buf, (int)count, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
      if (i >= 0) t[i] = peer_now_us() - t0;
    }
    long wrong = peer_check(buf, count, nranks), all_wrong;
    MPI_Allreduce(MPI_IN_PLACE, t, iters, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
    MPI_Allreduce(&wrong, &all_wrong, 1, MPI_LONG, MPI_SUM, MPI_COMM_WORLD);
    if (rank == 0) peer_row(bytes, iters, peer_median(t, iters), nranks, all_wrong);
  }
  free(buf), free(pristine), free(t);
  MPI_Finalize();
  return 0;
}
