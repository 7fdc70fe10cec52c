/* weft_run_trace.c -- WEFT_TRACE for weft-run: merges the ranks' trace files into one.
 *
 * Each rank writes PATH.rank<R>.json (PATH.rank<R>-<k>.json for its k-th further communicator),
 * a Chrome trace object whose events are everything between its first '[' and its last ']'.
 * After the ranks exit, weft-run concatenates those events into one such object at PATH (with
 * --nnodes > 1: PATH.node<K>.json, so nodes sharing a file system do not overwrite each other)
 * and removes the parts. Only this node's ranks are touched. */
#include <dirent.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "tools/weft_run.h"

#define COPY_CHUNK (1 << 20)
#define EDGE_BYTES 4096 /* where the opening '[' and the closing ']' must lie */

typedef struct {
  long rank, k;
  char *name; /* full path */
} part_t;

typedef struct {
  part_t *v;
  size_t n, cap;
} parts_t;

/* Splits PATH into the folder to scan and the file-name prefix "<base>.rank". */
static void split_path(const char *path, char *dir, size_t dirlen, const char **base) {
  const char *slash = strrchr(path, '/');
  if (!slash) {
    snprintf(dir, dirlen, ".");
    *base = path;
  } else {
    snprintf(dir, dirlen, "%.*s", slash == path ? 1 : (int)(slash - path), path);
    *base = slash + 1;
  }
}

/* name == "<base>.rank<R>.json" or "<base>.rank<R>-<k>.json": sets rank and k (0 if absent). */
static int parse_part(const char *name, const char *base, long *rank, long *k) {
  size_t bl = strlen(base);
  if (strncmp(name, base, bl) != 0 || strncmp(name + bl, ".rank", 5) != 0) return 0;
  const char *p = name + bl + 5;
  char *end;
  if (*p < '0' || *p > '9') return 0;
  *rank = strtol(p, &end, 10);
  *k = 0;
  if (*end == '-') {
    p = end + 1;
    if (*p < '0' || *p > '9') return 0;
    *k = strtol(p, &end, 10);
  }
  return strcmp(end, ".json") == 0;
}

static int by_rank(const void *a, const void *b) {
  const part_t *x = a, *y = b;
  if (x->rank != y->rank) return x->rank < y->rank ? -1 : 1;
  return x->k < y->k ? -1 : x->k > y->k;
}

/* The parts of this node's ranks, sorted by rank then communicator. */
static int find_parts(const wr_opts *o, const char *path, parts_t *out) {
  char dir[4096];
  const char *base;
  split_path(path, dir, sizeof(dir), &base);
  memset(out, 0, sizeof(*out));
  DIR *d = opendir(dir);
  if (!d) return -1;
  long first = (long)o->node_rank * o->nproc, last = first + o->nproc - 1;
  struct dirent *de;
  while ((de = readdir(d)) != NULL) {
    long rank, k;
    if (!parse_part(de->d_name, base, &rank, &k) || rank < first || rank > last) continue;
    if (out->n == out->cap) {
      size_t cap = out->cap ? out->cap * 2 : 16;
      part_t *v = realloc(out->v, cap * sizeof(*v));
      if (!v) break;
      out->v = v;
      out->cap = cap;
    }
    size_t len = strlen(dir) + strlen(de->d_name) + 2;
    char *name = malloc(len);
    if (!name) break;
    snprintf(name, len, "%s/%s", dir, de->d_name);
    out->v[out->n++] = (part_t){rank, k, name};
  }
  closedir(d);
  if (out->n) qsort(out->v, out->n, sizeof(*out->v), by_rank);
  return 0;
}

static void free_parts(parts_t *p) {
  for (size_t i = 0; i < p->n; i++) free(p->v[i].name);
  free(p->v);
}

void wr_trace_clean(const wr_opts *o, const char *path) {
  parts_t parts;
  if (find_parts(o, path, &parts) != 0) return;
  for (size_t i = 0; i < parts.n; i++) remove(parts.v[i].name);
  free_parts(&parts);
}

/* [*from, *to): the bytes between the first '[' and the last ']', leading blanks skipped. */
static int event_range(FILE *f, long size, long *from, long *to, char *buf) {
  size_t n = fread(buf, 1, EDGE_BYTES < size ? EDGE_BYTES : (size_t)size, f);
  char *open = memchr(buf, '[', n);
  if (!open || !memmem(buf, (size_t)(open - buf), "\"traceEvents\"", 13)) return -1;
  long tail = size > EDGE_BYTES ? size - EDGE_BYTES : 0;
  if (fseek(f, tail, SEEK_SET) != 0) return -1;
  n = fread(buf, 1, (size_t)(size - tail), f);
  long close = -1;
  for (size_t i = n; i-- > 0;)
    if (buf[i] == ']') {
      close = tail + (long)i;
      break;
    }
  *from = (long)(open - buf) + 1;
  *to = close;
  return close < *from ? -1 : 0;
}

