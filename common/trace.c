/* trace.c -- WEFT_TRACE: events kept in memory while collectives run, written as Chrome trace JSON
 * when the communicator is destroyed or aborted. */
#include "common/trace.h"

#include <errno.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "common/clock.h"
#include "common/error.h"

enum { EV_SEND, EV_RECV, EV_REDUCE, EV_WAIT, EV_FUSED };

/* The first buffer holds this many events; it doubles up to WEFT_TRACE_MAX_EVENTS, so a short
 * job does not pay for the cap. */
#define FIRST_CAP 4096

typedef struct {
  int64_t ts, dur;         /* CLOCK_MONOTONIC ns */
  const char *coll, *algo; /* static strings */
  uint64_t seq, bytes;
  int64_t slice;
  int32_t peer, step;
  int kind;
  const char *name; /* EV_FUSED: the step's kind (a static string) */
} event_t;

/* What the executor said about a transfer when it posted it, kept until it retires. */
typedef struct {
  int64_t posted;
  const char *coll, *algo;
  uint64_t seq, bytes;
  int64_t slice;
  int step;
} slot_t;

/* One direction to one peer: moves one message at a time, in order. */
typedef struct {
  int64_t free_at; /* when its last transfer was retired */
  slot_t *slots;   /* one per window slot */
} stream_t;

struct trace {
  int rank, nranks, pid, nslots;
  int64_t realtime_offset; /* CLOCK_REALTIME - CLOCK_MONOTONIC at open, ns */
  event_t *ev;
  size_t nev, cap, max;
  size_t dropped;
  int64_t first_drop;      /* when the first event was dropped */
  stream_t *streams;       /* 2 * nranks: send to p at 2p, recv from p at 2p + 1 */
  const char *coll, *algo; /* the collective of the last post, for wait events */
  uint64_t seq;
  int64_t retired_at, wait_from;
  char path[1100];
};

/* Later communicators of this process get their own file, instead of overwriting the first's. */
static atomic_int traces_opened;

static int64_t realtime_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_REALTIME, &ts);
  return (int64_t)ts.tv_sec * 1000000000LL + ts.tv_nsec;
}

weft_result_t trace_check_folder(const weft_config_t *cfg, int rank) {
  if (!cfg->trace[0]) return WEFT_SUCCESS;
  /* Checked now: finding out at destroy, after the whole job ran, would waste the run. */
  char dir[sizeof cfg->trace];
  snprintf(dir, sizeof dir, "%s", cfg->trace);
  char *slash = strrchr(dir, '/');
  if (slash)
    slash[slash == dir ? 1 : 0] = '\0';
  else
    strcpy(dir, ".");
  if (access(dir, W_OK | X_OK) != 0) {
    int e = errno;
    return WEFT_ERR(WEFT_ERR_INVALID_ARGUMENT, "rank %d: WEFT_TRACE=%s: cannot write in %s: %s",
                    rank, cfg->trace, dir, strerror(e));
  }
  return WEFT_SUCCESS;
}

weft_result_t trace_open(trace_t **out, const weft_config_t *cfg, int rank, int nranks) {
  *out = NULL;
  if (!cfg->trace[0]) return WEFT_SUCCESS;
  trace_t *t = calloc(1, sizeof *t);
  if (t) t->streams = calloc(2 * (size_t)nranks, sizeof *t->streams);
  if (!t || !t->streams) {
    free(t);
    return WEFT_ERR(WEFT_ERR_NO_MEMORY, "rank %d: out of memory for WEFT_TRACE", rank);
  }
  int k = atomic_fetch_add(&traces_opened, 1);
  if (k == 0)
    snprintf(t->path, sizeof t->path, "%s.rank%d.json", cfg->trace, rank);
  else
    snprintf(t->path, sizeof t->path, "%s.rank%d-%d.json", cfg->trace, rank, k);
  weft_result_t res = trace_check_folder(cfg, rank);
  if (res != WEFT_SUCCESS) {
    free(t->streams);
    free(t);
    return res;
  }
  t->rank = rank;
  t->nranks = nranks;
  /* Not pid 0: Perfetto takes it for the kernel's idle process. Later communicators get pids of
   * their own, so a merged trace does not mix their tracks. */
  t->pid = k * 1000000 + rank + 1;
  /* A stream's slots number its window: the knob's where set, else its transport's. */
  t->nslots = cfg->slices_in_flight > 0 ? cfg->slices_in_flight : WEFT_MAX_SLICES_IN_FLIGHT;
  t->max = (size_t)cfg->trace_max_events;
  t->realtime_offset = realtime_ns() - clock_now_ns();
  *out = t;
  return WEFT_SUCCESS;
}

const char *trace_path(const trace_t *t) { return t->path; }
size_t trace_event_count(const trace_t *t) { return t->nev; }
size_t trace_dropped_count(const trace_t *t) { return t->dropped; }

