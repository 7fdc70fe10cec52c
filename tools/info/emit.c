/* emit.c -- weft-info's writer: nested objects and arrays as JSON or as indented "key: value"
 * text (array elements start with "- "). */
#include "tools/info/emit.h"

#include <stdarg.h>
#include <string.h>

static void json_string(FILE *f, const char *s) {
  fputc('"', f);
  for (const unsigned char *p = (const unsigned char *)s; *p; p++) {
    if (*p == '"' || *p == '\\')
      fprintf(f, "\\%c", *p);
    else if (*p == '\n')
      fputs("\\n", f);
    else if (*p < 0x20)
      fprintf(f, "\\u%04x", *p);
    else
      fputc(*p, f);
  }
  fputc('"', f);
}

/* Text: the indentation of the current level, with the pending array dash. */
static void text_indent(emit_t *e) {
  /* Members of a level-d object are indented d steps; an array element's "- " takes the last. */
  int d = e->depth, dash = e->dash || (d > 0 && e->is_array[d]);
  for (int i = 0; i < d - (dash ? 1 : 0); i++) fputs("  ", e->f);
  if (dash) fputs("- ", e->f);
  e->dash = 0;
}

/* Writes what precedes a member's value: the separator and key (JSON), the indentation and key. */
static void member(emit_t *e, const char *key) {
  int d = e->depth;
  if (e->json) {
    if (e->count[d]++) fputc(',', e->f);
    if (!e->is_array[d] && key) {
      json_string(e->f, key);
      fputc(':', e->f);
    }
    return;
  }
  e->count[d]++;
  text_indent(e);
  if (!e->is_array[d] && key) fprintf(e->f, "%s: ", key);
}

void emit_init(emit_t *e, FILE *f, int json) {
  memset(e, 0, sizeof *e);
  e->f = f;
  e->json = json;
  if (json) fputc('{', f);
}

void emit_finish(emit_t *e) {
  if (e->json) fputs("}\n", e->f);
  fflush(e->f);
}

static void open_level(emit_t *e, const char *key, int array) {
  if (e->depth + 1 >= EMIT_MAX_DEPTH) return;
  int d = e->depth;
  if (e->json) {
    member(e, key);
    fputc(array ? '[' : '{', e->f);
  } else if (e->is_array[d]) {
    /* An object in an array: its first member's line carries the dash. */
    e->count[d]++;
    e->dash = 1;
  } else {
    e->count[d]++;
    text_indent(e);
    fprintf(e->f, "%s:\n", key ? key : "");
  }
  e->depth++;
  e->count[e->depth] = 0;
  e->is_array[e->depth] = array;
}

void emit_obj(emit_t *e, const char *key) { open_level(e, key, 0); }
void emit_arr(emit_t *e, const char *key) { open_level(e, key, 1); }

void emit_end(emit_t *e) {
  if (e->depth == 0) return;
  if (e->json) {
    fputc(e->is_array[e->depth] ? ']' : '}', e->f);
  } else if (e->is_array[e->depth] && e->count[e->depth] == 0) {
    for (int i = 0; i < e->depth; i++) fputs("  ", e->f);
    fputs("(none)\n", e->f);
  }
  e->dash = 0;
  e->depth--;
}

void emit_str(emit_t *e, const char *key, const char *value) {
  member(e, key);
  if (e->json) {
    if (value)
      json_string(e->f, value);
    else
      fputs("null", e->f);
  } else {
    fprintf(e->f, "%s\n", value ? value : "-");
  }
}

void emit_strf(emit_t *e, const char *key, const char *fmt, ...) {
  char buf[1024];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(buf, sizeof buf, fmt, ap);
  va_end(ap);
  emit_str(e, key, buf);
}

void emit_int(emit_t *e, const char *key, long long value) {
  member(e, key);
  fprintf(e->f, e->json ? "%lld" : "%lld\n", value);
}

void emit_num(emit_t *e, const char *key, double value) {
  member(e, key);
  fprintf(e->f, e->json ? "%.6g" : "%.6g\n", value);
}

void emit_bool(emit_t *e, const char *key, int value) {
  member(e, key);
  if (e->json)
    fputs(value ? "true" : "false", e->f);
  else
    fputs(value ? "yes\n" : "no\n", e->f);
}
