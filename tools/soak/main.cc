// main.cc -- weft-soak: a randomized, seeded soak of weft's calls, and a communicator leak loop.
//
// Launched like any weft program, one process per rank:
//   weft-run -n 4 weft-soak --seed 7 --seconds 60 --transport shm
//   weft-run -n 3 weft-soak --churn 200
// Every rank derives the same calls from the seed, so the same seed and world size reproduce a
// run call for call (timing aside: a timed run stops at a call count that depends on speed;
// --calls with the count a failure names replays it). On a wrong result or error it prints
//   weft-soak FAIL seed=S call=#i rank R: <the call>: <what differed>
// and exits 1.
#include <getopt.h>
#include <sys/time.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>

#include "tools/soak/soak.h"

static void usage(FILE* f) {
  fprintf(f,
          "usage: weft-run -n N weft-soak [options]\n"
          "\n"
          "Randomized soak of weft: calls of random collective (all_reduce, broadcast, reduce,\n"
          "all_gather, reduce_scatter, gather, scatter, barrier, send/recv pairs), algorithm\n"
          "(any weft_algo_supported allows), dtype, op, count (0 to --max-count, log-uniform),\n"
          "root, in place or not, blocking or asynchronous (up to --inflight requests, completed\n"
          "in random order by weft_wait, bounded or not, or weft_test), on the world and on\n"
          "communicators split from it (by parity, leaving rank 0 out, or a dup). Every result\n"
          "is compared bit for bit with one computed on the host. The same seed and N give the\n"
          "same calls.\n"
          "\n"
          "options:\n"
          "  --seed S          the seed (default: chosen from the clock and printed)\n"
          "  --seconds T       run about T seconds (all ranks stop at the same call)\n"
          "  --calls K         run exactly K calls (default 1000 when neither is given)\n"
          "  --max-count M     elements in the largest buffer of one call (default 1048576)\n"
          "  --inflight J      asynchronous requests in flight at most (default 6)\n"
          "  --transport T     shm, tcp or auto: sets WEFT_TRANSPORT for the run\n"
          "  --churn K         instead of the soak: create a communicator, a split and a dup and\n"
          "                    destroy them, K times, and fail if open fds, threads, weft's\n"
          "                    /dev/shm entries or mappings grew, or RSS by more than 4 MiB\n"
          "                    (under ASan set ASAN_OPTIONS=quarantine_size_mb=0: freed memory\n"
          "                    held in its quarantine counts as RSS)\n"
          "  -v, --verbose     rank 0 prints every call before issuing it\n"
          "  -h, --help        this text\n"
          "\n"
          "On a failure: 'weft-soak FAIL seed=S call=#i rank R: <call>: <difference>' on stderr\n"
          "and exit status 1; rerun with the same seed and N (and --calls i+1) to reproduce it.\n"
          "Exit status 2: bad options or the communicator could not be created.\n");
}

static bool parse_num(const char* s, double lo, double hi, double* out) {
  char* end;
  errno = 0;
  double v = strtod(s, &end);
  if (errno || end == s || *end || v < lo || v > hi) return false;
  *out = v;
  return true;
}

