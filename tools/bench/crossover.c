/* crossover.c -- the rows of --tune's crossover table: size x world size -> fastest algorithm. */
#include "tools/bench/crossover.h"

#include <stdio.h>
#include <string.h>

int bench_fastest(const bench_algo_time_t *t, int n) {
  int best = -1;
  for (int i = 0; i < n; i++) {
    if (t[i].time_us < 0) continue;
    if (best < 0 || t[i].time_us < t[best].time_us) best = i;
  }
  return best;
}

int bench_crossover_header(char *buf, size_t len) {
  return snprintf(buf, len,
                  "# %14s  %6s  %12s  %18s  %18s  %5s  %s\n"
                  "# %14s  %6s  %12s  %18s  %18s  %5s  %s\n",
                  "coll", "nranks", "size", "fastest", "model", "agree",
                  "time per algorithm (us, out-of-place)", "", "", "(B)", "(measured)",
                  "(cost model)", "", "");
}

int bench_crossover_row(char *buf, size_t len, const char *coll, int nranks, size_t bytes,
                        const char *model, const bench_algo_time_t *t, int n,
                        bench_crossover_stats_t *stats) {
  int best = bench_fastest(t, n);
  const char *fastest = best >= 0 ? t[best].name : "-";
  int agree = best >= 0 && model != NULL && strcmp(model, fastest) == 0;
  if (stats != NULL && best >= 0 && model != NULL) {
    stats->rows++;
    if (agree) {
      stats->agree++;
    } else {
      for (int i = 0; i < n; i++) {
        if (t[i].time_us >= 0 && strcmp(t[i].name, model) == 0 && t[best].time_us > 0) {
          stats->excess += t[i].time_us / t[best].time_us - 1.0;
        }
      }
    }
  }
  int used = snprintf(buf, len, "  %14s  %6d  %12zu  %18s  %18s  %5s ", coll, nranks, bytes,
                      fastest, model ? model : "-", agree ? "yes" : "no");
  for (int i = 0; i < n && used >= 0 && (size_t)used < len; i++) {
    if (t[i].time_us < 0) {
      used += snprintf(buf + used, len - (size_t)used, " %s -", t[i].name);
    } else {
      used += snprintf(buf + used, len - (size_t)used, " %s %.1f", t[i].name, t[i].time_us);
    }
  }
  if (used >= 0 && (size_t)used < len) used += snprintf(buf + used, len - (size_t)used, "\n");
  return used;
}

int bench_crossover_summary(char *buf, size_t len, const bench_crossover_stats_t *stats) {
  int miss = stats->rows - stats->agree;
  if (miss == 0) {
    return snprintf(buf, len, "# The cost model picked the fastest algorithm in all %d rows.\n",
                    stats->rows);
  }
  return snprintf(buf, len,
                  "# The cost model picked the fastest algorithm in %d of %d rows; in the other %d "
                  "its pick took %.0f%% longer on average.\n",
                  stats->agree, stats->rows, miss, 100.0 * stats->excess / miss);
}
