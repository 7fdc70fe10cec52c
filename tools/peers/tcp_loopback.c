/* tcp_loopback.c -- single-stream TCP throughput through 127.0.0.1: one sender, one receiver, 1 GiB.
 * Also prints the CPU both used (cores busy on average): the limit in compare.sh scales by it. */
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include "peer_common.h"

#define TOTAL ((size_t)1 << 30)
#define CHUNK ((size_t)1 << 20) /* 1 MiB writes: large enough that syscall count does not matter */

int main(void) {
  int lfd = socket(AF_INET, SOCK_STREAM, 0);
  struct sockaddr_in addr = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
  socklen_t len = sizeof addr;
  if (bind(lfd, (struct sockaddr *)&addr, len) || listen(lfd, 1) ||
      getsockname(lfd, (struct sockaddr *)&addr, &len)) {
    perror("tcp_loopback: listen");
    return 1;
  }
  char *buf = malloc(CHUNK);
  memset(buf, 1, CHUNK);
  pid_t pid = fork(); /* the sender is a separate process, as ranks are */
  if (pid == 0) {
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    if (connect(fd, (struct sockaddr *)&addr, len)) _exit(1);
    for (size_t sent = 0; sent < TOTAL;) {
      ssize_t n = write(fd, buf, CHUNK < TOTAL - sent ? CHUNK : TOTAL - sent);
      if (n <= 0) _exit(1);
      sent += (size_t)n;
    }
    close(fd);
    _exit(0);
  }
  int fd = accept(lfd, NULL, NULL);
  double t0 = peer_now_us();
  size_t got = 0;
  for (ssize_t n; (n = read(fd, buf, CHUNK)) > 0;) got += (size_t)n;
  double us = peer_now_us() - t0;
  int status;
  waitpid(pid, &status, 0);
  if (got != TOTAL) {
    fprintf(stderr, "tcp_loopback: received %zu of %zu bytes\n", got, TOTAL);
    return 1;
  }
  /* The timed part dominates: setup before accept() is a few syscalls. */
  struct rusage self, child;
  getrusage(RUSAGE_SELF, &self);
  getrusage(RUSAGE_CHILDREN, &child);
  double cpu_us = (self.ru_utime.tv_sec + self.ru_stime.tv_sec + child.ru_utime.tv_sec +
                   child.ru_stime.tv_sec) * 1e6 +
                  self.ru_utime.tv_usec + self.ru_stime.tv_usec + child.ru_utime.tv_usec +
                  child.ru_stime.tv_usec;
  printf("tcp_loopback_GBps %.3f cores_busy %.2f\n", got / us / 1e3, cpu_us / us);
  return 0;
}
