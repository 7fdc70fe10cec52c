/* weft_run_opts.c -- weft-run's command line, master port choice and job id. */
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <math.h>
#include <netdb.h>
#include <netinet/in.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "tools/weft_run.h"

#define MAX_NPROC 4096
#define MAX_NNODES 65536

void wr_print_usage(FILE *f) {
  fprintf(f,
          "usage: weft-run [options] [--] program [args...]\n"
          "\n"
          "Starts nproc-per-node copies of program on this node, with RANK, WORLD_SIZE,\n"
          "LOCAL_RANK, LOCAL_WORLD_SIZE, GROUP_RANK, NODE_RANK, MASTER_ADDR, MASTER_PORT and\n"
          "WEFT_JOB_ID set as torchrun sets them. Output lines are prefixed with \"[rank R] \".\n"
          "If a rank fails, the others are stopped and weft-run exits with status 1.\n"
          "\n"
          "options:\n"
          "  -n, --nproc-per-node N  ranks on this node (default 1)\n"
          "      --nnodes M          nodes in the job (default 1)\n"
          "      --node-rank K       this node's index, 0 <= K < M (default 0)\n"
          "      --master-addr HOST  address of rank 0 (default 127.0.0.1)\n"
          "      --master-port PORT  port of rank 0 (default: a free port; required if M > 1)\n"
          "      --no-prefix         pass output lines through unchanged\n"
          "      --timeout SECONDS   stop every rank and exit with status 124 after this long\n"
          "      --bind none|core    none (the default, as torchrun): ranks run wherever the\n"
          "                          scheduler puts them; core: local rank i runs on the i-th\n"
          "                          physical core of weft-run's own CPU set (all its hardware\n"
          "                          threads), as mpirun binds; refused if ranks outnumber\n"
          "                          cores. For benchmarks: two ranks that share a core wait on\n"
          "                          each other; several jobs side by side would stack on the\n"
          "                          same cores\n"
          "      --nccl[=audit|preload]\n"
          "                          run the ranks with weft's libnccl.so.2 in place of\n"
          "                          NVIDIA's, for programs built for NCCL (torch's\n"
          "                          ProcessGroupNCCL): audit (the default) appends\n"
          "                          libweft_nccl_audit.so to LD_AUDIT, which changes\n"
          "                          only where libnccl.so.2 is loaded from, DT_RPATH or\n"
          "                          not; preload appends libnccl.so.2 to LD_PRELOAD,\n"
          "                          which maps it into every process the ranks start.\n"
          "                          Processes the ranks start inherit either variable\n"
          "      --nccl-library PATH weft's libnccl.so.2 for --nccl (implies --nccl);\n"
          "                          default $WEFT_NCCL_LIBRARY, else the first of\n"
          "                          BIN/../lib/weft (scripts/install.sh), BIN/../lib64/weft\n"
          "                          and BIN/../nccl (bazel-bin), BIN being weft-run's\n"
          "                          folder. The audit module is the libweft_nccl_audit.so\n"
          "                          beside it; the ranks get WEFT_NCCL_LIBRARY=PATH\n"
          "  -h, --help              show this help\n"
          "\n"
          "With M > 1, every node must get the same --master-addr and --master-port; the job id\n"
          "is taken from WEFT_JOB_ID if set, else derived from them.\n"
          "\n"
          "environment:\n"
          "  WEFT_TRACE=PATH         each rank writes a Chrome trace PATH.rank<R>.json when it\n"
          "                          destroys or aborts its communicator; when all have exited,\n"
          "                          weft-run merges the files into PATH (PATH.node<K>.json if\n"
          "                          M > 1), for Perfetto or chrome://tracing, and removes them;\n"
          "                          files left by an earlier run are removed before the start\n"
          "  WEFT_JOB_TOKEN=SECRET   the job's shared secret: the store and every TCP connection\n"
          "  WEFT_JOB_TOKEN_FILE=F   between ranks check that both ends know it, refusing other\n"
          "                          processes. Given either, weft-run passes it on; else with\n"
          "                          M = 1 it makes a random token per job and gives it to the\n"
          "                          ranks in their environment (never on a command line); with\n"
          "                          M > 1 set one alike on every node, or the job runs without\n"
          "                          one (any process that can reach the ports may join)\n");
}

/* Parses all of `s` as an integer in [lo, hi]. */
static int parse_int(const char *s, long lo, long hi, int *out) {
  char *end;
  errno = 0;
  long v = strtol(s, &end, 10);
  if (errno != 0 || end == s || *end != '\0' || v < lo || v > hi) return -1;
  *out = (int)v;
  return 0;
}

