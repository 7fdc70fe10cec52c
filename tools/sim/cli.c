/* cli.c -- weft-sim's command line: nccl-tests' size flags plus the model's parameters. */
#include "tools/sim/cli.h"

#include <errno.h>
#include <math.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "collectives/algorithms.h"
#include "collectives/cost_constants.h"
#include "common/error.h"

/* What an option's value is and where it goes (offset into simcli_t). */
typedef enum {
  K_COLL,
  K_ALGO,
  K_DTYPE,
  K_INT,
  K_SIZE,
  K_SECONDS,
  K_NO_HEADER,
  K_TRACE,
  K_REPLAY, /* full | auto | estimate (sim.h's sim_replay_t) */
  K_PATH,
  K_TRANSPORT,
  K_HELP,
  K_TOPOLOGY,   /* a topology file: network mode */
  K_NET,        /* one topology key=value: network mode */
  K_RANK_ORDER, /* a file of device slots, rank by rank: network mode */
  K_SKIP        /* on|off: jump over periodic stretches (sim_skip.h) */
} kind_t;

typedef struct {
  char short_name; /* 0: long only */
  const char *long_name;
  kind_t kind;
  size_t at;
  long min, max; /* K_INT (max), K_SIZE (min) */
} opt_t;

#define AT(field) offsetof(simcli_t, field)

static const opt_t options[] = {
    {'C', "coll", K_COLL, AT(coll), 0, 0},
    {'A', "algo", K_ALGO, AT(algo), 0, 0},
    {'p', "nranks", K_INT, AT(nranks), 1, 1 << 20},
    {0, "ranks-per-node", K_INT, AT(model.ranks_per_node), 1, 1 << 20},
    {'b', "minbytes", K_SIZE, AT(minbytes), 0, 0},
    {'e', "maxbytes", K_SIZE, AT(maxbytes), 0, 0},
    {'i', "stepbytes", K_SIZE, AT(stepbytes), 0, 0},
    {'f', "stepfactor", K_SIZE, AT(stepfactor), 2, 0},
    {'d', "datatype", K_DTYPE, AT(dtype), 0, 0},
    {'r', "root", K_INT, AT(root), 0, 1 << 20},
    {0, "alpha", K_SECONDS, AT(model.alpha), 0, 0},
    {0, "beta", K_SECONDS, AT(model.beta), 0, 0},
    {0, "gamma", K_SECONDS, AT(model.gamma), 0, 0},
    {0, "inter-alpha", K_SECONDS, AT(model.inter_alpha), 0, 0},
    {0, "inter-beta", K_SECONDS, AT(model.inter_beta), 0, 0},
    {0, "beta-mem", K_SECONDS, AT(model.beta_mem), 0, 0},
    {0, "slice", K_SIZE, AT(model.slice_bytes), 1, 0},
    {0, "window", K_INT, AT(model.window), 1, 64}, /* 64: executor.c's MAX_WINDOW */
    {0, "transport", K_TRANSPORT, 0, 0, 0},
    {0, "no-header", K_NO_HEADER, 0, 0, 0},
    {0, "trace", K_TRACE, 0, 0, 0},
    {0, "replay", K_REPLAY, 0, 0, 0},
    {0, "topology", K_TOPOLOGY, 0, 0, 0},
    {0, "net", K_NET, 0, 0, 0},
    {0, "rank-order", K_RANK_ORDER, 0, 0, 0},
    {0, "algo-file", K_PATH, AT(algo_file), 0, 0},
    {0, "skip", K_SKIP, AT(model.skip), 0, 0},
    {0, "estimate-slices", K_INT, AT(model.estimate_slices), 1, 1 << 24},
    {'j', "jobs", K_INT, AT(jobs), 1, 256},
    {'h', "help", K_HELP, 0, 0, 0},
};

#define NUM_OPTIONS (sizeof options / sizeof options[0])

/* nccl-tests' dtype names first, then weft's (weft_dtype_name). */
static const char *const nccl_dtype_names[WEFT_NUM_DTYPES] = {
    "int8", "uint8",    "int32", "uint32", "int64",  "uint64",
    "half", "bfloat16", "float", "double", "f8e4m3", "f8e5m2"};

