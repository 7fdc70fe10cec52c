/* pattern.c -- weft-bench's deterministic inputs and their exact expected results. */
#include "tools/bench/pattern.h"

#include "tools/bench/elem.h"

enum { MODE_SUM, MODE_AVG_FLOAT, MODE_PROD, MODE_RANGE, MODE_SPARSE };

/* Per dtype: the largest L such that every integer in [-L, L] (or [0, L] unsigned) is exact in
 * the dtype, capped at 2^62 so that values fit int64; the most factors of 2 a product may hold;
 * and the value range used by min/max/broadcast. */
static const struct {
  int64_t exact;
  int pow_max;
  int64_t lo;
  int64_t hi;
} limits[WEFT_NUM_DTYPES] = {
    [WEFT_INT8] = {127, 6, -128, 127},
    [WEFT_UINT8] = {255, 7, 0, 255},
    [WEFT_INT32] = {INT32_MAX, 30, INT32_MIN, INT32_MAX},
    [WEFT_UINT32] = {UINT32_MAX, 31, 0, UINT32_MAX},
    [WEFT_INT64] = {1ll << 62, 62, -(1ll << 62), 1ll << 62},
    [WEFT_UINT64] = {1ll << 62, 62, 0, 1ll << 62},
    [WEFT_FLOAT16] = {2048, 15, -2048, 2048}, /* 2^15 <= 65504 */
    [WEFT_BFLOAT16] = {256, 62, -256, 256},
    [WEFT_FLOAT32] = {1ll << 24, 62, -(1ll << 24), 1ll << 24},
    [WEFT_FLOAT64] = {1ll << 53, 62, -(1ll << 53), 1ll << 53},
    [WEFT_FLOAT8_E4M3] = {16, 8, -16, 16}, /* 3 mantissa bits; 2^8 <= 448 */
    [WEFT_FLOAT8_E5M2] = {8, 15, -8, 8},   /* 2 mantissa bits; 2^15 <= 57344 */
};

/* A well-mixed 64-bit value per index (splitmix64's finalizer). */
static uint64_t mix(uint64_t x) {
  x += 0x9e3779b97f4a7c15ull;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}

/* A value in [0, n) from a hash, by multiplication instead of division. */
static uint64_t below(uint64_t hash, uint64_t n) {
  return (uint64_t)(((unsigned __int128)hash * n) >> 64);
}

/* sum over j in [0, n) of (j mod period). */
static int64_t sum_mod(int64_t n, int64_t period) {
  int64_t full = n / period, rest = n % period;
  return full * (period * (period - 1) / 2) + rest * (rest - 1) / 2;
}

void bench_pattern_init(bench_pattern_t *p, bench_coll_t coll, weft_dtype_t dtype, weft_op_t op,
                        int nranks, int root) {
  int d = (unsigned)dtype < WEFT_NUM_DTYPES ? (int)dtype : (int)WEFT_FLOAT32;
  int n = nranks > 0 ? nranks : 1;
  p->coll = coll;
  p->dtype = dtype;
  p->op = op;
  p->nranks = n;
  p->root = root;
  p->is_signed = bench_dtype_is_signed(dtype);
  p->bound = limits[d].exact / n;
  p->period = p->bound + 1 < n ? p->bound + 1 : n;
  p->rank_sum = sum_mod(n, p->period);
  p->pow_max = limits[d].pow_max < n ? limits[d].pow_max : n;
  p->lo = limits[d].lo;
  p->span = (uint64_t)limits[d].hi - (uint64_t)limits[d].lo + 1;
  p->moves = coll == BENCH_BROADCAST || coll == BENCH_ALL_GATHER || coll == BENCH_SENDRECV ||
             coll == BENCH_BARRIER || coll == BENCH_GATHER || coll == BENCH_SCATTER ||
             coll == BENCH_ALL_TO_ALL;
  if (p->moves || op == WEFT_MIN || op == WEFT_MAX) {
    p->mode = MODE_RANGE;
  } else if (op == WEFT_PROD) {
    p->mode = MODE_PROD;
  } else if (op == WEFT_AVG && bench_dtype_is_float(dtype)) {
    p->mode = MODE_AVG_FLOAT;
  } else {
    p->mode = MODE_SUM; /* sum, and avg on integers */
  }
  /* More ranks than exact integers: a unit from limits[d].exact of them (< n here). */
  p->units = limits[d].exact;
  if ((p->mode == MODE_SUM || p->mode == MODE_AVG_FLOAT) && p->bound == 0) p->mode = MODE_SPARSE;
}

