/* Times weft_comm_init of a second communicator once every rank is up (the first one syncs). */
#include <arpa/inet.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>
#include "include/weft.h"
static double now(void) { struct timespec t; clock_gettime(CLOCK_MONOTONIC, &t); return t.tv_sec + t.tv_nsec * 1e-9; }
static int free_port(void) {
  int s = socket(AF_INET, SOCK_STREAM, 0); struct sockaddr_in a = {0}; socklen_t l = sizeof a;
  a.sin_family = AF_INET; a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  bind(s, (struct sockaddr *)&a, sizeof a); getsockname(s, (struct sockaddr *)&a, &l); close(s);
  return ntohs(a.sin_port);
}
int main(int argc, char **argv) {
  int iters = argc > 1 ? atoi(argv[1]) : 5;
  weft_comm_t *a;
  if (weft_comm_init_env(&a)) { fprintf(stderr, "init: %s\n", weft_last_error()); return 1; }
  int rank, n; weft_comm_rank(a, &rank); weft_comm_size(a, &n);
  for (int i = 0; i < iters; i++) {
    int port = rank == 0 ? free_port() : 0;
    weft_broadcast(&port, &port, 1, WEFT_INT32, 0, a, NULL);
    weft_barrier(a, NULL);
    double t0 = now();
    weft_comm_t *b;
    if (weft_comm_init(&b, n, rank, "127.0.0.1", port)) { fprintf(stderr, "init2: %s\n", weft_last_error()); return 1; }
    double dt = now() - t0;
    weft_comm_destroy(b);
    weft_all_reduce(&dt, &dt, 1, WEFT_FLOAT64, WEFT_MAX, a, NULL);
    if (rank == 0) printf("init_ms %.3f\n", dt * 1e3);
  }
  weft_comm_destroy(a);
  return 0;
}
