/* weft_run.h -- private to weft-run: options, job id and the per-rank output streams. */
#ifndef WEFT_TOOLS_WEFT_RUN_H_
#define WEFT_TOOLS_WEFT_RUN_H_

#include <sched.h>
#include <stddef.h>
#include <stdio.h>
#include <sys/types.h>

/* Exit codes of the launcher itself; a rank's own code is reported, never passed through. */
#define WR_EXIT_OK 0
#define WR_EXIT_RANK_FAILED 1
#define WR_EXIT_USAGE 2
#define WR_EXIT_TIMEOUT 124

#define WR_JOB_ID_MAX 64
#define WR_TOKEN_BYTES 32
#define WR_ERR_MAX 512
#define WR_PATH_MAX 4096

/* --nccl: how the ranks get weft's libnccl.so.2 in place of NVIDIA's. */
enum { WR_NCCL_OFF = 0, WR_NCCL_AUDIT, WR_NCCL_PRELOAD };

/* --bind: where each rank may run. */
enum { WR_BIND_NONE = 0, WR_BIND_CORE };

typedef struct {
  int nproc;               /* ranks on this node */
  int nnodes;              /* nodes in the job */
  int node_rank;           /* this node, in [0, nnodes) */
  const char *master_addr; /* where rank 0 listens */
  int master_port;         /* 0 until chosen */
  int prefix;              /* 0 with --no-prefix */
  double timeout_s;        /* 0 = no limit */
  char **argv;             /* program and its arguments, NULL-terminated (inside main's argv) */
  char job_id[WR_JOB_ID_MAX];
  /* WEFT_JOB_TOKEN weft-run made for this job's ranks (hex of 32 random bytes), "" when it passes
   * on the WEFT_JOB_TOKEN or WEFT_JOB_TOKEN_FILE it was given, or sets none (M > 1). */
  char job_token[2 * WR_TOKEN_BYTES + 1];
  int nccl;                     /* WR_NCCL_*: LD_AUDIT (the default of --nccl) or LD_PRELOAD */
  const char *nccl_library;     /* --nccl-library PATH, or NULL */
  char nccl_lib[WR_PATH_MAX];   /* weft's libnccl.so.2, once wr_nccl_resolve found it */
  char nccl_audit[WR_PATH_MAX]; /* libweft_nccl_audit.so beside it (WR_NCCL_AUDIT) */
  int bind;                     /* WR_BIND_* */
  cpu_set_t *bind_sets;         /* WR_BIND_CORE: local rank i's CPUs, nproc of them */
} wr_opts;

/* Parses the command line into `o`. Returns WR_EXIT_OK to go on, WR_EXIT_USAGE with a message in
 * `err`, or -1 when --help was given (usage already printed). */
int wr_parse_opts(int argc, char **argv, wr_opts *o, char *err, size_t errlen);

/* Chooses the master port (if none was given) and the job id. Returns WR_EXIT_OK or
 * WR_EXIT_USAGE with a message in `err`. */
int wr_finish_opts(wr_opts *o, char *err, size_t errlen);

void wr_print_usage(FILE *f);

/* --nccl (weft_run_nccl.c): finds weft's libnccl.so.2 (--nccl-library, else $WEFT_NCCL_LIBRARY,
 * else where weft-run's own install layout puts it) and, for LD_AUDIT, the audit module beside it.
 * Returns WR_EXIT_OK or WR_EXIT_USAGE with a message in `err`. */
int wr_nccl_resolve(wr_opts *o, char *err, size_t errlen);

/* In a rank, before exec: LD_AUDIT (or LD_PRELOAD) gets weft's file appended to what it held, and
 * WEFT_NCCL_LIBRARY names the library the audit module is to load. */
void wr_nccl_setenv(const wr_opts *o);

/* The cores among `allowed`, each as its set of logical CPUs (hardware threads of one core
 * together, by sysfs_cpu/cpuN/topology), in order of their lowest CPU, into cores[0..max).
 * Returns how many there are, max + 1 where there are more. */
int wr_bind_cores(const cpu_set_t *allowed, const char *sysfs_cpu, cpu_set_t *cores, int max);

/* --bind core: gives each local rank a core of the launcher's CPU set (o->bind_sets); refuses
 * more ranks than cores. Does nothing for --bind none. */
int wr_bind_plan(wr_opts *o, char *err, size_t errlen);

/* In a rank's child before exec: restricts it to its planned CPUs. 0, or -1 with errno. */
int wr_bind_rank(const wr_opts *o, int local);

/* Forks local rank `local` with its environment set, stdout and stderr into new pipes whose read
 * ends are returned, in its own process group. Returns its pid, or -1 with a message in `err`. */
pid_t wr_spawn_rank(const wr_opts *o, int local, int *out_rd, int *err_rd, char *err,
                    size_t errlen);

/* One of a rank's output pipes, cut into lines and written with the rank's prefix. */
typedef struct {
  int fd;             /* read end of the child's pipe; -1 once closed */
  int dest;           /* STDOUT_FILENO or STDERR_FILENO */
  const char *prefix; /* "[rank R] ", or "" with --no-prefix */
  char *buf;          /* bytes read but not yet written: the start of an unfinished line */
  size_t len, cap;
} wr_stream;

void wr_stream_init(wr_stream *s, int fd, int dest, const char *prefix);

/* Reads what the pipe holds (call when poll() says it is readable) and writes every complete line.
 * At end of file it writes the unfinished last line and closes the pipe. */
void wr_stream_pump(wr_stream *s);

/* Writes the unfinished last line, if any, and closes the pipe. */
void wr_stream_close(wr_stream *s);

/* WEFT_TRACE=path (weft_run_trace.c). Before the ranks start: removes this node's rank files
 * left by an earlier run, so they cannot end up in this run's trace. */
void wr_trace_clean(const wr_opts *o, const char *path);

/* After the ranks exit: merges this node's rank files into `path` (PATH.node<K>.json with
 * --nnodes > 1) and removes them. Returns 0, or -1 with a message on stderr. */
int wr_trace_merge(const wr_opts *o, const char *path);

#endif /* WEFT_TOOLS_WEFT_RUN_H_ */