int simcli_parse_size(const char *text, size_t *bytes) {
  char *end;
  errno = 0;
  double v = strtod(text, &end);
  if (end == text || errno || !(v >= 0)) return -1;
  double unit = 1;
  if (*end == 'K' || *end == 'k')
    unit = 1024.0, end++;
  else if (*end == 'M' || *end == 'm')
    unit = 1048576.0, end++;
  else if (*end == 'G' || *end == 'g')
    unit = 1073741824.0, end++;
  v *= unit;
  if (*end || v != floor(v) || v > (double)SIZE_MAX / 2) return -1;
  *bytes = (size_t)v;
  return 0;
}

static int parse_double(const char *text, void *at) {
  double *out = at;
  char *end;
  errno = 0;
  double v = strtod(text, &end);
  if (end == text || *end || errno || !(v >= 0) || isinf(v)) return -1;
  *out = v;
  return 0;
}

static int parse_int(const char *text, long min, long max, long *out) {
  char *end;
  errno = 0;
  long v = strtol(text, &end, 10);
  if (end == text || *end || errno || v < min || v > max) return -1;
  *out = v;
  return 0;
}

static int parse_coll(const char *name, void *at) {
  weft_coll_t *out = at;
  for (int c = 0; c < WEFT_NUM_COLLS; c++)
    if (strcmp(name, weft_coll_name((weft_coll_t)c)) == 0) return *out = (weft_coll_t)c, 0;
  return -1;
}

static int parse_dtype(const char *name, void *at) {
  weft_dtype_t *out = at;
  for (int d = 0; d < WEFT_NUM_DTYPES; d++)
    if (strcmp(name, nccl_dtype_names[d]) == 0 ||
        strcmp(name, weft_dtype_name((weft_dtype_t)d)) == 0)
      return *out = (weft_dtype_t)d, 0;
  return -1;
}

/* Network mode's flags: they fill o->topo, which the model then points to (see check). */
static int set_topo(simcli_t *o, kind_t kind, const char *flag, const char *v, char *err,
                    size_t errlen) {
  weft_result_t res;
  o->has_topo = 1;
  if (kind == K_TOPOLOGY) {
    res = topo_load(&o->topo, v);
  } else if (kind == K_RANK_ORDER) {
    res = topo_load_order(&o->topo, v);
  } else {
    const char *eq = strchr(v, '=');
    char key[64];
    if (!eq || eq == v || (size_t)(eq - v) >= sizeof key)
      return snprintf(err, errlen, "%s: want key=value, got '%s'", flag, v), SIMCLI_ERROR;
    memcpy(key, v, (size_t)(eq - v));
    key[eq - v] = '\0';
    res = topo_set(&o->topo, key, eq + 1, flag);
  }
  if (res != WEFT_SUCCESS) return snprintf(err, errlen, "%s", err_last()), SIMCLI_ERROR;
  return SIMCLI_OK;
}