/* Appends one part's events to `out` (after a comma unless it is the first). 1 appended, 0 no
 * events, -1 not a trace or unreadable. */
static int append_part(FILE *out, const char *name, int first, char *buf) {
  FILE *f = fopen(name, "r");
  if (!f) return -1;
  struct stat sb;
  long from, to;
  int rc = -1;
  if (fstat(fileno(f), &sb) != 0 || event_range(f, (long)sb.st_size, &from, &to, buf) != 0 ||
      fseek(f, from, SEEK_SET) != 0)
    goto done;
  int c;
  while (from < to && (c = getc(f)) != EOF && (c == ' ' || c == '\n' || c == '\r' || c == '\t'))
    from++;
  rc = 0;
  if (from >= to) goto done;
  fputs(first ? "\n" : ",\n", out);
  if (fseek(f, from, SEEK_SET) != 0) goto done;
  for (long left = to - from; left > 0;) {
    size_t n = fread(buf, 1, left < COPY_CHUNK ? (size_t)left : COPY_CHUNK, f);
    if (n == 0) goto done;
    fwrite(buf, 1, n, out);
    left -= (long)n;
  }
  rc = 1;
done:
  fclose(f);
  return rc;
}

/* Says which of this node's ranks left no trace (they never destroyed or aborted their
 * communicator: killed, or exited without it). */
static void report_missing(const wr_opts *o, const parts_t *parts) {
  char list[256] = "";
  size_t len = 0;
  int missing = 0;
  for (int local = 0; local < o->nproc; local++) {
    long rank = (long)o->node_rank * o->nproc + local;
    int found = 0;
    for (size_t i = 0; i < parts->n && !found; i++) found = parts->v[i].rank == rank;
    if (found) continue;
    if (missing++ < 16 && len < sizeof(list))
      len += (size_t)snprintf(list + len, sizeof(list) - len, "%s%ld", len ? ", " : "", rank);
  }
  if (missing)
    fprintf(stderr,
            "weft-run: WEFT_TRACE: no trace from %d rank(s) (%s%s): they did not destroy or "
            "abort their communicator\n",
            missing, list, missing > 16 ? ", ..." : "");
}

int wr_trace_merge(const wr_opts *o, const char *path) {
  char out_path[4200], tmp[4300];
  if (o->nnodes > 1)
    snprintf(out_path, sizeof(out_path), "%s.node%d.json", path, o->node_rank);
  else
    snprintf(out_path, sizeof(out_path), "%s", path);
  snprintf(tmp, sizeof(tmp), "%s.tmp", out_path);
  parts_t parts;
  if (find_parts(o, path, &parts) != 0 || parts.n == 0) {
    fprintf(stderr, "weft-run: WEFT_TRACE=%s: no rank wrote a trace\n", path);
    free_parts(&parts);
    return -1;
  }
  char *buf = malloc(COPY_CHUNK > EDGE_BYTES ? COPY_CHUNK : EDGE_BYTES);
  FILE *out = buf ? fopen(tmp, "w") : NULL;
  if (!out) {
    fprintf(stderr, "weft-run: WEFT_TRACE: cannot create %s: %s\n", tmp, strerror(errno));
    free(buf);
    free_parts(&parts);
    return -1;
  }
  fputs("{\"traceEvents\":[", out);
  int merged = 0;
  char *ok = calloc(parts.n, 1); /* parts to remove once the merged file is in place */
  for (size_t i = 0; i < parts.n; i++) {
    int rc = append_part(out, parts.v[i].name, merged == 0, buf);
    if (rc < 0)
      fprintf(stderr, "weft-run: WEFT_TRACE: skipped %s: not a readable Chrome trace\n",
              parts.v[i].name);
    merged += rc > 0;
    if (ok) ok[i] = rc >= 0;
  }
  fputs("\n],\"displayTimeUnit\":\"ns\"}\n", out);
  int bad = ferror(out);
  if (fclose(out) != 0 || rename(tmp, out_path) != 0) bad = 1;
  if (bad) {
    fprintf(stderr, "weft-run: WEFT_TRACE: cannot write %s: %s\n", out_path, strerror(errno));
    remove(tmp);
  } else {
    for (size_t i = 0; ok && i < parts.n; i++)
      if (ok[i]) remove(parts.v[i].name);
    report_missing(o, &parts);
    fprintf(stderr, "weft-run: WEFT_TRACE: %d trace file(s) merged into %s\n", merged, out_path);
  }
  free(ok);
  free(buf);
  free_parts(&parts);
  return bad ? -1 : 0;
}
