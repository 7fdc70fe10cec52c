/* sections.c -- weft-info's build, knob and algorithm sections: each asks the library's own code
 * (weft_build_features, config.c's knob table, algo_choose) rather than repeating it. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "collectives/algo_select.h"
#include "collectives/cost_constants.h"
#include "comm/comm.h"
#include "common/spin.h"
#include "kernels/reduce.h"
#include "tools/info/fatbin.h"
#include "tools/info/info.h"
#include "transport/ibv_wrap.h"

extern char **environ;

void info_build(emit_t *e) {
  int v = weft_version();
  emit_obj(e, "build");
  emit_strf(e, "version", "%d.%d.%d", v / 10000, v / 100 % 100, v % 100);
  emit_strf(e, "header_version", "%d.%d.%d", WEFT_VERSION_MAJOR, WEFT_VERSION_MINOR,
            WEFT_VERSION_PATCH);
  emit_bool(e, "cuda", (weft_build_features() & WEFT_FEATURE_CUDA) != 0);
  /* What nvcc compiled the library's kernels for, read from this program's own fat binaries (the
   * library is linked into it whole: //comm is alwayslink). */
  char targets[512];
  int n = fatbin_targets("/proc/self/exe", targets, sizeof targets);
  if (n > 0)
    emit_str(e, "cuda_targets", targets);
  else if (n == 0)
    emit_str(e, "cuda_targets", NULL);
  else
    emit_strf(e, "cuda_targets_error", "%s", targets);
  emit_bool(e, "verbs", IBVW_HAVE_VERBS);
  emit_str(e, "compiler", __VERSION__);
  /* The widest copy of the reduction loops this CPU runs (kernels/reduce_avx2.c). */
  emit_str(e, "host_reductions", kern_isa_name(kern_isa_best()));
#ifdef __OPTIMIZE__
  emit_bool(e, "optimized", 1);
#else
  emit_bool(e, "optimized", 0);
#endif
#ifdef NDEBUG
  emit_bool(e, "assertions", 0);
#else
  emit_bool(e, "assertions", 1);
#endif
  emit_end(e);
}

/* WEFT_* variables weft reads outside the knob table: the launch (bootstrap/env.c), the Python
 * package and the NCCL front end (where to find the libraries), and test hooks. */
static const char *const other_vars[] = {
    "WEFT_RANK",         "WEFT_WORLD_SIZE",       "WEFT_LOCAL_RANK",        "WEFT_LOCAL_WORLD_SIZE",
    "WEFT_MASTER_ADDR",  "WEFT_MASTER_PORT",      "WEFT_INIT_URL",          "WEFT_JOB_ID",
    "WEFT_LIBRARY",      "WEFT_LIBWEFT",          "WEFT_LIBNCCL",           "WEFT_LIBNCCL_AUDIT",
    "WEFT_NCCL_LIBRARY", "WEFT_NCCL_AUDIT_QUIET", "WEFT_EMULATED_DELAY_US", "WEFT_CUDA_DEVICE_LOOP",
};

static int knob_index(const char *name) {
  for (int i = 0; i < config_knob_count(); i++) {
    const char *n, *d, *desc;
    config_knob_info(i, &n, &d, &desc);
    if (strcmp(n, name) == 0) return i;
  }
  return -1;
}

static int is_other_var(const char *name) {
  for (size_t i = 0; i < sizeof other_vars / sizeof other_vars[0]; i++)
    if (strcmp(other_vars[i], name) == 0) return 1;
  return 0;
}

/* Levenshtein distance of two short names (longer ones count as far apart). */
static int edit_distance(const char *a, const char *b) {
  enum { MAX = 64 };
  size_t la = strlen(a), lb = strlen(b);
  if (la >= MAX || lb >= MAX) return MAX;
  int row[MAX + 1];
  for (size_t j = 0; j <= lb; j++) row[j] = (int)j;
  for (size_t i = 1; i <= la; i++) {
    int diag = row[0];
    row[0] = (int)i;
    for (size_t j = 1; j <= lb; j++) {
      int up = row[j], best = diag + (a[i - 1] != b[j - 1]);
      if (up + 1 < best) best = up + 1;
      if (row[j - 1] + 1 < best) best = row[j - 1] + 1;
      diag = up;
      row[j] = best;
    }
  }
  return row[lb];
}