/* sum: the rank-independent part a(i), in [-bound, bound - (P-1)] or [0, bound - (P-1)]. */
static int64_t sum_base(const bench_pattern_t *p, uint64_t index) {
  uint64_t top = (uint64_t)(p->bound - (p->period - 1));
  if (!p->is_signed) return (int64_t)below(mix(index), top + 1);
  return -p->bound + (int64_t)below(mix(index), (uint64_t)p->bound + top + 1);
}

/* avg on floats: a(i) in [-h, h], h = bound/2 rounded up (so that a bound of 1, fp8's with a few
 * ranks, still gives a(i) = +-1 and not 0 everywhere); pairs add +-k with |a| + k <= bound. */
static int64_t avg_base(const bench_pattern_t *p, uint64_t index) {
  int64_t half = (p->bound + 1) / 2;
  return -half + (int64_t)below(mix(index), (uint64_t)(2 * half + 1));
}

/* prod: how many ranks contribute 2, and how many are negative. */
static int prod_twos(const bench_pattern_t *p, uint64_t index) {
  /* Hashed, not index % (pow_max + 1): that would line up with the rank rotation and leave some
   * rank always contributing 1, whose loss would then go unnoticed. */
  return (int)below(mix(index ^ 0x2545f4914f6cdd1dull), (uint64_t)p->pow_max + 1);
}

static int prod_negatives(const bench_pattern_t *p, uint64_t index) {
  return p->is_signed ? (int)below(mix(index), (uint64_t)p->nranks + 1) : 0;
}

/* min/max/broadcast: the offset of rank-independent part. */
static uint64_t range_base(const bench_pattern_t *p, uint64_t index) {
  return below(mix(index), p->span);
}

/* Where rank `rank` sits in the rotations of element `index`: slot = (rank + index) mod n picks
 * its part of the pattern, neg_slot = (rank + 2 index + 1) mod n its sign for prod. The loops below
 * step a cursor instead of dividing for every element. */
typedef struct {
  uint64_t slot;
  uint64_t neg_slot;
} cursor_t;

static cursor_t cursor_at(const bench_pattern_t *p, int rank, uint64_t index) {
  uint64_t n = (uint64_t)p->nranks;
  uint64_t r = (uint64_t)rank % n, i = index % n;
  cursor_t c = {(r + i) % n, (r + 2 * i + 1) % n};
  return c;
}

static void cursor_step(const bench_pattern_t *p, cursor_t *c) {
  uint64_t n = (uint64_t)p->nranks;
  c->slot = c->slot + 1 == n ? 0 : c->slot + 1;
  c->neg_slot += 2;
  while (c->neg_slot >= n) c->neg_slot -= n;
}

static int64_t input_at(const bench_pattern_t *p, int rank, uint64_t index, cursor_t c) {
  switch (p->mode) {
    case MODE_SUM: {
      uint64_t period = (uint64_t)p->period;
      return sum_base(p, index) + (int64_t)(c.slot < period ? c.slot : c.slot % period);
    }
    case MODE_AVG_FLOAT: {
      int64_t a = avg_base(p, index);
      if (p->nranks == 1) return a;
      int64_t room = p->bound - (a < 0 ? -a : a);
      if (p->nranks % 2 && rank >= p->nranks - 3) {
        /* Odd world: the last three add k1, k2 and -(k1 + k2), with k1 + k2 <= room. */
        int64_t k1 = (int64_t)below(mix(index ^ 0x9fb21c651e98df25ull), (uint64_t)room + 1);
        int64_t k2 = (int64_t)below(mix(index ^ 0xc13fa9a902a6328full), (uint64_t)(room - k1) + 1);
        int last = rank - (p->nranks - 3);
        return last == 0 ? a + k1 : last == 1 ? a + k2 : a - (k1 + k2);
      }
      uint64_t pair = (uint64_t)(rank / 2);
      int64_t k = (int64_t)below(mix(index ^ (pair * 0xd6e8feb86659fd93ull)), (uint64_t)room + 1);
      return rank % 2 == 0 ? a + k : a - k;
    }
    case MODE_SPARSE:
      if (p->op == WEFT_AVG && bench_dtype_is_float(p->dtype)) {
        if ((int64_t)c.slot >= p->units / 2 * 2) return 0;
        return c.slot % 2 ? -1 : 1;
      }
      return (int64_t)c.slot < p->units ? 1 : 0;
    case MODE_PROD: {
      int64_t x = (int64_t)c.slot < prod_twos(p, index) ? 2 : 1;
      return (int64_t)c.neg_slot < prod_negatives(p, index) ? -x : x;
    }
    default: { /* MODE_RANGE */
      uint64_t v = range_base(p, index) + c.slot;
      if (v >= p->span) v -= p->span;
      if (v >= p->span) v %= p->span; /* only when nranks > span */
      return p->lo + (int64_t)v;
    }
  }
}

