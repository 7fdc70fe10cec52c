/* weft_run.c -- weft-run: starts N ranks of a program the way torchrun does, and supervises them.
 *
 * One thread, one poll() loop over every rank's stdout and stderr plus a self-pipe that the signal
 * handler writes to (SIGCHLD wakes the loop to reap; SIGINT/SIGTERM/SIGHUP are forwarded). The job
 * ends at the first of: a rank failing, --timeout, or a signal to the launcher. Then every rank's
 * process group gets SIGTERM, and SIGKILL GRACE_S later. */
#include "tools/weft_run.h"

#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <poll.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define GRACE_S 3.0 /* from SIGTERM to SIGKILL */
/* After the last rank exits, how long to wait for the ends of pipes that its descendants still
 * hold (e.g. a daemon started in the background); their output after that is lost. */
#define DRAIN_S 2.0

typedef struct {
  int rank; /* global */
  pid_t pid;
  int reaped;
  int exited, code, sig; /* how it ended, once reaped */
  char prefix[32];
  wr_stream out, err;
} rank_t;

enum { CAUSE_NONE, CAUSE_RANK, CAUSE_TIMEOUT, CAUSE_SIGNAL, CAUSE_SPAWN };

typedef struct {
  wr_opts o;
  rank_t *ranks;
  int n, live;
  int cause;    /* what ended the job first */
  int failed;   /* CAUSE_RANK: index of the first rank that failed */
  int signo;    /* CAUSE_SIGNAL: the signal the launcher got */
  int stopping; /* 0: running; 1: SIGTERM (or the forwarded signal) sent; 2: SIGKILL sent */
  double kill_at;
  struct pollfd *pfd; /* room for every rank's two pipes and the self-pipe */
  wr_stream **which;  /* the stream behind each pfd entry */
} job_t;

static int wake[2] = {-1, -1};

static void on_signal(int sig) {
  int saved = errno;
  unsigned char c = (unsigned char)sig;
  ssize_t w = write(wake[1], &c, 1); /* full only if the loop is long overdue to wake anyway */
  (void)w;
  errno = saved;
}