static int bad_int(char *err, size_t errlen, const char *opt, const char *val, long lo, long hi) {
  snprintf(err, errlen, "%s: '%s' is not an integer in [%ld, %ld]", opt, val, lo, hi);
  return WR_EXIT_USAGE;
}

enum {
  OPT_NNODES = 256,
  OPT_NODE_RANK,
  OPT_ADDR,
  OPT_PORT,
  OPT_NO_PREFIX,
  OPT_TIMEOUT,
  OPT_NCCL,
  OPT_NCCL_LIBRARY,
  OPT_BIND
};

/* The underscore spellings are torchrun's, accepted so its command lines carry over. */
static const struct option long_opts[] = {
    {"nproc-per-node", required_argument, NULL, 'n'},
    {"nproc_per_node", required_argument, NULL, 'n'},
    {"nnodes", required_argument, NULL, OPT_NNODES},
    {"node-rank", required_argument, NULL, OPT_NODE_RANK},
    {"node_rank", required_argument, NULL, OPT_NODE_RANK},
    {"master-addr", required_argument, NULL, OPT_ADDR},
    {"master_addr", required_argument, NULL, OPT_ADDR},
    {"master-port", required_argument, NULL, OPT_PORT},
    {"master_port", required_argument, NULL, OPT_PORT},
    {"no-prefix", no_argument, NULL, OPT_NO_PREFIX},
    {"timeout", required_argument, NULL, OPT_TIMEOUT},
    {"nccl", optional_argument, NULL, OPT_NCCL},
    {"nccl-library", required_argument, NULL, OPT_NCCL_LIBRARY},
    {"bind", required_argument, NULL, OPT_BIND},
    {"help", no_argument, NULL, 'h'},
    {NULL, 0, NULL, 0},
};

int wr_parse_opts(int argc, char **argv, wr_opts *o, char *err, size_t errlen) {
  memset(o, 0, sizeof(*o));
  o->nproc = 1;
  o->nnodes = 1;
  o->master_addr = "127.0.0.1";
  o->prefix = 1;

  /* "+" stops at the first non-option, so the program's own options are left alone; ":" makes a
   * missing argument distinguishable from an unknown option. */
  opterr = 0;
  int c;
  while ((c = getopt_long(argc, argv, "+:hn:", long_opts, NULL)) != -1) {
    switch (c) {
      case 'h':
        wr_print_usage(stdout);
        return -1;
      case 'n':
        if (parse_int(optarg, 1, MAX_NPROC, &o->nproc))
          return bad_int(err, errlen, "--nproc-per-node", optarg, 1, MAX_NPROC);
        break;
      case OPT_NNODES:
        if (parse_int(optarg, 1, MAX_NNODES, &o->nnodes))
          return bad_int(err, errlen, "--nnodes", optarg, 1, MAX_NNODES);
        break;
      case OPT_NODE_RANK:
        if (parse_int(optarg, 0, MAX_NNODES - 1, &o->node_rank))
          return bad_int(err, errlen, "--node-rank", optarg, 0, MAX_NNODES - 1);
        break;
      case OPT_ADDR:
        if (optarg[0] == '\0') {
          snprintf(err, errlen, "--master-addr: empty address");
          return WR_EXIT_USAGE;
        }
        o->master_addr = optarg;
        break;
      case OPT_PORT:
        if (parse_int(optarg, 1, 65535, &o->master_port))
          return bad_int(err, errlen, "--master-port", optarg, 1, 65535);
        break;
      case OPT_NO_PREFIX:
        o->prefix = 0;
        break;
      case OPT_TIMEOUT: {
        char *end;
        errno = 0;
        o->timeout_s = strtod(optarg, &end);
        if (errno != 0 || end == optarg || *end != '\0' || !isfinite(o->timeout_s) ||
            o->timeout_s <= 0) {
          snprintf(err, errlen, "--timeout: '%s' is not a positive number of seconds", optarg);
          return WR_EXIT_USAGE;
        }
        break;
      }
      case OPT_NCCL:
        if (optarg == NULL || strcmp(optarg, "audit") == 0) {
          o->nccl = WR_NCCL_AUDIT;
        } else if (strcmp(optarg, "preload") == 0) {
          o->nccl = WR_NCCL_PRELOAD;
        } else {
          snprintf(err, errlen,
                   "--nccl: '%s' is neither audit nor preload (weft's file is "
                   "named with --nccl-library PATH)",
                   optarg);
          return WR_EXIT_USAGE;
        }
        break;
      case OPT_BIND:
        if (strcmp(optarg, "none") == 0) {
          o->bind = WR_BIND_NONE;
        } else if (strcmp(optarg, "core") == 0) {
          o->bind = WR_BIND_CORE;
        } else {
          snprintf(err, errlen, "--bind: '%s' is neither none nor core", optarg);
          return WR_EXIT_USAGE;
        }
        break;
      case OPT_NCCL_LIBRARY:
        if (optarg[0] == '\0') {
          snprintf(err, errlen, "--nccl-library: empty path");
          return WR_EXIT_USAGE;
        }
        o->nccl_library = optarg;
        break;
      case ':':
        snprintf(err, errlen, "option '%s' needs a value", argv[optind - 1]);
        return WR_EXIT_USAGE;
      default:
        snprintf(err, errlen, "unknown option '%s'", argv[optind - 1]);
        return WR_EXIT_USAGE;
    }
  }
  if (optind >= argc) {
    snprintf(err, errlen, "no program given");
    return WR_EXIT_USAGE;
  }
  if (o->node_rank >= o->nnodes) {
    snprintf(err, errlen, "--node-rank %d is out of range for --nnodes %d (want 0..%d)",
             o->node_rank, o->nnodes, o->nnodes - 1);
    return WR_EXIT_USAGE;
  }
  if ((long)o->nnodes * o->nproc > 0x7fffffffL) {
    snprintf(err, errlen, "world size %d x %d is too large", o->nnodes, o->nproc);
    return WR_EXIT_USAGE;
  }
  if (o->nccl_library != NULL && o->nccl == WR_NCCL_OFF) o->nccl = WR_NCCL_AUDIT;
  o->argv = argv + optind;
  return WR_EXIT_OK;
}