int64_t bench_pattern_input(const bench_pattern_t *p, int rank, uint64_t index) {
  return input_at(p, rank, index, cursor_at(p, rank, index));
}

/* What the output holds at `index`; for data that only moves, the input of rank `src`, whose
 * cursor at `index` is `c`. */
static int64_t expected_at(const bench_pattern_t *p, uint64_t index, int src, cursor_t c) {
  int64_t n = p->nranks;
  switch (p->mode) {
    case MODE_SUM: {
      /* slot runs over 0..n-1 once whatever the index, so the rank parts always add up alike. */
      int64_t sum = n * sum_base(p, index) + p->rank_sum;
      return p->op == WEFT_AVG ? sum / n : sum; /* C division truncates toward zero */
    }
    case MODE_AVG_FLOAT:
      return avg_base(p, index);
    case MODE_SPARSE:
      if (p->op == WEFT_AVG && bench_dtype_is_float(p->dtype)) return 0;
      return p->op == WEFT_AVG ? p->units / n : p->units;
    case MODE_PROD: {
      int64_t x = (int64_t)1 << prod_twos(p, index);
      return prod_negatives(p, index) % 2 ? -x : x;
    }
    default: { /* MODE_RANGE */
      if (p->moves) return input_at(p, src, index, c);
      uint64_t base = range_base(p, index);
      /* When base + n - 1 passes the end, every value from 0 to span-1 occurs. */
      int wraps = base + (uint64_t)(n - 1) >= p->span;
      if (p->op == WEFT_MIN) return p->lo + (int64_t)(wraps ? 0 : base);
      return p->lo + (int64_t)(wraps ? p->span - 1 : base + (uint64_t)(n - 1));
    }
  }
}

/* Elements first .. first+count-1 of rank's inputs, the expected output for source `src`, and
 * a check of it. */
static void fill_range(const bench_pattern_t *p, int rank, void *buf, uint64_t first,
                       size_t count) {
  cursor_t c = cursor_at(p, rank, first);
  for (size_t i = 0; i < count; i++, cursor_step(p, &c)) {
    bench_elem_store(p->dtype, buf, i, input_at(p, rank, first + i, c));
  }
}

static void poison_range(const bench_pattern_t *p, int src, void *buf, uint64_t first,
                         size_t count) {
  cursor_t c = cursor_at(p, src, first);
  for (size_t i = 0; i < count; i++, cursor_step(p, &c)) {
    bench_elem_poison(p->dtype, buf, i, expected_at(p, first + i, src, c));
  }
}

static size_t check_range(const bench_pattern_t *p, int src, const void *buf, uint64_t first,
                          size_t count) {
  cursor_t c = cursor_at(p, src, first);
  size_t wrong = 0;
  for (size_t i = 0; i < count; i++, cursor_step(p, &c)) {
    wrong += !bench_elem_equals(p->dtype, buf, i, expected_at(p, first + i, src, c));
  }
  return wrong;
}

int64_t bench_pattern_expected(const bench_pattern_t *p, uint64_t index) {
  return expected_at(p, index, p->root, cursor_at(p, p->root, index));
}

void bench_pattern_fill(const bench_pattern_t *p, int rank, void *buf, size_t count) {
  fill_range(p, rank, buf, 0, count);
}

void bench_pattern_poison(const bench_pattern_t *p, void *buf, size_t count) {
  poison_range(p, p->root, buf, 0, count);
}

size_t bench_pattern_check(const bench_pattern_t *p, const void *buf, size_t count) {
  return check_range(p, p->root, buf, 0, count);
}