static int set(simcli_t *o, const opt_t *opt, const char *flag, const char *v, char *err,
               size_t errlen) {
  void *at = (char *)o + opt->at;
  long n = 0;
  size_t z = 0;
  int bad = 0;
  switch (opt->kind) {
    case K_COLL:
      if (parse_coll(v, at) == 0) break;
      snprintf(err, errlen,
               "%s: unknown collective '%s' (all_reduce broadcast reduce all_gather "
               "reduce_scatter barrier send recv gather scatter all_to_all all_to_allv)",
               flag, v);
      return SIMCLI_ERROR;
    case K_PATH:
      if (strlen(v) < sizeof o->algo_file) {
        snprintf(o->algo_file, sizeof o->algo_file, "%s", v);
        break;
      }
      snprintf(err, errlen, "%s: path longer than %zu bytes", flag, sizeof o->algo_file - 1);
      return SIMCLI_ERROR;
    case K_ALGO:
      o->algo = strcmp(v, "all") == 0 ? SIMCLI_ALL_ALGOS : weft_algo_from_name(v);
      if (o->algo != WEFT_NUM_ALGOS || strcmp(v, "all") == 0) break;
      snprintf(err, errlen,
               "%s: unknown algorithm '%s' (all ring tree double_tree "
               "recursive_doubling rabenseifner dissemination)",
               flag, v);
      return SIMCLI_ERROR;
    case K_DTYPE:
      if (parse_dtype(v, at) == 0) break;
      snprintf(err, errlen,
               "%s: unknown dtype '%s' (int8 uint8 int32 uint32 int64 uint64 half "
               "bfloat16 float double f8e4m3 f8e5m2)",
               flag, v);
      return SIMCLI_ERROR;
    case K_INT:
      bad = parse_int(v, opt->min, opt->max, &n);
      if (!bad) *(int *)at = (int)n;
      break;
    case K_SIZE:
      bad = simcli_parse_size(v, &z) || z < (size_t)opt->min;
      if (!bad) *(size_t *)at = z;
      break;
    case K_SECONDS:
      bad = parse_double(v, at);
      break;
    case K_NO_HEADER:
      o->model.headers = 0;
      break;
    case K_TRACE:
      o->trace = 1;
      break;
    case K_REPLAY:
      if (strcmp(v, "full") == 0 || strcmp(v, "auto") == 0 || strcmp(v, "estimate") == 0) {
        o->model.replay = v[0] == 'f'   ? SIM_REPLAY_FULL
                          : v[0] == 'a' ? SIM_REPLAY_AUTO
                                        : SIM_REPLAY_ESTIMATE;
        break;
      }
      snprintf(err, errlen, "%s: unknown replay '%s' (full auto estimate)", flag, v);
      return SIMCLI_ERROR;
    case K_SKIP:
      if (strcmp(v, "on") == 0 || strcmp(v, "off") == 0) {
        *(int *)at = strcmp(v, "on") == 0;
        break;
      }
      snprintf(err, errlen, "%s: '%s' is neither on nor off", flag, v);
      return SIMCLI_ERROR;
    case K_TRANSPORT: /* simcli_parse applies it */
      if (cost_transport_from_name(v) != COST_NUM_TRANSPORTS) break;
      snprintf(err, errlen, "%s: unknown transport '%s' (tcp shm cuda_ipc staged rdma)", flag, v);
      return SIMCLI_ERROR;
    case K_HELP:
      return SIMCLI_HELP;
    case K_TOPOLOGY:
    case K_NET:
    case K_RANK_ORDER:
      return set_topo(o, opt->kind, flag, v, err, errlen);
  }
  if (bad) return snprintf(err, errlen, "%s: bad value '%s'", flag, v), SIMCLI_ERROR;
  return SIMCLI_OK;
}

static const opt_t *find(const char *arg, const char **inline_value) {
  *inline_value = NULL;
  for (size_t i = 0; i < NUM_OPTIONS; i++) {
    const opt_t *o = &options[i];
    if (arg[1] == '-') {
      size_t n = strlen(o->long_name);
      if (strncmp(arg + 2, o->long_name, n) != 0) continue;
      if (arg[2 + n] == '=') *inline_value = arg + 3 + n;
      if (arg[2 + n] == '=' || arg[2 + n] == '\0') return o;
    } else if (o->short_name && arg[1] == o->short_name) {
      if (arg[2]) *inline_value = arg + 2;
      return o;
    }
  }
  return NULL;
}

