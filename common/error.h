/* error.h -- internal: result codes with a message, and the macros that check and propagate them.
 *
 * A failing function records a message for the calling thread with WEFT_ERR() and returns the
 * code; callers either return it unchanged (WEFT_CHECK) or add what they know (err_context), so
 * the final message reads outside-in: "rank 2: all_reduce: recv from rank 1: peer closed ...".
 * A WEFT_ERR_TIMEOUT message starts with "Timed out: " (the words torch's backends use for a
 * timeout, which tools match), and context goes after those words: "Timed out: rank 0: barrier
 * #1 (...): no progress for 1000 ms (WEFT_TIMEOUT_MS) receiving from rank 1 at step 0 ...". */
#ifndef WEFT_COMMON_ERROR_H_
#define WEFT_COMMON_ERROR_H_

#include "include/weft.h"

#ifdef __cplusplus
extern "C" {
#endif

#define ERR_MSG_MAX 1024

/* Records "<message> [file:line]" as this thread's last error and returns `code`; for
 * WEFT_ERR_TIMEOUT, "Timed out: <message> [file:line]" (unless the message starts so already). */
weft_result_t err_set(weft_result_t code, const char *file, int line, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));

/* Prefixes this thread's last error with "<context>: " (after its leading "Timed out: ", if any)
 * and returns `code` unchanged. */
weft_result_t err_context(weft_result_t code, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

/* Makes `msg` this thread's last error as it is and returns `code`: for a message recorded on
 * another thread (an asynchronous operation's, on the progress thread). */
weft_result_t err_set_message(weft_result_t code, const char *msg);

/* This thread's last message ("" if none). */
const char *err_last(void);
void err_clear(void);

#define WEFT_ERR(code, ...) err_set((code), __FILE__, __LINE__, __VA_ARGS__)

/* Returns from the current function if `call` fails. */
#define WEFT_CHECK(call)                         \
  do {                                           \
    weft_result_t check_res_ = (call);           \
    if (check_res_ != WEFT_SUCCESS) return check_res_; \
  } while (0)

/* Returns from the current function if `call` fails, its message prefixed with the context
 * (printf arguments). Nothing is formatted on success. */
#define WEFT_CHECK_CTX(call, ...)                                            \
  do {                                                                       \
    weft_result_t check_res_ = (call);                                       \
    if (check_res_ != WEFT_SUCCESS) return err_context(check_res_, __VA_ARGS__); \
  } while (0)

/* Stores the result of `call` in `res` and jumps to `label` if it failed. */
#define WEFT_CHECK_GOTO(call, res, label) \
  do {                                    \
    (res) = (call);                       \
    if ((res) != WEFT_SUCCESS) goto label; \
  } while (0)

#ifdef __cplusplus
}
#endif

#endif /* WEFT_COMMON_ERROR_H_ */