/* config_load's getenv for one knob alone, so that a bad value is reported against its own
 * variable and the others still show. */
typedef struct {
  const char *name, *value;
} one_var_t;

static const char *one_getenv(void *ctx, const char *name) {
  const one_var_t *v = ctx;
  return strcmp(name, v->name) == 0 ? v->value : NULL;
}

void info_knobs(emit_t *e, const char *cfg_error) {
  emit_obj(e, "environment");
  emit_bool(e, "valid", cfg_error[0] == 0);
  if (cfg_error[0]) emit_str(e, "error", cfg_error);
  int nset = 0;
  emit_arr(e, "knobs");
  for (char **p = environ; *p; p++) {
    const char *eq = strchr(*p, '=');
    if (strncmp(*p, "WEFT_", 5) != 0 || !eq) continue;
    char name[128];
    snprintf(name, sizeof name, "%.*s", (int)(eq - *p), *p);
    int i = knob_index(name);
    if (i < 0) continue;
    const char *n, *def, *desc;
    config_knob_info(i, &n, &def, &desc);
    one_var_t one = {name, eq + 1};
    weft_config_t alone;
    char value[1100];
    weft_result_t res = config_load(&alone, one_getenv, &one);
    if (res == WEFT_SUCCESS) config_knob_value(&alone, i, value, sizeof value);
    memset(&alone, 0, sizeof alone); /* it may hold the job token */
    emit_obj(e, NULL);
    emit_str(e, "name", name);
    if (res == WEFT_SUCCESS)
      emit_str(e, "value", value);
    else
      emit_str(e, "error", weft_last_error());
    emit_str(e, "default", def);
    emit_end(e);
    nset++;
  }
  emit_end(e);
  emit_int(e, "knobs_at_default", config_knob_count() - nset);
  emit_arr(e, "other");
  for (char **p = environ; *p; p++) {
    const char *eq = strchr(*p, '=');
    if (strncmp(*p, "WEFT_", 5) != 0 || !eq) continue;
    char name[128];
    snprintf(name, sizeof name, "%.*s", (int)(eq - *p), *p);
    if (is_other_var(name)) emit_strf(e, NULL, "%s=%s", name, eq + 1);
  }
  emit_end(e);
  emit_arr(e, "unknown");
  for (char **p = environ; *p; p++) {
    const char *eq = strchr(*p, '=');
    if (strncmp(*p, "WEFT_", 5) != 0 || !eq) continue;
    char name[128];
    snprintf(name, sizeof name, "%.*s", (int)(eq - *p), *p);
    if (knob_index(name) < 0 && !is_other_var(name)) emit_str(e, NULL, name);
  }
  emit_end(e);
  /* A misspelt knob is silently ignored by init: name the knob it was probably meant to be. */
  emit_arr(e, "did_you_mean");
  for (char **p = environ; *p; p++) {
    const char *eq = strchr(*p, '=');
    if (strncmp(*p, "WEFT_", 5) != 0 || !eq) continue;
    char name[128];
    snprintf(name, sizeof name, "%.*s", (int)(eq - *p), *p);
    if (knob_index(name) >= 0 || is_other_var(name)) continue;
    const char *best = NULL;
    int best_d = 3; /* at most two edits away */
    for (int i = 0; i < config_knob_count(); i++) {
      const char *n, *d, *desc;
      config_knob_info(i, &n, &d, &desc);
      int dist = edit_distance(name, n);
      if (dist < best_d) best_d = dist, best = n;
    }
    if (best) emit_strf(e, NULL, "%s: %s?", name, best);
  }
  emit_end(e);
  emit_end(e);
}