/* What only makes sense once every flag is read. */
static int check(simcli_t *o, int rpn_given, char *err, size_t errlen) {
  sim_model_t *m = &o->model;
  if (o->has_topo) {
    /* The schedules see nodes through ranks_per_node: the topology's gpus_per_node sets it. */
    int g = o->topo.gpus_per_node;
    if (g > 0 && rpn_given && g != m->ranks_per_node)
      return snprintf(err, errlen, "--ranks-per-node %d but the topology has gpus_per_node %d",
                      m->ranks_per_node, g),
             SIMCLI_ERROR;
    if (g > 0) m->ranks_per_node = g;
    if (o->topo.rank_order && o->topo.nrank_order != o->nranks)
      return snprintf(err, errlen, "rank order has %d entries for -p %d", o->topo.nrank_order,
                      o->nranks),
             SIMCLI_ERROR;
    m->topo = &o->topo;
  }
  if (o->minbytes > o->maxbytes)
    return snprintf(err, errlen, "-b %zu is larger than -e %zu", o->minbytes, o->maxbytes),
           SIMCLI_ERROR;
  if (o->root >= o->nranks)
    return snprintf(err, errlen, "-r %d: only %d ranks", o->root, o->nranks), SIMCLI_ERROR;
  if ((o->coll == WEFT_COLL_SEND || o->coll == WEFT_COLL_RECV || o->coll == WEFT_COLL_P2P_GROUP) &&
      (o->nranks < 2 || o->root == 0))
    return snprintf(err, errlen, "%s: rank 0 sends to -r, which must be in 1..p-1 (needs p >= 2)",
                    weft_coll_name(o->coll)),
           SIMCLI_ERROR;
  if (m->ranks_per_node > o->nranks) m->ranks_per_node = o->nranks;
  char have[256];
  algo_list_names(o->coll, have, sizeof have);
  if (!have[0])
    return snprintf(err, errlen, "%s: this build has no algorithm for it", weft_coll_name(o->coll)),
           SIMCLI_ERROR;
  if (o->algo != SIMCLI_ALL_ALGOS && !algo_lookup(o->coll, o->algo))
    return snprintf(err, errlen, "%s has no '%s' algorithm in this build; supported: %s (or all)",
                    weft_coll_name(o->coll), weft_algo_name(o->algo), have),
           SIMCLI_ERROR;
  return SIMCLI_OK;
}

/* --transport: the library's committed constants of that transport (collectives/cost_constants.c)
 * for every parameter not given by its own flag, whatever the order: one host's row, and the
 * row across hosts for the links between nodes. */
static void apply_transport(sim_model_t *m, cost_transport_t t, const int given[5]) {
  const cost_link_t *in = &cost_constants()->link[t][COST_INTRA];
  const cost_link_t *out = &cost_constants()->link[t][COST_INTER];
  if (!given[0]) m->alpha = in->alpha;
  if (!given[1]) m->beta = in->beta;
  if (!given[2]) m->gamma = in->gamma;
  if (!given[3]) m->inter_alpha = out->alpha;
  if (!given[4]) m->inter_beta = out->beta;
}

int simcli_parse(int argc, const char *const *argv, simcli_t *o, char *err, size_t errlen) {
  int inter_alpha = 0, inter_beta = 0, rpn_given = 0;
  int given[5] = {0, 0, 0, 0, 0}; /* alpha, beta, gamma, inter-alpha, inter-beta */
  cost_transport_t transport = COST_NUM_TRANSPORTS;
  memset(o, 0, sizeof *o);
  topo_init(&o->topo);
  o->coll = WEFT_COLL_ALL_REDUCE;
  o->algo = SIMCLI_ALL_ALGOS;
  o->nranks = 8;
  o->minbytes = o->maxbytes = 32u << 20;
  o->stepbytes = 1u << 20;
  o->dtype = WEFT_FLOAT32;
  o->root = -1;
  sim_model_defaults(&o->model);
  o->model.replay = SIM_REPLAY_AUTO; /* the engine's default is full: its callers ask */
  err[0] = '\0';
  for (int i = 1; i < argc; i++) {
    const char *arg = argv[i], *value;
    const opt_t *opt = arg[0] == '-' ? find(arg, &value) : NULL;
    if (!opt) return snprintf(err, errlen, "unknown option '%s' (try -h)", arg), SIMCLI_ERROR;
    int has_value = opt->kind != K_NO_HEADER && opt->kind != K_TRACE && opt->kind != K_HELP;
    if (has_value && !value) {
      if (i + 1 >= argc) return snprintf(err, errlen, "%s needs a value", arg), SIMCLI_ERROR;
      value = argv[++i];
    }
    int rc = set(o, opt, arg, value, err, errlen);
    if (rc != SIMCLI_OK) return rc;
    if (opt->kind == K_TRANSPORT) transport = cost_transport_from_name(value);
    rpn_given |= opt->at == AT(model.ranks_per_node) && opt->kind == K_INT;
    if (opt->kind != K_SECONDS) continue;
    inter_alpha |= opt->at == AT(model.inter_alpha);
    inter_beta |= opt->at == AT(model.inter_beta);
    given[0] |= opt->at == AT(model.alpha);
    given[1] |= opt->at == AT(model.beta);
    given[2] |= opt->at == AT(model.gamma);
  }
  given[3] = inter_alpha;
  given[4] = inter_beta;
  if (transport != COST_NUM_TRANSPORTS) {
    apply_transport(&o->model, transport, given);
  } else {
    /* Without inter-node values every link is alike, whatever --ranks-per-node says. */
    if (!inter_alpha) o->model.inter_alpha = o->model.alpha;
    if (!inter_beta) o->model.inter_beta = o->model.beta;
  }
  return check(o, rpn_given, err, errlen);
}