/* Ports below Linux's default ephemeral range (32768-60999). A port the kernel hands out for
 * bind(0) may be taken again at once by any process's listening socket (weft's own transports
 * listen on such ports), so the master port is drawn from where the kernel does not allocate. */
#define PORT_LOW 20000
#define PORT_HIGH 32767

/* Tries random ports in [PORT_LOW, PORT_HIGH], then falls back to one the kernel picks. The port
 * is free again when the ranks start; as with torchrun, another process could take it in between. */
static int pick_port(const char *addr, char *err, size_t errlen) {
  struct addrinfo hints, *res = NULL;
  memset(&hints, 0, sizeof(hints));
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  int rc = getaddrinfo(addr, "0", &hints, &res);
  if (rc != 0) {
    snprintf(err, errlen, "--master-addr '%s': %s", addr, gai_strerror(rc));
    return -1;
  }
  int port = -1, last_errno = 0;
  for (struct addrinfo *ai = res; ai != NULL && port < 0; ai = ai->ai_next) {
    int fd = socket(ai->ai_family, ai->ai_socktype, ai->ai_protocol);
    if (fd < 0) {
      last_errno = errno;
      continue;
    }
    struct sockaddr_storage ss;
    socklen_t sl = sizeof(ss);
    unsigned seed = (unsigned)getpid() ^ (unsigned)time(NULL);
    for (int tries = 0; tries < 64; tries++) {
      int candidate = tries < 63 ? PORT_LOW + (int)(rand_r(&seed) % (PORT_HIGH - PORT_LOW + 1)) : 0;
      struct sockaddr_storage try_addr;
      memcpy(&try_addr, ai->ai_addr, ai->ai_addrlen);
      if (try_addr.ss_family == AF_INET6)
        ((struct sockaddr_in6 *)&try_addr)->sin6_port = htons((uint16_t)candidate);
      else
        ((struct sockaddr_in *)&try_addr)->sin_port = htons((uint16_t)candidate);
      if (bind(fd, (struct sockaddr *)&try_addr, ai->ai_addrlen) == 0) break;
      last_errno = errno;
      if (errno != EADDRINUSE) break;
    }
    if (getsockname(fd, (struct sockaddr *)&ss, &sl) == 0 &&
        (ss.ss_family == AF_INET6 ? ((struct sockaddr_in6 *)&ss)->sin6_port
                                  : ((struct sockaddr_in *)&ss)->sin_port) != 0) {
      port = ss.ss_family == AF_INET6 ? ntohs(((struct sockaddr_in6 *)&ss)->sin6_port)
                                      : ntohs(((struct sockaddr_in *)&ss)->sin_port);
    } else {
      last_errno = errno;
    }
    close(fd);
  }
  freeaddrinfo(res);
  if (port < 0)
    snprintf(err, errlen, "cannot pick a free port on '%s' (is it a local address?): %s", addr,
             strerror(last_errno));
  return port;
}

