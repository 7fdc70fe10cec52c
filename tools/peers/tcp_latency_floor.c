/* tcp_latency_floor.c -- the fastest a 4 KiB all-reduce can be over loopback TCP here, for scale.
 *
 * P processes, a TCP connection between every pair through 127.0.0.1 (TCP_NODELAY), run an
 * all-reduce of the whole buffer (float32 sum) with nothing else: no call description, no checks,
 * no timeouts, no library. The schedule is recursive doubling (log2 P exchanges, the default), a
 * star (every rank sends to rank 0, which folds and sends the sum back: 2 (P - 1) messages, two
 * dependent steps) or a binomial tree (reduce to rank 0, then broadcast: 2 log2 P steps). Waits
 * poll the socket and yield the core between polls (the default: the fastest way to wait with more
 * ranks than cores) or block in recv. Timed like the peers' drivers: a barrier before each
 * iteration, the slowest rank's time, median over iterations.
 * Usage: tcp_latency_floor [P=4, a power of two] [bytes=4096] [iters=2000] [rd|star|tree]
 *        [yield|block] */
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sched.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include "peer_common.h"

#define MAXP 16

static int g_flags = MSG_DONTWAIT; /* 0 where waits block */

static void xfer(int fd, char *buf, size_t len, int send_it) {
  for (size_t done = 0; done < len;) {
    ssize_t n = send_it ? send(fd, buf + done, len - done, g_flags)
                        : recv(fd, buf + done, len - done, g_flags);
    if (n > 0) done += (size_t)n;
    else if (n == 0 || (errno != EAGAIN && errno != EINTR)) _exit(3);
    else sched_yield();
  }
}

/* Sends ours and receives theirs at once: small messages fit the socket buffer, so send first. */
static void exchange(int fd, char *out, char *in, size_t len) {
  xfer(fd, out, len, 1);
  xfer(fd, in, len, 0);
}

static void fold(float *buf, const float *in, size_t count) {
  for (size_t i = 0; i < count; i++) buf[i] += in[i];
}

/* One all-reduce of buf (count floats) by `sched`, `in` the receive space. */
static void all_reduce(const char *sched, int rank, int p, const int *fd, float *buf, float *in,
                       size_t count) {
  size_t bytes = count * sizeof(float);
  if (strcmp(sched, "star") == 0) {
    if (rank > 0) {
      xfer(fd[0], (char *)buf, bytes, 1);
      xfer(fd[0], (char *)buf, bytes, 0);
      return;
    }
    for (int q = 1; q < p; q++) {
      xfer(fd[q], (char *)in, bytes, 0);
      fold(buf, in, count);
    }
    for (int q = 1; q < p; q++) xfer(fd[q], (char *)buf, bytes, 1);
  } else if (strcmp(sched, "tree") == 0) {
    int m = 1;
    for (; m < p && !(rank & m); m <<= 1) { /* gather the subtree's sums, then pass them up */
      xfer(fd[rank ^ m], (char *)in, bytes, 0);
      fold(buf, in, count);
    }
    if (m < p) {
      xfer(fd[rank ^ m], (char *)buf, bytes, 1);
      xfer(fd[rank ^ m], (char *)buf, bytes, 0);
    }
    for (m >>= 1; m >= 1; m >>= 1) xfer(fd[rank ^ m], (char *)buf, bytes, 1);
  } else {
    for (int m = 1; m < p; m <<= 1) {
      exchange(fd[rank ^ m], (char *)buf, (char *)in, bytes);
      fold(buf, in, count);
    }
  }
}

int main(int argc, char **argv) {
  int p = argc > 1 ? atoi(argv[1]) : 4;
  size_t bytes = argc > 2 ? (size_t)atol(argv[2]) : 4096;
  int iters = argc > 3 ? atoi(argv[3]) : 2000;
  const char *sched = argc > 4 ? argv[4] : "rd";
  const char *waits = argc > 5 ? argv[5] : "yield";
  if (p < 2 || p > MAXP || (p & (p - 1))) return 2;
  if (strcmp(sched, "rd") && strcmp(sched, "star") && strcmp(sched, "tree")) return 2;
  if (strcmp(waits, "yield") && strcmp(waits, "block")) return 2;
  if (strcmp(waits, "block") == 0) g_flags = 0;
  int lfd[MAXP];
  struct sockaddr_in addr[MAXP];
  for (int r = 0; r < p; r++) { /* every listener exists before any rank connects */
    lfd[r] = socket(AF_INET, SOCK_STREAM, 0);
    addr[r] = (struct sockaddr_in){.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    socklen_t len = sizeof addr[r];
    if (bind(lfd[r], (struct sockaddr *)&addr[r], len) || listen(lfd[r], MAXP) ||
        getsockname(lfd[r], (struct sockaddr *)&addr[r], &len))
      return 1;
  }
  int pipes[MAXP][2];
  for (int rank = 0; rank < p; rank++) {
    if (pipe(pipes[rank])) return 1;
    if (fork() != 0) continue;
    int fd[MAXP], one = 1;
    for (int q = 0; q < p; q++) { /* lower rank connects, higher accepts; the hello names the rank */
      if (q == rank) continue;
      if (q > rank) {
        fd[q] = socket(AF_INET, SOCK_STREAM, 0);
        if (connect(fd[q], (struct sockaddr *)&addr[q], sizeof addr[q])) _exit(1);
        if (write(fd[q], &rank, sizeof rank) != sizeof rank) _exit(1);
      }
    }
    for (int k = 0; k < rank; k++) {
      int c = accept(lfd[rank], NULL, NULL), who = -1;
      if (c < 0 || read(c, &who, sizeof who) != sizeof who || who < 0 || who >= rank) _exit(1);
      fd[who] = c;
    }
    for (int q = 0; q < p; q++)
      if (q != rank) setsockopt(fd[q], IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    size_t count = bytes / sizeof(float);
    float *buf = malloc(bytes), *in = malloc(bytes);
    double *t = malloc(sizeof(double) * (size_t)iters);
    char token[1] = {0}, sink[1];
    peer_fill(buf, count, rank);
    for (int it = 0; it < iters + 100; it++) {
      for (int m = 1; m < p; m <<= 1) exchange(fd[rank ^ m], token, sink, 1); /* barrier */
      double t0 = peer_now_us();
      all_reduce(sched, rank, p, fd, buf, in, count);
      if (it >= 100) t[it - 100] = peer_now_us() - t0;
      if (it == 0) peer_fill(buf, count, rank); /* values stay small; the first result is unchecked */
    }
    if (write(pipes[rank][1], t, sizeof(double) * (size_t)iters) < 0) _exit(1);
    _exit(0);
  }
  double *slowest = calloc((size_t)iters, sizeof(double)), *t = malloc(sizeof(double) * (size_t)iters);
  for (int rank = 0; rank < p; rank++) {
    size_t want = sizeof(double) * (size_t)iters, got = 0;
    while (got < want) {
      ssize_t n = read(pipes[rank][0], (char *)t + got, want - got);
      if (n <= 0) return 1;
      got += (size_t)n;
    }
    for (int i = 0; i < iters; i++) slowest[i] = t[i] > slowest[i] ? t[i] : slowest[i];
  }
  int ok = 1, status;
  while (wait(&status) > 0) ok &= WIFEXITED(status) && WEXITSTATUS(status) == 0;
  printf("tcp_floor_us %.1f   (%d ranks, %zu bytes, %s, %s waits, median of %d)\n",
         peer_median(slowest, iters), p, bytes, sched, waits, iters);
  return ok ? 0 : 1;
}
