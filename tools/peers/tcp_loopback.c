/* tcp_loopback.c -- single-stream TCP throughput through 127.0.0.1: one sender, one receiver, 1 GiB.
 * Also prints the CPU both used (cores busy on average): the limit in compare.sh scales by it.
 * `tcp_loopback cold`: the sender writes from, and the receiver reads into, 256 MiB buffers in
 * turn instead of one 1 MiB buffer each, so the socket copies run from and to memory beyond the
 * caches, as they do for a large all-reduce's buffers. */
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include "peer_common.h"

#define TOTAL ((size_t)1 << 30)
#define CHUNK ((size_t)1 << 20) /* 1 MiB writes: large enough that syscall count does not matter */

/* CPU time this process has used (user + system), in microseconds. */
static double cpu_now_us(void) {
  struct rusage u;
  getrusage(RUSAGE_SELF, &u);
  return (u.ru_utime.tv_sec + u.ru_stime.tv_sec) * 1e6 + u.ru_utime.tv_usec + u.ru_stime.tv_usec;
}

int main(int argc, char **argv) {
  size_t span = argc > 1 && !strcmp(argv[1], "cold") ? (size_t)256 << 20 : CHUNK;
  int lfd = socket(AF_INET, SOCK_STREAM, 0);
  struct sockaddr_in addr = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
  socklen_t len = sizeof addr;
  if (bind(lfd, (struct sockaddr *)&addr, len) || listen(lfd, 1) ||
      getsockname(lfd, (struct sockaddr *)&addr, &len)) {
    perror("tcp_loopback: listen");
    return 1;
  }
  int cpu_pipe[2];
  if (pipe(cpu_pipe)) return 1;
  pid_t pid = fork(); /* the sender is a separate process, as ranks are */
  if (pid == 0) {
    char *buf = malloc(span);
    memset(buf, 1, span); /* faults the pages in before timing */
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    if (connect(fd, (struct sockaddr *)&addr, len)) _exit(1);
    double cpu0 = cpu_now_us();
    for (size_t sent = 0; sent < TOTAL;) {
      ssize_t n = write(fd, buf + sent % span, CHUNK < TOTAL - sent ? CHUNK : TOTAL - sent);
      if (n <= 0) _exit(1);
      sent += (size_t)n;
    }
    close(fd);
    double cpu = cpu_now_us() - cpu0;
    _exit(write(cpu_pipe[1], &cpu, sizeof cpu) == sizeof cpu ? 0 : 1);
  }
  char *buf = malloc(span);
  memset(buf, 2, span);
  int fd = accept(lfd, NULL, NULL);
  double t0 = peer_now_us(), cpu0 = cpu_now_us();
  size_t got = 0;
  for (ssize_t n; (n = read(fd, buf + got % span, CHUNK - got % CHUNK)) > 0;) got += (size_t)n;
  double us = peer_now_us() - t0, cpu_us = cpu_now_us() - cpu0, sender_cpu = 0;
  int status;
  waitpid(pid, &status, 0);
  if (read(cpu_pipe[0], &sender_cpu, sizeof sender_cpu) != sizeof sender_cpu) return 1;
  cpu_us += sender_cpu;
  if (got != TOTAL) {
    fprintf(stderr, "tcp_loopback: received %zu of %zu bytes\n", got, TOTAL);
    return 1;
  }
  printf("tcp_loopback%s_GBps %.3f cores_busy %.2f\n", span > CHUNK ? "_cold" : "", got / us / 1e3, cpu_us / us);
  return 0;
}
