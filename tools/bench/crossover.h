/* crossover.h -- private to weft-bench: --tune's table of the fastest algorithm per size against
 * the cost model's pick. */
#ifndef WEFT_TOOLS_BENCH_CROSSOVER_H_
#define WEFT_TOOLS_BENCH_CROSSOVER_H_

#include <stddef.h>

#ifdef __cplusplus
extern "C" {
#endif

/* One algorithm's measured time in a row; time_us < 0 when it was not measured. */
typedef struct {
  const char *name;
  double time_us;
} bench_algo_time_t;

/* Running totals for the summary line. */
typedef struct {
  int rows;      /* rows with a measured fastest and a model pick */
  int agree;     /* rows where the pick was the fastest */
  double excess; /* sum over the other rows of t(pick) / t(fastest) - 1 */
} bench_crossover_stats_t;

/* The index of the fastest measured entry (the first on ties), or -1 when none was measured. */
int bench_fastest(const bench_algo_time_t *t, int n);

/* Each writes whole lines into buf, like snprintf, and returns what snprintf returns. */
int bench_crossover_header(char *buf, size_t len);

/* One row; `model` names the model's pick (NULL: none). Adds the row to *stats when given. */
int bench_crossover_row(char *buf, size_t len, const char *coll, int nranks, size_t bytes,
                        const char *model, const bench_algo_time_t *t, int n,
                        bench_crossover_stats_t *stats);

/* "# The cost model picked the fastest algorithm in A of R rows; ...". */
int bench_crossover_summary(char *buf, size_t len, const bench_crossover_stats_t *stats);

#ifdef __cplusplus
}
#endif

#endif /* WEFT_TOOLS_BENCH_CROSSOVER_H_ */