void simcli_free(simcli_t *o) { topo_free(&o->topo); }

int simcli_root(const simcli_t *o) {
  if (o->root >= 0) return o->root;
  return o->coll == WEFT_COLL_SEND || o->coll == WEFT_COLL_RECV || o->coll == WEFT_COLL_P2P_GROUP
             ? o->nranks - 1
             : 0;
}

void simcli_usage(FILE *out) {
  fputs(
      "usage: weft-sim [-C coll] [-A algo|all] [-p nranks] [--ranks-per-node n]\n"
      "                [-b minbytes] [-e maxbytes] [-f stepfactor | -i stepbytes] [-d dtype]\n"
      "                [-r root] [--alpha s] [--beta s/B] [--gamma s/B] [--inter-alpha s]\n"
      "                [--inter-beta s/B] [--beta-mem s/B] [--slice bytes] [--window n]\n"
      "                [--transport tcp|shm|cuda_ipc|staged|rdma] [--no-header] [--trace]\n"
      "                [--topology file] [--net key=value] [--rank-order file]\n"
      "                [--algo-file program.xml] [--replay full|auto|estimate]\n"
      "                [--estimate-slices K] [--skip on|off] [-j jobs]\n"
      "Predicts each size's time on the alpha-beta-gamma model by simulating every rank's\n"
      "schedule (tools/sim/README.md). Defaults: all_reduce, all algorithms, 8 ranks on one\n"
      "node, 32M, float; alpha 30e-6, beta 1/1.5e9, gamma 1/4e9 (the library's), slice 64K,\n"
      "window 4. --transport: the library's committed constants of that transport (on one\n"
      "host; across hosts for links between nodes), the flags above override them.\n"
      "send/recv: rank 0 sends to -r (default the last rank). --trace lists every\n"
      "message: from, to, bytes, start and end (us). --topology, --net and --rank-order turn\n"
      "on the network mode: links shared max-min fairly (README.md, \"Network model\").\n"
      "--algo-file simulates an MSCCL program (XML) instead: its collective on its ranks\n"
      "(-C and -p are taken from it). --replay auto (the default) replays one rank per\n"
      "symmetry class where every rank's schedule is its representative's with peers\n"
      "rotated or XORed, with the full replay's result (not with --trace or a topology);\n"
      "--replay full replays every rank. --replay estimate is auto, except that a call\n"
      "without a symmetry whose ops have more than 2K slices (K = --estimate-slices, 128;\n"
      "at most 2^19 / ranks, at least 16) is replayed shortened to K and 2K slices and\n"
      "extrapolated: not exact, marked by a\n"
      "comment under its row (README.md, \"Estimated replay\"). --skip off replays every\n"
      "slice; on (the default) jumps over the periodic middle of long pipelines, exact up to\n"
      "rounding (README.md, \"Scale\"); it is off in network mode and with --trace.\n"
      "-j runs that many rows at once (default: the cores online; 1 with --trace).\n",
      out);
}
