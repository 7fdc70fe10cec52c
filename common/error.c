/* error.c -- the thread-local last-error message behind WEFT_ERR() and weft_last_error(). */
#include "common/error.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>

/* Per thread by design: weft_last_error() must describe the calling thread's last failure even
 * when several threads drive several communicators. */
static _Thread_local char last_error[ERR_MSG_MAX];

/* What every timeout's message starts with: torch's backends and the tools that read their logs
 * recognize a timeout by these words. */
static const char timed_out[] = "Timed out: ";

static int starts_timed_out(const char *s) { return strncmp(s, timed_out, strlen(timed_out)) == 0; }

weft_result_t err_set(weft_result_t code, const char *file, int line, const char *fmt, ...) {
  char msg[ERR_MSG_MAX];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(msg, sizeof msg, fmt, ap);
  va_end(ap);
  const char *lead = code == WEFT_ERR_TIMEOUT && !starts_timed_out(msg) ? timed_out : "";
  snprintf(last_error, sizeof last_error, "%s%s [%s:%d]", lead, msg, file, line);
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
  /* A timeout's leading words stay first; the context goes after them. */
  if (starts_timed_out(old))
    snprintf(last_error, sizeof last_error, "%s%s: %s", timed_out, prefix, old + strlen(timed_out));
  else
    snprintf(last_error, sizeof last_error, "%s: %s", prefix, old);
  return code;
}

weft_result_t err_set_message(weft_result_t code, const char *msg) {
  snprintf(last_error, sizeof last_error, "%s", msg);
  return code;
}

const char *err_last(void) { return last_error; }

void err_clear(void) { last_error[0] = '\0'; }
