/* env.c -- rank, world size, master and job id from WEFT_*, torchrun, Open MPI or Slurm variables.
 *
 * Rank and size come from the first family that sets either of them, and local rank/size from
 * that same family only: a weft-run job inside a Slurm allocation must not pick up SLURM_LOCALID,
 * which describes the allocation's tasks, not weft's ranks. An empty variable counts as unset
 * (shell scripts clear variables with `export RANK=`). */
#include "bootstrap/env.h"

#include <limits.h>
#include <stdlib.h>
#include <string.h>

#include "common/error.h"
#include "common/net.h"

typedef struct {
  const char *source;
  const char *rank, *size, *local_rank, *local_size;
  int local_size_advisory; /* Slurm: SLURM_NTASKS_PER_NODE may read "2(x3)"; then unknown */
} family_t;

static const family_t families[] = {
    {"WEFT", "WEFT_RANK", "WEFT_WORLD_SIZE", "WEFT_LOCAL_RANK", "WEFT_LOCAL_WORLD_SIZE", 0},
    {"torchrun", "RANK", "WORLD_SIZE", "LOCAL_RANK", "LOCAL_WORLD_SIZE", 0},
    {"Open MPI", "OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE", "OMPI_COMM_WORLD_LOCAL_RANK",
     "OMPI_COMM_WORLD_LOCAL_SIZE", 0},
    {"Slurm", "SLURM_PROCID", "SLURM_NTASKS", "SLURM_LOCALID", "SLURM_NTASKS_PER_NODE", 1},
};

/* In order of precedence; the first that is set names the job. */
static const char *const job_id_vars[] = {"WEFT_JOB_ID", "TORCHELASTIC_RUN_ID", "SLURM_JOB_ID",
                                          "OMPI_MCA_ess_base_jobid"};

static const char *var(boot_getenv_fn get, void *ctx, const char *name) {
  const char *v = get(ctx, name);
  return v && *v ? v : NULL;
}

/* Strict decimal: "4 " or "4x" are typos to report, not to round off. Returns 0, or -1 when not
 * an integer, -2 when it does not fit in an int. */
static int parse_int(const char *s, int *out) {
  const char *p = s;
  int neg = *p == '-';
  if (neg) p++;
  if (*p == '\0') return -1;
  long long v = 0;
  for (; *p; p++) {
    if (*p < '0' || *p > '9') return -1;
    v = v * 10 + (*p - '0');
    if (v > (long long)INT_MAX + 1) return -2;
  }
  v = neg ? -v : v;
  if (v > INT_MAX || v < INT_MIN) return -2;
  *out = (int)v;
  return 0;
}

/* A count or index: an integer >= 0. */
static weft_result_t parse_nonneg(const char *name, const char *value, int *out) {
  int rc = parse_int(value, out);
  if (rc == -1) return WEFT_ERR(WEFT_ERR_INVALID_ARGUMENT, "%s=%s is not an integer", name, value);
  if (rc == -2) return WEFT_ERR(WEFT_ERR_INVALID_ARGUMENT, "%s=%s is out of range", name, value);
  if (*out < 0)
    return WEFT_ERR(WEFT_ERR_INVALID_ARGUMENT, "%s=%s is negative: ranks and sizes count from 0",
                    name, value);
  return WEFT_SUCCESS;
}

static weft_result_t resolve_local(const family_t *f, boot_getenv_fn get, void *ctx,
                                   boot_env_t *out) {
  const char *lr = var(get, ctx, f->local_rank);
  const char *ls = var(get, ctx, f->local_size);
  out->local_rank = out->local_size = -1;
  if (lr) WEFT_CHECK(parse_nonneg(f->local_rank, lr, &out->local_rank));
  if (ls && f->local_size_advisory) {
    int n;
    if (parse_int(ls, &n) == 0 && n >= 1 && n <= out->world_size && n > out->local_rank)
      out->local_size = n;
    return WEFT_SUCCESS;
  }
  if (!ls) return WEFT_SUCCESS;
  WEFT_CHECK(parse_nonneg(f->local_size, ls, &out->local_size));
  if (out->local_size < 1 || out->local_size > out->world_size)
    return WEFT_ERR(WEFT_ERR_INVALID_ARGUMENT, "%s=%s but %s=%d: local size must be in 1..%d",
                    f->local_size, ls, f->size, out->world_size, out->world_size);
  if (lr && out->local_rank >= out->local_size)
    return WEFT_ERR(WEFT_ERR_INVALID_ARGUMENT, "%s=%s but %s=%s: local rank must be < local size",
                    f->local_rank, lr, f->local_size, ls);
  return WEFT_SUCCESS;
}