/* A slot for the next event, or NULL when the cap is reached (or memory is short): dropped. */
static event_t *event_new(trace_t *t, int64_t now) {
  if (t->nev == t->cap && t->cap < t->max) {
    size_t cap = t->cap ? t->cap * 2 : FIRST_CAP;
    if (cap > t->max) cap = t->max;
    event_t *ev = realloc(t->ev, cap * sizeof *ev);
    if (ev) {
      t->ev = ev;
      t->cap = cap;
    }
  }
  if (t->nev == t->cap) {
    if (t->dropped++ == 0) t->first_drop = now;
    return NULL;
  }
  return &t->ev[t->nev++];
}

static stream_t *stream_of(trace_t *t, int peer, int is_send) {
  if (peer < 0 || peer >= t->nranks) return NULL;
  stream_t *st = &t->streams[2 * peer + !is_send];
  if (!st->slots) st->slots = calloc((size_t)t->nslots, sizeof *st->slots);
  return st->slots ? st : NULL;
}

void trace_post(trace_t *t, int peer, int is_send, int slot, const char *coll, const char *algo,
                uint64_t seq, int step, long slice, size_t bytes) {
  stream_t *st = stream_of(t, peer, is_send);
  t->coll = coll;
  t->algo = algo;
  t->seq = seq;
  if (!st || slot < 0 || slot >= t->nslots) return;
  st->slots[slot] = (slot_t){clock_now_ns(), coll, algo, seq, bytes, slice, step};
}

static void add(trace_t *t, int kind, int64_t from, int64_t to, int peer, const slot_t *s) {
  event_t *e = event_new(t, to);
  if (!e) return;
  slot_t none = {.coll = t->coll, .algo = t->algo, .seq = t->seq, .slice = -1, .step = -1};
  if (!s) s = &none;
  *e = (event_t){from,     to - from, s->coll, s->algo, s->seq, s->bytes,
                 s->slice, peer,      s->step, kind,    NULL};
}

void trace_retire(trace_t *t, int peer, int is_send, int slot) {
  stream_t *st = stream_of(t, peer, is_send);
  int64_t now = clock_now_ns();
  t->retired_at = now;
  if (!st || slot < 0 || slot >= t->nslots) return;
  const slot_t *s = &st->slots[slot];
  int64_t from = s->posted > st->free_at ? s->posted : st->free_at;
  st->free_at = now;
  add(t, is_send ? EV_SEND : EV_RECV, from, now, peer, s);
}

void trace_reduce(trace_t *t, int peer, int slot) {
  stream_t *st = stream_of(t, peer, 0);
  if (!st || slot < 0 || slot >= t->nslots) return;
  add(t, EV_REDUCE, t->retired_at, clock_now_ns(), peer, &st->slots[slot]);
}

void trace_fused(trace_t *t, int peer, int slot, const char *name) {
  stream_t *st = stream_of(t, peer, 0);
  if (!st || slot < 0 || slot >= t->nslots) return;
  add(t, EV_FUSED, t->retired_at, clock_now_ns(), peer, &st->slots[slot]);
  if (t->nev > 0 && t->ev[t->nev - 1].kind == EV_FUSED) t->ev[t->nev - 1].name = name;
}

void trace_wait_begin(trace_t *t) { t->wait_from = clock_now_ns(); }

void trace_wait_end(trace_t *t) { add(t, EV_WAIT, t->wait_from, clock_now_ns(), -1, NULL); }

/* ---- Writing ----------------------------------------------------------------------------- */

/* ns as microseconds with three decimals, printed from integers: a double would lose the
 * nanoseconds of a wall-clock time (about 2^60 ns since 1970). */
static void put_us(FILE *f, int64_t ns) {
  if (ns < 0) {
    fputc('-', f);
    ns = -ns;
  }
  fprintf(f, "%lld.%03d", (long long)(ns / 1000), (int)(ns % 1000));
}

static const char *event_name(const event_t *e) {
  switch (e->kind) {
    case EV_SEND:
      return e->step < 0 ? "send desc" : "send";
    case EV_RECV:
      return e->step < 0 ? "recv desc" : "recv";
    case EV_REDUCE:
      return "reduce";
    case EV_FUSED:
      return e->name ? e->name : "fused";
    default:
      return "wait";
  }
}

/* Track ids within a rank: 1 the executor, then 2p + 2 "send to p" and 2p + 3 "recv from p"
 * (the stream's index + 2). tid 0 is avoided for the same reason as pid 0. */
enum { TID_EXECUTOR = 1, TID_STREAMS = 2 };

static int event_tid(const event_t *e) {
  if (e->kind == EV_SEND) return TID_STREAMS + 2 * e->peer;
  if (e->kind == EV_RECV) return TID_STREAMS + 2 * e->peer + 1;
  return TID_EXECUTOR;
}

/* One metadata event: {"name":what,"ph":"M","pid":..,"tid":tid,"args":{key:value}}, where value
 * is already JSON (a number, or a quoted string). Every element but the file's first (the
 * process name) follows a comma. */