/* A fresh id for each single-node launch, so a rank of an earlier job that is still connecting to
 * a reused port is rejected. */
static uint64_t random_u64(void) {
  uint64_t v = 0;
  int fd = open("/dev/urandom", O_RDONLY | O_CLOEXEC);
  if (fd >= 0) {
    ssize_t n = read(fd, &v, sizeof(v));
    close(fd);
    if (n == (ssize_t)sizeof(v)) return v;
  }
  struct timespec ts;
  clock_gettime(CLOCK_REALTIME, &ts);
  return ((uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec) ^ ((uint64_t)getpid() << 32);
}

/* FNV-1a: every node computes the same id from the same master address and port. */
static uint64_t fnv1a(const char *s, uint64_t h) {
  for (; *s; s++) {
    h ^= (unsigned char)*s;
    h *= 1099511628211ull;
  }
  return h;
}

/* A fresh job token for one node's ranks. No fallback to the clock as random_u64 has: a token
 * that can be guessed is no token. */
static int make_token(wr_opts *o, char *err, size_t errlen) {
  unsigned char raw[WR_TOKEN_BYTES];
  size_t got = 0;
  int fd = open("/dev/urandom", O_RDONLY | O_CLOEXEC);
  while (fd >= 0 && got < sizeof(raw)) {
    ssize_t n = read(fd, raw + got, sizeof(raw) - got);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;
    got += (size_t)n;
  }
  int e = errno;
  if (fd >= 0) close(fd);
  if (got < sizeof(raw)) {
    snprintf(err, errlen, "cannot make a job token from /dev/urandom: %s", strerror(e));
    return WR_EXIT_USAGE;
  }
  static const char hex[] = "0123456789abcdef";
  for (size_t i = 0; i < sizeof(raw); i++) {
    o->job_token[2 * i] = hex[raw[i] >> 4];
    o->job_token[2 * i + 1] = hex[raw[i] & 15];
  }
  o->job_token[2 * sizeof(raw)] = '\0';
  memset(raw, 0, sizeof(raw));
  return WR_EXIT_OK;
}

int wr_finish_opts(wr_opts *o, char *err, size_t errlen) {
  if (wr_nccl_resolve(o, err, errlen) != WR_EXIT_OK) return WR_EXIT_USAGE;
  if (wr_bind_plan(o, err, errlen) != WR_EXIT_OK) return WR_EXIT_USAGE;
  if (o->master_port == 0) {
    if (o->nnodes > 1) {
      snprintf(err, errlen, "--master-port is required with --nnodes %d", o->nnodes);
      return WR_EXIT_USAGE;
    }
    o->master_port = pick_port(o->master_addr, err, errlen);
    if (o->master_port < 0) return WR_EXIT_USAGE;
  }

  /* A token given to weft-run is inherited by its ranks as it is. Otherwise a single node makes
   * one for its ranks; several nodes' launchers could not agree on a random one, so there the
   * user sets it (docs/reliability.md, "The job token"). */
  const char *tok = getenv("WEFT_JOB_TOKEN"), *tok_file = getenv("WEFT_JOB_TOKEN_FILE");
  int given = (tok && tok[0]) || (tok_file && tok_file[0]);
  if (o->nnodes == 1) {
    snprintf(o->job_id, sizeof(o->job_id), "%016llx", (unsigned long long)random_u64());
    return given ? WR_EXIT_OK : make_token(o, err, errlen);
  }
  const char *env = getenv("WEFT_JOB_ID");
  if (env != NULL && env[0] != '\0') {
    if (strlen(env) >= sizeof(o->job_id)) {
      snprintf(err, errlen, "WEFT_JOB_ID is longer than %d characters", WR_JOB_ID_MAX - 1);
      return WR_EXIT_USAGE;
    }
    strcpy(o->job_id, env);
    return WR_EXIT_OK;
  }
  char port[16];
  snprintf(port, sizeof(port), ":%d", o->master_port);
  uint64_t h = fnv1a(port, fnv1a(o->master_addr, fnv1a("weft-job:", 14695981039346656037ull)));
  snprintf(o->job_id, sizeof(o->job_id), "%016llx", (unsigned long long)h);
  return WR_EXIT_OK;
}