static weft_result_t resolve_rank(boot_getenv_fn get, void *ctx, boot_env_t *out) {
  for (size_t i = 0; i < sizeof families / sizeof families[0]; i++) {
    const family_t *f = &families[i];
    const char *r = var(get, ctx, f->rank);
    const char *s = var(get, ctx, f->size);
    if (!r && !s) continue;
    if (!s)
      return WEFT_ERR(WEFT_ERR_INVALID_ARGUMENT, "%s is set (%s) but %s is not: set both", f->rank,
                      r, f->size);
    if (!r)
      return WEFT_ERR(WEFT_ERR_INVALID_ARGUMENT, "%s is set (%s) but %s is not: set both", f->size,
                      s, f->rank);
    WEFT_CHECK(parse_nonneg(f->rank, r, &out->rank));
    WEFT_CHECK(parse_nonneg(f->size, s, &out->world_size));
    if (out->world_size < 1)
      return WEFT_ERR(WEFT_ERR_INVALID_ARGUMENT, "%s=%s: world size must be at least 1", f->size,
                      s);
    if (out->rank >= out->world_size)
      return WEFT_ERR(WEFT_ERR_INVALID_ARGUMENT, "%s=%s but %s=%s: rank must be < world size",
                      f->rank, r, f->size, s);
    out->source = f->source;
    return resolve_local(f, get, ctx, out);
  }
  return WEFT_ERR(WEFT_ERR_INVALID_ARGUMENT,
                  "no rank/world size in the environment: launch with weft-run or torchrun, or "
                  "set RANK and WORLD_SIZE");
}

static weft_result_t set_master(const char *addr_var, const char *addr, const char *port_var,
                                const char *port, boot_env_t *out) {
  const char *orig = addr;
  size_t n = strlen(addr);
  /* "[::1]" is how people write IPv6 next to a port; keep the bare address. */
  if (addr[0] == '[' && n > 2 && addr[n - 1] == ']') {
    addr++;
    n -= 2;
  }
  const char *colon = memchr(addr, ':', n);
  if (colon && !memchr(colon + 1, ':', n - (size_t)(colon - addr) - 1))
    return WEFT_ERR(WEFT_ERR_INVALID_ARGUMENT,
                    "%s=%s looks like host:port: put the port in %s and only the host in %s",
                    addr_var, orig, port_var, addr_var);
  if (n >= sizeof out->master_host)
    return WEFT_ERR(WEFT_ERR_INVALID_ARGUMENT, "%s is longer than %zu characters", addr_var,
                    sizeof out->master_host - 1);
  memcpy(out->master_host, addr, n);
  out->master_host[n] = '\0';
  int p;
  if (parse_int(port, &p) != 0)
    return WEFT_ERR(WEFT_ERR_INVALID_ARGUMENT, "%s=%s is not an integer", port_var, port);
  if (p < 1 || p > 65535)
    return WEFT_ERR(WEFT_ERR_INVALID_ARGUMENT, "%s=%s is out of range 1..65535", port_var, port);
  out->master_port = p;
  return WEFT_SUCCESS;
}

static weft_result_t resolve_master(boot_getenv_fn get, void *ctx, boot_env_t *out) {
  const char *url = var(get, ctx, "WEFT_INIT_URL");
  if (url) {
    weft_result_t res =
        net_parse_url(url, out->master_host, sizeof out->master_host, &out->master_port);
    return res == WEFT_SUCCESS ? res : err_context(res, "WEFT_INIT_URL");
  }
  static const char *const pairs[][2] = {{"WEFT_MASTER_ADDR", "WEFT_MASTER_PORT"},
                                         {"MASTER_ADDR", "MASTER_PORT"}};
  for (size_t i = 0; i < 2; i++) {
    const char *a = var(get, ctx, pairs[i][0]);
    const char *p = var(get, ctx, pairs[i][1]);
    if (!a && !p) continue;
    if (!a || !p)
      return WEFT_ERR(WEFT_ERR_INVALID_ARGUMENT, "%s is set (%s) but %s is not: set both",
                      a ? pairs[i][0] : pairs[i][1], a ? a : p, a ? pairs[i][1] : pairs[i][0]);
    return set_master(pairs[i][0], a, pairs[i][1], p, out);
  }
  return WEFT_ERR(WEFT_ERR_INVALID_ARGUMENT,
                  "no master address: set MASTER_ADDR and MASTER_PORT, or "
                  "WEFT_INIT_URL=tcp://host:port");
}

static weft_result_t resolve_job_id(boot_getenv_fn get, void *ctx, boot_env_t *out) {
  out->job_id[0] = '\0';
  for (size_t i = 0; i < sizeof job_id_vars / sizeof job_id_vars[0]; i++) {
    const char *v = var(get, ctx, job_id_vars[i]);
    if (!v) continue;
    /* Truncating could make two jobs look alike; refuse instead. */
    if (strlen(v) >= sizeof out->job_id)
      return WEFT_ERR(WEFT_ERR_INVALID_ARGUMENT, "%s is longer than %zu characters", job_id_vars[i],
                      sizeof out->job_id - 1);
    strcpy(out->job_id, v);
    return WEFT_SUCCESS;
  }
  return WEFT_SUCCESS;
}

weft_result_t boot_env_resolve(boot_getenv_fn get, void *ctx, boot_env_t *out) {
  memset(out, 0, sizeof *out);
  out->local_rank = out->local_size = -1;
  WEFT_CHECK(resolve_rank(get, ctx, out));
  WEFT_CHECK(resolve_master(get, ctx, out));
  return resolve_job_id(get, ctx, out);
}

static const char *process_getenv(void *ctx, const char *name) {
  (void)ctx;
  return getenv(name);
}

weft_result_t boot_env_resolve_process(boot_env_t *out) {
  return boot_env_resolve(process_getenv, NULL, out);
}

uint64_t boot_job_hash(const char *job_id) {
  uint64_t h = 14695981039346656037ULL;
  for (const unsigned char *p = (const unsigned char *)job_id; *p; p++) {
    h ^= *p;
    h *= 1099511628211ULL;
  }
  return h ? h : 1;
}
