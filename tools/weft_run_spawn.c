/* weft_run_spawn.c -- starts one rank: its own process group, output pipes and torchrun's env. */
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#ifdef __linux__
#include <sys/prctl.h>
#endif

#include "tools/weft_run.h"

static int set_cloexec(int fd) {
  int flags = fcntl(fd, F_GETFD);
  return flags < 0 ? -1 : fcntl(fd, F_SETFD, flags | FD_CLOEXEC);
}

/* A pipe whose ends do not leak into other ranks (each rank dup2()s its own write ends). */
static int make_pipe(int fds[2]) {
  if (pipe(fds) != 0) return -1;
  if (set_cloexec(fds[0]) != 0 || set_cloexec(fds[1]) != 0) {
    int e = errno;
    close(fds[0]);
    close(fds[1]);
    errno = e;
    return -1;
  }
  return 0;
}

static void set_env_int(const char *name, long v) {
  char buf[32];
  snprintf(buf, sizeof(buf), "%ld", v);
  setenv(name, buf, 1);
}

/* Runs in the child between fork() and exec(); the launcher is single-threaded, so setenv() and
 * stdio are safe here. Never returns. */
static void exec_rank(const wr_opts *o, int local, int out_fd, int err_fd, pid_t launcher) {
  /* Own group: the launcher can kill a rank together with everything it started, and a Ctrl-C in
   * the terminal reaches the launcher only, which forwards it once to every rank. */
  setpgid(0, 0);

  /* Handlers are reset by exec, but ignored signals (SIGPIPE here) and the mask would be inherited.
   */
  struct sigaction dfl;
  memset(&dfl, 0, sizeof(dfl));
  dfl.sa_handler = SIG_DFL;
  sigemptyset(&dfl.sa_mask);
  const int sigs[] = {SIGINT, SIGTERM, SIGHUP, SIGCHLD, SIGPIPE};
  for (size_t i = 0; i < sizeof(sigs) / sizeof(sigs[0]); i++) sigaction(sigs[i], &dfl, NULL);
  sigset_t none;
  sigemptyset(&none);
  sigprocmask(SIG_SETMASK, &none, NULL);

#ifdef __linux__
  /* If the launcher is killed outright (SIGKILL), no rank must outlive it. */
  prctl(PR_SET_PDEATHSIG, SIGKILL);
  if (getppid() != launcher) _exit(127);
#else
  (void)launcher;
#endif

  /* Ranks run in a background process group: reading the terminal would stop them. */
  int null_fd = open("/dev/null", O_RDONLY);
  if (null_fd >= 0 && null_fd != STDIN_FILENO) {
    dup2(null_fd, STDIN_FILENO);
    close(null_fd);
  }
  dup2(out_fd, STDOUT_FILENO);
  dup2(err_fd, STDERR_FILENO);

  int rank = o->node_rank * o->nproc + local;
  set_env_int("RANK", rank);
  set_env_int("WORLD_SIZE", (long)o->nnodes * o->nproc);
  set_env_int("LOCAL_RANK", local);
  set_env_int("LOCAL_WORLD_SIZE", o->nproc);
  set_env_int("GROUP_RANK", o->node_rank);
  set_env_int("NODE_RANK", o->node_rank);
  setenv("MASTER_ADDR", o->master_addr, 1);
  set_env_int("MASTER_PORT", o->master_port);
  setenv("WEFT_JOB_ID", o->job_id, 1);
  /* In the environment, not in argv: ps shows a command line to every user of the machine. */
  if (o->job_token[0]) setenv("WEFT_JOB_TOKEN", o->job_token, 1);
  wr_nccl_setenv(o);

  if (wr_bind_rank(o, local) != 0) {
    fprintf(stderr, "weft-run: rank %d: cannot bind to its core: %s\n", rank, strerror(errno));
    fflush(stderr);
    _exit(126);
  }

  execvp(o->argv[0], o->argv);
  int e = errno;
  fprintf(stderr, "weft-run: rank %d: cannot run '%s': %s\n", rank, o->argv[0], strerror(e));
  fflush(stderr);
  _exit(e == ENOENT ? 127 : 126); /* the shell's codes for "not found" and "not executable" */
}

pid_t wr_spawn_rank(const wr_opts *o, int local, int *out_rd, int *err_rd, char *err,
                    size_t errlen) {
  int out[2], errp[2];
  if (make_pipe(out) != 0) goto pipe_fail;
  if (make_pipe(errp) != 0) {
    int e = errno;
    close(out[0]);
    close(out[1]);
    errno = e;
    goto pipe_fail;
  }
  pid_t launcher = getpid();
  pid_t pid = fork();
  if (pid == 0) exec_rank(o, local, out[1], errp[1], launcher);
  int fork_errno = errno;
  close(out[1]);
  close(errp[1]);
  if (pid < 0) {
    close(out[0]);
    close(errp[0]);
    snprintf(err, errlen, "rank %d: fork: %s", o->node_rank * o->nproc + local,
             strerror(fork_errno));
    return -1;
  }
  /* Also set here, so the group exists before the launcher might signal it. EACCES means the child
   * already exec'd, after doing it itself. */
  setpgid(pid, pid);
  *out_rd = out[0];
  *err_rd = errp[0];
  return pid;

pipe_fail:
  snprintf(err, errlen, "rank %d: pipe: %s", o->node_rank * o->nproc + local, strerror(errno));
  return -1;
}