static double now_s(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static void signal_ranks(const job_t *j, int sig) {
  for (int i = 0; i < j->n; i++)
    if (!j->ranks[i].reaped) kill(-j->ranks[i].pid, sig);
}

/* Asks every rank to stop with `sig`; SIGKILL follows GRACE_S later. */
static void stop_job(job_t *j, int cause, int sig) {
  if (j->cause == CAUSE_NONE) j->cause = cause;
  if (j->stopping != 0) return;
  signal_ranks(j, sig);
  j->stopping = 1;
  j->kill_at = now_s() + GRACE_S;
}

static void kill_job(job_t *j) {
  signal_ranks(j, SIGKILL);
  j->stopping = 2;
}

static void on_launcher_signal(job_t *j, int sig) {
  if (sig == SIGCHLD) return;
  if (j->stopping == 0) {
    j->signo = sig;
    stop_job(j, CAUSE_SIGNAL, sig);
  } else {
    kill_job(j); /* a second Ctrl-C means now */
  }
}

/* Reaps every rank that has ended. waitid(WNOWAIT) first: while the rank is a zombie its pid, and
 * so its process group id, cannot be reused, so its leftover descendants can be killed safely. */
static void reap(job_t *j) {
  for (int i = 0; i < j->n; i++) {
    rank_t *r = &j->ranks[i];
    if (r->reaped) continue;
    siginfo_t si;
    memset(&si, 0, sizeof(si));
    int gone = 0;
    if (waitid(P_PID, (id_t)r->pid, &si, WEXITED | WNOHANG | WNOWAIT) != 0) {
      if (errno != ECHILD) continue;
      /* Reaped elsewhere: cannot happen, but must not spin; reported as killed by SIGKILL. */
      r->sig = SIGKILL;
      gone = 1;
    } else if (si.si_pid == 0) {
      continue;
    } else if (si.si_code == CLD_EXITED) {
      r->exited = 1;
      r->code = si.si_status;
    } else {
      r->sig = si.si_status;
    }
    if (!(r->exited && r->code == 0) && j->cause == CAUSE_NONE) {
      j->failed = i;
      stop_job(j, CAUSE_RANK, SIGTERM);
    }
    if (j->stopping && !gone) kill(-r->pid, SIGKILL);
    if (!gone) waitpid(r->pid, NULL, 0);
    r->reaped = 1;
    j->live--;
  }
}

static int install_signals(void) {
  if (pipe(wake) != 0) return -1;
  for (int i = 0; i < 2; i++) {
    fcntl(wake[i], F_SETFD, FD_CLOEXEC);
    fcntl(wake[i], F_SETFL, fcntl(wake[i], F_GETFL) | O_NONBLOCK);
  }
  struct sigaction sa;
  memset(&sa, 0, sizeof(sa));
  sa.sa_handler = on_signal;
  sigemptyset(&sa.sa_mask);
  sa.sa_flags = SA_RESTART;
  const int sigs[] = {SIGCHLD, SIGINT, SIGTERM, SIGHUP};
  for (size_t i = 0; i < sizeof(sigs) / sizeof(sigs[0]); i++) sigaction(sigs[i], &sa, NULL);
  /* A closed stdout must not kill the launcher before it has stopped the ranks. */
  signal(SIGPIPE, SIG_IGN);
  return 0;
}

static void start_ranks(job_t *j) {
  /* Blocked while forking, so no handler runs in a child before it resets them. */
  sigset_t block, old;
  sigemptyset(&block);
  sigaddset(&block, SIGCHLD);
  sigaddset(&block, SIGINT);
  sigaddset(&block, SIGTERM);
  sigaddset(&block, SIGHUP);
  sigprocmask(SIG_BLOCK, &block, &old);
  for (int local = 0; local < j->o.nproc; local++) {
    rank_t *r = &j->ranks[local];
    r->rank = j->o.node_rank * j->o.nproc + local;
    if (j->o.prefix) snprintf(r->prefix, sizeof(r->prefix), "[rank %d] ", r->rank);
    char err[WR_ERR_MAX];
    int out_fd, err_fd;
    r->pid = wr_spawn_rank(&j->o, local, &out_fd, &err_fd, err, sizeof(err));
    if (r->pid < 0) {
      fprintf(stderr, "weft-run: cannot start %s; stopping the ranks already started\n", err);
      j->cause = CAUSE_SPAWN;
      kill_job(j);
      break;
    }
    wr_stream_init(&r->out, out_fd, STDOUT_FILENO, r->prefix);
    wr_stream_init(&r->err, err_fd, STDERR_FILENO, r->prefix);
    j->n++;
    j->live++;
  }
  sigprocmask(SIG_SETMASK, &old, NULL);
}

static int ms_until(double t, double now) {
  double ms = ceil((t - now) * 1000.0);
  return ms < 0 ? 0 : ms > 1e9 ? 1000000000 : (int)ms;
}

static int min_timeout(int a, int b) { return a < 0 || b < a ? b : a; }

static void supervise(job_t *j) {
  struct pollfd *pfd = j->pfd;
  wr_stream **which = j->which;
  double deadline = j->o.timeout_s > 0 ? now_s() + j->o.timeout_s : 0;
  double drain_until = 0;
  for (;;) {
    reap(j);
    double now = now_s();
    if (j->cause == CAUSE_NONE && deadline > 0 && now >= deadline)
      stop_job(j, CAUSE_TIMEOUT, SIGTERM);
    if (j->stopping == 1 && now >= j->kill_at) kill_job(j);
    if (j->live == 0 && drain_until == 0) drain_until = now + DRAIN_S;

    int nfds = 0;
    pfd[nfds++] = (struct pollfd){.fd = wake[0], .events = POLLIN};
    for (int i = 0; i < j->n; i++) {
      wr_stream *ss[2] = {&j->ranks[i].out, &j->ranks[i].err};
      for (int k = 0; k < 2; k++) {
        if (ss[k]->fd < 0) continue;
        which[nfds] = ss[k];
        pfd[nfds++] = (struct pollfd){.fd = ss[k]->fd, .events = POLLIN};
      }
    }
    if (j->live == 0 && (nfds == 1 || now >= drain_until)) break;

    int timeout = -1;
    if (j->live == 0) timeout = min_timeout(timeout, ms_until(drain_until, now));
    if (j->stopping == 1) timeout = min_timeout(timeout, ms_until(j->kill_at, now));
    if (j->cause == CAUSE_NONE && deadline > 0)
      timeout = min_timeout(timeout, ms_until(deadline, now));

    if (poll(pfd, (nfds_t)nfds, timeout) <= 0) continue;
    if (pfd[0].revents & POLLIN) {
      unsigned char sigs[64];
      ssize_t got = read(wake[0], sigs, sizeof(sigs));
      for (ssize_t k = 0; k < got; k++) on_launcher_signal(j, sigs[k]);
    }
    for (int k = 1; k < nfds; k++)
      if (pfd[k].revents & (POLLIN | POLLHUP | POLLERR)) wr_stream_pump(which[k]);
  }
  for (int i = 0; i < j->n; i++) {
    wr_stream_close(&j->ranks[i].out);
    wr_stream_close(&j->ranks[i].err);
  }
}

static int report(const job_t *j) {
  switch (j->cause) {
    case CAUSE_NONE:
      return WR_EXIT_OK;
    case CAUSE_RANK: {
      const rank_t *r = &j->ranks[j->failed];
      if (r->exited)
        fprintf(stderr, "weft-run: rank %d (pid %ld) failed: exited with status %d\n", r->rank,
                (long)r->pid, r->code);
      else
        fprintf(stderr, "weft-run: rank %d (pid %ld) failed: killed by signal %d (%s)\n", r->rank,
                (long)r->pid, r->sig, strsignal(r->sig));
      return WR_EXIT_RANK_FAILED;
    }
    case CAUSE_TIMEOUT:
      fprintf(stderr, "weft-run: timed out after %g s; stopped all %d ranks\n", j->o.timeout_s,
              j->n);
      return WR_EXIT_TIMEOUT;
    case CAUSE_SIGNAL:
      fprintf(stderr, "weft-run: got signal %d (%s); forwarded it to all %d ranks\n", j->signo,
              strsignal(j->signo), j->n);
      return 128 + j->signo;
    default:
      return WR_EXIT_RANK_FAILED; /* CAUSE_SPAWN, already reported */
  }
}

int main(int argc, char **argv) {
  job_t j;
  memset(&j, 0, sizeof(j));
  char err[WR_ERR_MAX];
  int rc = wr_parse_opts(argc, argv, &j.o, err, sizeof(err));
  if (rc == -1) return WR_EXIT_OK;
  if (rc == WR_EXIT_OK) rc = wr_finish_opts(&j.o, err, sizeof(err));
  if (rc != WR_EXIT_OK) {
    fprintf(stderr, "weft-run: %s\nTry 'weft-run --help'.\n", err);
    return rc;
  }
  j.ranks = calloc((size_t)j.o.nproc, sizeof(*j.ranks));
  j.pfd = calloc((size_t)j.o.nproc * 2 + 1, sizeof(*j.pfd));
  j.which = calloc((size_t)j.o.nproc * 2 + 1, sizeof(*j.which));
  if (j.ranks == NULL || j.pfd == NULL || j.which == NULL || install_signals() != 0) {
    fprintf(stderr, "weft-run: cannot set up: %s\n", strerror(errno));
    return WR_EXIT_RANK_FAILED;
  }
  const char *trace = getenv("WEFT_TRACE"); /* the ranks inherit it and write the parts */
  if (trace && *trace) wr_trace_clean(&j.o, trace);
  start_ranks(&j);
  supervise(&j);
  rc = report(&j);
  /* Whatever the ranks wrote, even when the job failed: that is when a trace helps most. */
  if (trace && *trace) wr_trace_merge(&j.o, trace);
  free(j.ranks);
  free(j.pfd);
  free(j.which);
  return rc;
}