int main(int argc, char** argv) {
  SoakOptions o;
  bool seeded = false;
  enum { kSeed = 256, kSeconds, kCalls, kMaxCount, kInflight, kTransport, kChurn };
  static const struct option opts[] = {{"seed", required_argument, nullptr, kSeed},
                                       {"seconds", required_argument, nullptr, kSeconds},
                                       {"calls", required_argument, nullptr, kCalls},
                                       {"max-count", required_argument, nullptr, kMaxCount},
                                       {"inflight", required_argument, nullptr, kInflight},
                                       {"transport", required_argument, nullptr, kTransport},
                                       {"churn", required_argument, nullptr, kChurn},
                                       {"verbose", no_argument, nullptr, 'v'},
                                       {"help", no_argument, nullptr, 'h'},
                                       {nullptr, 0, nullptr, 0}};
  int c;
  double v;
  while ((c = getopt_long(argc, argv, "vh", opts, nullptr)) != -1) {
    const char* bad = nullptr;
    switch (c) {
      case kSeed: {
        char* end;
        errno = 0;
        o.seed = strtoull(optarg, &end, 0);
        if (errno || end == optarg || *end) bad = "--seed: want an unsigned integer";
        seeded = true;
        break;
      }
      case kSeconds:
        if (parse_num(optarg, 0.001, 1e7, &v))
          o.seconds = v;
        else
          bad = "--seconds: want a number of seconds > 0";
        break;
      case kCalls:
        if (parse_num(optarg, 1, 1e12, &v))
          o.calls = (long)v;
        else
          bad = "--calls: want a count >= 1";
        break;
      case kMaxCount:
        if (parse_num(optarg, 0, 1 << 28, &v))
          o.max_count = (size_t)v;
        else
          bad = "--max-count: want a count in [0, 268435456]";
        break;
      case kInflight:
        if (parse_num(optarg, 0, 64, &v))
          o.max_inflight = (int)v;
        else
          bad = "--inflight: want a count in [0, 64]";
        break;
      case kTransport:
        if (strcmp(optarg, "shm") && strcmp(optarg, "tcp") && strcmp(optarg, "auto"))
          bad = "--transport: want shm, tcp or auto";
        else
          setenv("WEFT_TRANSPORT", optarg, 1);
        break;
      case kChurn:
        if (parse_num(optarg, 1, 1e9, &v))
          o.churn = (long)v;
        else
          bad = "--churn: want a count >= 1";
        break;
      case 'v':
        o.verbose = true;
        break;
      case 'h':
        usage(stdout);
        return 0;
      default:
        usage(stderr);
        return 2;
    }
    if (bad) {
      fprintf(stderr, "weft-soak: %s, got '%s' (--help lists the options)\n", bad, optarg);
      return 2;
    }
  }
  if (optind < argc) {
    fprintf(stderr, "weft-soak: unexpected argument '%s' (--help lists the options)\n",
            argv[optind]);
    return 2;
  }
  if (o.seconds > 0 && o.calls > 0) {
    fprintf(stderr, "weft-soak: give --seconds or --calls, not both\n");
    return 2;
  }

  weft_comm_t* world = nullptr;
  weft_result_t r = weft_comm_init_env(&world);
  if (r != WEFT_SUCCESS) {
    // weft's message already says how to launch it (weft-run, torchrun, the variables).
    fprintf(stderr, "weft-soak: joining the job failed: %s\n", weft_last_error());
    return 2;
  }
  int rank;
  weft_comm_rank(world, &rank);
  if (!seeded) {
    // Rank 0 picks and the others take its seed, so that an unseeded run is still one run.
    struct timeval tv;
    gettimeofday(&tv, nullptr);
    o.seed = soak_mix((uint64_t)tv.tv_sec * 1000003u + (uint64_t)tv.tv_usec + (uint64_t)getpid()) %
             1000000000u;
    r = weft_broadcast(&o.seed, &o.seed, 1, WEFT_UINT64, 0, world, nullptr);
    if (r != WEFT_SUCCESS) {
      fprintf(stderr, "weft-soak: agreeing on a seed (broadcast): %s\n", weft_last_error());
      weft_comm_abort(world);
      return 1;
    }
  }
  if (rank == 0 && !o.churn) {
    const char* t = getenv("WEFT_TRANSPORT");
    printf("weft-soak: seed=%llu transport=%s max-count=%zu%s\n", (unsigned long long)o.seed,
           t ? t : "auto", o.max_count, seeded ? "" : " (chosen: pass --seed to repeat)");
    fflush(stdout);
  }
  int rc = o.churn ? soak_churn(o, world) : soak_run(o, world);
  r = weft_comm_destroy(world);
  if (r != WEFT_SUCCESS) {
    fprintf(stderr, "weft-soak: destroying the world communicator: %s\n", weft_last_error());
    return 1;
  }
  return rc;
}
