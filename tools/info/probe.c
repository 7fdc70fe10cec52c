/* probe.c -- a probe in a child process: its result comes back through a pipe, and a child that
 * has not answered by the deadline is killed. */
#include "tools/info/probe.h"

#include <errno.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

static long long now_ms(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (long long)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

int probe_run(probe_fn fn, const void *arg, void *out, size_t size, int timeout_ms, char *why,
              size_t cap) {
  memset(out, 0, size);
  int fds[2];
  if (pipe(fds) != 0) {
    snprintf(why, cap, "probe not run: pipe: %s", strerror(errno));
    return -1;
  }
  fflush(NULL); /* the child must not write our buffered output a second time */
  pid_t pid = fork();
  if (pid < 0) {
    snprintf(why, cap, "probe not run: fork: %s", strerror(errno));
    close(fds[0]);
    close(fds[1]);
    return -1;
  }
  if (pid == 0) {
    close(fds[0]);
    void *buf = calloc(1, size);
    if (!buf) _exit(2);
    fn(buf, size, arg);
    const char *p = buf;
    size_t left = size;
    while (left > 0) {
      ssize_t n = write(fds[1], p, left);
      if (n < 0 && errno == EINTR) continue;
      if (n <= 0) _exit(3);
      p += n;
      left -= (size_t)n;
    }
    _exit(0);
  }
  close(fds[1]);
  size_t got = 0;
  long long deadline = now_ms() + timeout_ms;
  int timed_out = 0;
  while (got < size) {
    long long left = deadline - now_ms();
    if (left <= 0) {
      timed_out = 1;
      break;
    }
    struct pollfd pfd = {.fd = fds[0], .events = POLLIN};
    int r = poll(&pfd, 1, (int)left);
    if (r < 0 && errno == EINTR) continue;
    if (r <= 0) continue; /* the deadline check above ends the loop */
    ssize_t n = read(fds[0], (char *)out + got, size - got);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break; /* the child exited (or crashed) before answering in full */
    got += (size_t)n;
  }
  close(fds[0]);
  if (timed_out) kill(pid, SIGKILL);
  int status = 0;
  while (waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  if (got == size && !timed_out) return 0;
  memset(out, 0, size);
  if (timed_out)
    snprintf(why, cap, "no answer within %d ms (probe killed)", timeout_ms);
  else if (WIFSIGNALED(status))
    snprintf(why, cap, "probe crashed (signal %d)", WTERMSIG(status));
  else
    snprintf(why, cap, "probe ended without an answer (exit status %d)", WEXITSTATUS(status));
  return -1;
}