static void meta(const trace_t *t, FILE *f, const char *what, int tid, const char *key,
                 const char *value) {
  fprintf(f, "%s\n{\"name\":\"%s\",\"ph\":\"M\",\"pid\":%d,\"tid\":%d,\"args\":{\"%s\":%s}}",
          strcmp(what, "process_name") ? "," : "", what, t->pid, tid, key, value);
}

static void write_meta(const trace_t *t, FILE *f) {
  char v[160];
  if (t->pid < 1000000)
    snprintf(v, sizeof v, "\"rank %d\"", t->rank);
  else
    snprintf(v, sizeof v, "\"rank %d (communicator %d)\"", t->rank, t->pid / 1000000);
  meta(t, f, "process_name", TID_EXECUTOR, "name", v);
  snprintf(v, sizeof v, "%d", t->pid);
  meta(t, f, "process_sort_index", TID_EXECUTOR, "sort_index", v);
  meta(t, f, "thread_name", TID_EXECUTOR, "name", "\"executor (reduce, wait)\"");
  for (int i = 0; i < 2 * t->nranks; i++) {
    if (!t->streams[i].slots) continue;
    snprintf(v, sizeof v, "\"%s %d\"", i % 2 ? "recv from" : "send to", i / 2);
    meta(t, f, "thread_name", TID_STREAMS + i, "name", v);
    snprintf(v, sizeof v, "%d", TID_STREAMS + i);
    meta(t, f, "thread_sort_index", TID_STREAMS + i, "sort_index", v);
  }
  if (!t->dropped) return;
  /* Both a label on the rank's track and a marker where the trace stops being complete. */
  snprintf(v, sizeof v, "\"trace truncated: %zu events kept, %zu dropped (WEFT_TRACE_MAX_EVENTS)\"",
           t->nev, t->dropped);
  meta(t, f, "process_labels", TID_EXECUTOR, "labels", v);
  fprintf(f,
          ",\n{\"name\":\"trace truncated\",\"ph\":\"i\",\"s\":\"p\",\"pid\":%d,\"tid\":%d,\"ts\":",
          t->pid, TID_EXECUTOR);
  put_us(f, t->first_drop + t->realtime_offset);
  fprintf(f, ",\"args\":{\"kept\":%zu,\"dropped\":%zu}}", t->nev, t->dropped);
}

static void write_event(const trace_t *t, const event_t *e, FILE *f) {
  fprintf(f, ",\n{\"name\":\"%s\",\"cat\":\"weft\",\"ph\":\"X\",\"pid\":%d,\"tid\":%d,\"ts\":",
          event_name(e), t->pid, event_tid(e));
  put_us(f, e->ts + t->realtime_offset);
  fputs(",\"dur\":", f);
  put_us(f, e->dur);
  fprintf(f, ",\"args\":{\"coll\":\"%s\",\"algo\":\"%s\",\"seq\":%llu", e->coll ? e->coll : "",
          e->algo ? e->algo : "", (unsigned long long)e->seq);
  if (e->kind != EV_WAIT)
    fprintf(f, ",\"peer\":%d,\"step\":%d,\"slice\":%lld,\"bytes\":%llu", e->peer, e->step,
            (long long)e->slice, (unsigned long long)e->bytes);
  fputs("}}", f);
}

/* The layout weft-run's merger relies on: the events are everything between the first '[' and
 * the last ']' of the file. */
static weft_result_t write_file(trace_t *t) {
  char tmp[sizeof t->path + 8];
  snprintf(tmp, sizeof tmp, "%s.tmp", t->path);
  FILE *f = fopen(tmp, "w");
  if (!f)
    return WEFT_ERR(WEFT_ERR_SYSTEM, "rank %d: WEFT_TRACE: cannot create %s: %s", t->rank, tmp,
                    strerror(errno));
  setvbuf(f, NULL, _IOFBF, 1 << 20);
  fputs("{\"traceEvents\":[", f);
  write_meta(t, f);
  for (size_t i = 0; i < t->nev; i++) write_event(t, &t->ev[i], f);
  fputs("\n],\"displayTimeUnit\":\"ns\"}\n", f);
  int bad = ferror(f);
  int e = bad ? EIO : 0;
  if (fclose(f) != 0 && !bad) {
    bad = 1;
    e = errno;
  }
  if (!bad && rename(tmp, t->path) != 0) {
    bad = 1;
    e = errno;
  }
  if (!bad) return WEFT_SUCCESS;
  unlink(tmp);
  return WEFT_ERR(WEFT_ERR_SYSTEM, "rank %d: WEFT_TRACE: cannot write %s: %s", t->rank, t->path,
                  strerror(e));
}

weft_result_t trace_close(trace_t *t) {
  if (!t) return WEFT_SUCCESS;
  weft_result_t res = write_file(t);
  for (int i = 0; i < 2 * t->nranks; i++) free(t->streams[i].slots);
  free(t->streams);
  free(t->ev);
  free(t);
  return res;
}
