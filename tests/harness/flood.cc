// flood.cc -- the stranger helper of flood.h.
#include "tests/harness/flood.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <vector>

namespace {

long now_ms() {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return ts.tv_sec * 1000L + ts.tv_nsec / 1000000L;
}

void nap_ms(int ms) {
  struct timespec ts = {ms / 1000, (ms % 1000) * 1000000L};
  while (nanosleep(&ts, &ts) != 0 && errno == EINTR) {
  }
}

// 0: connected, 1: still connecting, -1: failed (refused: nobody listens yet).
int connect_state(int fd) {
  struct pollfd p = {fd, POLLOUT, 0};
  if (poll(&p, 1, 0) <= 0) return 1;
  int err = 0;
  socklen_t len = sizeof err;
  getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &len);
  return err == 0 ? 0 : -1;
}

[[noreturn]] void helper(int port, int count, FloodKind kind, const unsigned char* bytes, int len,
                         int ready) {
  prctl(PR_SET_PDEATHSIG, SIGKILL);  // never outlive the test
  struct rlimit rl;
  // The test's own sockets must not stay open in here: a test that closes one expects its peer
  // to see it closed.
  if (getrlimit(RLIMIT_NOFILE, &rl) == 0)
    for (rlim_t fd = 3; fd < rl.rlim_cur && fd < 65536; fd++)
      if (static_cast<int>(fd) != ready) close(static_cast<int>(fd));
  if (getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur < rl.rlim_max) {
    rl.rlim_cur = rl.rlim_max;
    setrlimit(RLIMIT_NOFILE, &rl);
  }
  struct sockaddr_in to = {};
  to.sin_family = AF_INET;
  to.sin_port = htons(static_cast<uint16_t>(port));
  to.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  std::vector<int> fds;  // -1 where a socket is still to be (re)opened
  fds.assign(static_cast<size_t>(count), -1);
  std::vector<bool> up(fds.size(), false);
  long first = -1;
  int established = 0;
  bool told = false;
  // Open everything, retrying refusals (the listener may not exist yet) until the signal.
  while (!told) {
    for (size_t i = 0; i < fds.size(); i++) {
      if (up[i]) continue;
      if (fds[i] < 0) {
        fds[i] = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
        if (fds[i] < 0) continue;  // out of descriptors: hold what we have
        if (connect(fds[i], reinterpret_cast<sockaddr*>(&to), sizeof to) == 0) {
          up[i] = true;
          established++;
          continue;
        }
        if (errno != EINPROGRESS) {
          close(fds[i]);
          fds[i] = -1;
          continue;
        }
      }
      int st = connect_state(fds[i]);
      if (st == 0) {
        up[i] = true;
        established++;
      } else if (st < 0) {
        close(fds[i]);
        fds[i] = -1;
      }
    }
    if (established > 0 && first < 0) first = now_ms();
    if (established == count || (first >= 0 && now_ms() - first > 3000)) {
      int n = established;
      (void)!write(ready, &n, sizeof n);
      told = true;
    } else {
      nap_ms(established == 0 ? 20 : 5);
    }
  }
  for (int sent = 0; kind == kFloodSlow && sent < len; sent++) {
    for (size_t i = 0; i < fds.size(); i++)
      if (up[i]) (void)!send(fds[i], bytes + sent, 1, MSG_NOSIGNAL | MSG_DONTWAIT);
    nap_ms(100);
  }
  for (;;) pause();
}

}  // namespace

Flood flood_start(int port, int count, FloodKind kind, const unsigned char* slow_bytes,
                  int slow_len) {
  Flood f;
  int p[2];
  if (pipe2(p, O_CLOEXEC) != 0) return f;
  pid_t pid = fork();
  if (pid == 0) {
    close(p[0]);
    helper(port, count, kind, slow_bytes, slow_len, p[1]);
  }
  close(p[1]);
  f.pid = pid;
  f.ready_fd = p[0];
  return f;
}

int flood_wait_ready(Flood* f, int timeout_ms) {
  if (f->opened > 0) return f->opened;
  struct pollfd p = {f->ready_fd, POLLIN, 0};
  if (poll(&p, 1, timeout_ms) <= 0) return -1;
  int n = -1;
  if (read(f->ready_fd, &n, sizeof n) != static_cast<ssize_t>(sizeof n)) return -1;
  f->opened = n;
  return n;
}

void flood_stop(Flood* f) {
  if (f->pid > 0) {
    kill(f->pid, SIGKILL);
    waitpid(f->pid, nullptr, 0);
    f->pid = -1;
  }
  if (f->ready_fd >= 0) close(f->ready_fd);
  f->ready_fd = -1;
}