/* ---- weft.h's layouts. all_gather's and gather's gathered buffer is rank 0's input sequence;
 * rank r sends its part r*count .. (r+1)*count-1. Scatter's root sends its own sequence, of
 * which rank r receives the same part. */

static int gathers(const bench_pattern_t *p) {
  return p->coll == BENCH_ALL_GATHER || p->coll == BENCH_GATHER;
}

static int scatters(const bench_pattern_t *p) {
  return p->coll == BENCH_REDUCE_SCATTER || p->coll == BENCH_SCATTER;
}

/* Whose input sequence a rank's buffers are cut from, and whose its output must show. */
static int fill_rank(const bench_pattern_t *p, int rank) { return gathers(p) ? 0 : rank; }

static int source_rank(const bench_pattern_t *p, int rank) {
  switch (p->coll) {
    case BENCH_ALL_GATHER:
    case BENCH_GATHER:
      return 0;
    case BENCH_SENDRECV:
      return (rank % p->nranks + p->nranks - 1) % p->nranks;
    default:
      return p->root; /* broadcast's and scatter's source; the reductions do not use it */
  }
}

static uint64_t send_first(const bench_pattern_t *p, int rank, size_t count) {
  return gathers(p) ? (uint64_t)rank * count : 0;
}

static uint64_t recv_first(const bench_pattern_t *p, int rank, size_t count) {
  return scatters(p) ? (uint64_t)rank * count : 0;
}

/* All-to-all: rank r sends its own sequence 0 .. n*count-1, part q to rank q; so block q of r's
 * output is rank q's part r, and a block from the wrong rank or of the wrong part shows. */
static int all_to_all(const bench_pattern_t *p) { return p->coll == BENCH_ALL_TO_ALL; }

static void *elem_at(const bench_pattern_t *p, void *buf, size_t i) {
  return (char *)buf + i * bench_dtype_size(p->dtype);
}

size_t bench_pattern_send_count(const bench_pattern_t *p, int rank, size_t count) {
  if (p->coll == BENCH_BARRIER || (p->coll == BENCH_SCATTER && rank != p->root)) return 0;
  if (all_to_all(p)) return count * (size_t)p->nranks;
  return scatters(p) ? count * (size_t)p->nranks : count;
}

size_t bench_pattern_recv_count(const bench_pattern_t *p, int rank, size_t count) {
  if (p->coll == BENCH_BARRIER) return 0;
  if ((p->coll == BENCH_REDUCE || p->coll == BENCH_GATHER) && rank != p->root) return 0;
  if (all_to_all(p)) return count * (size_t)p->nranks;
  return gathers(p) ? count * (size_t)p->nranks : count;
}

void bench_pattern_fill_send(const bench_pattern_t *p, int rank, void *buf, size_t count) {
  fill_range(p, fill_rank(p, rank), buf, send_first(p, rank, count),
             bench_pattern_send_count(p, rank, count));
}

int64_t bench_pattern_expected_recv(const bench_pattern_t *p, int rank, size_t count, size_t i) {
  int src = source_rank(p, rank);
  uint64_t index = recv_first(p, rank, count) + i;
  if (all_to_all(p) && count > 0) {
    src = (int)(i / count);
    index = (uint64_t)rank * count + i % count;
  }
  return expected_at(p, index, src, cursor_at(p, src, index));
}

void bench_pattern_poison_recv(const bench_pattern_t *p, int rank, void *buf, size_t count) {
  if (all_to_all(p)) {
    for (int q = 0; q < p->nranks; q++)
      poison_range(p, q, elem_at(p, buf, (size_t)q * count), (uint64_t)rank * count, count);
    return;
  }
  poison_range(p, source_rank(p, rank), buf, recv_first(p, rank, count),
               bench_pattern_recv_count(p, rank, count));
}

size_t bench_pattern_check_recv(const bench_pattern_t *p, int rank, const void *buf, size_t count) {
  if (all_to_all(p)) {
    size_t wrong = 0;
    for (int q = 0; q < p->nranks; q++)
      wrong += check_range(p, q, elem_at(p, (void *)buf, (size_t)q * count),
                           (uint64_t)rank * count, count);
    return wrong;
  }
  return check_range(p, source_rank(p, rank), buf, recv_first(p, rank, count),
                     bench_pattern_recv_count(p, rank, count));
}
