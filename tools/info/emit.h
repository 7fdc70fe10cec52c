/* emit.h -- internal to weft-info: one writer for its two outputs, indented text for people and
 * JSON for tools, so that both always carry the same facts. */
#ifndef WEFT_TOOLS_INFO_EMIT_H_
#define WEFT_TOOLS_INFO_EMIT_H_

#include <stdio.h>

#define EMIT_MAX_DEPTH 16

typedef struct {
  FILE *f;
  int json;
  int depth;
  int count[EMIT_MAX_DEPTH];    /* members written so far at each level */
  int is_array[EMIT_MAX_DEPTH]; /* the level is an array (its members have no keys) */
  int dash;                     /* text: the next line starts an array element ("- ") */
} emit_t;

/* Starts the root object. */
void emit_init(emit_t *e, FILE *f, int json);
/* Ends the root object (and the JSON text with a newline). */
void emit_finish(emit_t *e);

/* `key` names the member; it is ignored inside arrays. */
void emit_obj(emit_t *e, const char *key);
void emit_arr(emit_t *e, const char *key);
void emit_end(emit_t *e);
void emit_str(emit_t *e, const char *key, const char *value); /* NULL: JSON null */
void emit_strf(emit_t *e, const char *key, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
void emit_int(emit_t *e, const char *key, long long value);
void emit_num(emit_t *e, const char *key, double value);
void emit_bool(emit_t *e, const char *key, int value);

#endif /* WEFT_TOOLS_INFO_EMIT_H_ */
