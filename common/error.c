/* error.c -- the thread-local last-error message behind WEFT_ERR() and weft_last_error(). */
#include "common/error.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>

/* Per thread by design: weft_last_error() must describe the calling thread's last failure even
 * when several threads drive several communicators. */
static _Thread_local char last_error[ERR_MSG_MAX];

weft_result_t err_set(weft_result_t code, const char *file, int line, const char *fmt, ...) {
  char msg[ERR_MSG_MAX];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(msg, sizeof msg, fmt, ap);
  va_end(ap);
  snprintf(last_error, sizeof last_error, "%s [%s:%d]", msg, file, line);
  return code;
}

weft_result_t err_context(weft_result_t code, const char *fmt, ...) {
  char prefix[ERR_MSG_MAX];
  char old[ERR_MSG_MAX];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(prefix, sizeof prefix, fmt, ap);
  va_end(ap);
  memcpy(old, last_error, sizeof old);
  snprintf(last_error, sizeof last_error, "%s: %s", prefix, old);
  return code;
}

weft_result_t err_set_message(weft_result_t code, const char *msg) {
  snprintf(last_error, sizeof last_error, "%s", msg);
  return code;
}

const char *err_last(void) { return last_error; }

void err_clear(void) { last_error[0] = '\0'; }