int info_algorithms(emit_t *e, const weft_config_t *cfg, int nranks, const char *transport) {
  cost_transport_t t = cost_transport_from_name(transport);
  if (t == COST_NUM_TRANSPORTS) return -1;
  /* As cost_model_init and cost_model_connect build it for ranks on one host that all use
   * `transport`: the committed constants, WEFT_TUNE_FILE over them, the transport's intra row. */
  cost_tune_t tune;
  memset(&tune, 0, sizeof tune);
  tune.table = *cost_constants();
  char tune_error[512] = "";
  if (cfg->tune_file[0] && cost_tune_load(cfg->tune_file, &tune) != WEFT_SUCCESS) {
    snprintf(tune_error, sizeof tune_error, "%s", weft_last_error());
    tune.table = *cost_constants();
    tune.has_model = 0;
  }
  cost_links_t links;
  memset(&links, 0, sizeof links);
  links.used[t][COST_INTRA] = 1;
  cost_model_t m = cost_model_for(&tune.table, &links, (double)cfg->slice_bytes);
  if (tune.has_model) {
    m.alpha = tune.model.alpha;
    m.beta = tune.model.beta;
    m.gamma = tune.model.gamma;
  }
  /* The one host modeled here runs all `nranks`: more of them than it has CPUs pay a wake per
   * dependent round, as cost_model_connect charges. */
  int cpus = spin_host_cpus();
  m.wake = cpus > 0 && nranks > cpus ? COST_WAKE : 0;
  algo_policy_t policy;
  char policy_error[512] = "";
  if (algo_policy_parse(cfg->algo, &policy) != WEFT_SUCCESS) {
    snprintf(policy_error, sizeof policy_error, "%s", weft_last_error());
    algo_policy_parse("auto", &policy);
  }
  algo_topo_t topo = {NULL, 1, cfg->hierarchy};

  emit_obj(e, "algorithms");
  emit_str(e, "collective", "all_reduce");
  emit_int(e, "ranks", nranks);
  emit_int(e, "hosts", 1);
  emit_str(e, "transport", transport);
  emit_str(e, "model", tune.has_model ? "WEFT_TUNE_FILE" : "committed constants");
  if (tune_error[0]) emit_str(e, "tune_file_error", tune_error);
  if (policy_error[0]) emit_str(e, "algo_error", policy_error);
  emit_strf(e, "alpha_s", "%.3g", m.alpha);
  emit_strf(e, "beta_s_per_byte", "%.3g", m.beta);
  emit_strf(e, "gamma_s_per_byte", "%.3g", m.gamma);
  emit_int(e, "host_cpus", cpus);
  emit_strf(e, "wake_s_per_round", "%.3g", m.wake);
  static const struct {
    const char *label;
    double bytes;
  } sizes[] = {{"1 KiB", 1024.0}, {"1 MiB", 1048576.0}, {"256 MiB", 268435456.0}};
  emit_arr(e, "choices");
  for (size_t i = 0; i < sizeof sizes / sizeof sizes[0]; i++) {
    const algo_entry_t *a = NULL;
    weft_result_t res = algo_choose(WEFT_COLL_ALL_REDUCE, WEFT_ALGO_AUTO, &policy, &m, nranks,
                                    sizes[i].bytes, &topo, &a);
    emit_obj(e, NULL);
    emit_str(e, "size", sizes[i].label);
    emit_int(e, "bytes", (long long)sizes[i].bytes);
    if (res != WEFT_SUCCESS || !a) {
      emit_str(e, "algorithm", NULL);
      emit_str(e, "error", weft_last_error());
    } else {
      emit_str(e, "algorithm", weft_algo_name(a->algo));
      emit_bool(e, "forced_by_WEFT_ALGO", policy.forced[WEFT_COLL_ALL_REDUCE] != WEFT_ALGO_AUTO);
      if (a->cost) emit_num(e, "predicted_us", algo_predicted(a, &m, nranks, sizes[i].bytes) * 1e6);
    }
    emit_end(e);
  }
  emit_end(e);
  emit_end(e);
  return 0;
}
