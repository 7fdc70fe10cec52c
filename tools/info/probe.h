/* probe.h -- internal to weft-info: runs a probe that might hang or crash (a driver's init, a
 * name lookup) in a child process with a deadline, so that weft-info itself always finishes. */
#ifndef WEFT_TOOLS_INFO_PROBE_H_
#define WEFT_TOOLS_INFO_PROBE_H_

#include <stddef.h>

/* Fills `out` (`size` bytes of plain data: no pointers survive the trip back). */
typedef void (*probe_fn)(void *out, size_t size, const void *arg);

/* Runs fn in a child and copies its result into `out`. Returns 0 when the child answered within
 * timeout_ms; otherwise -1 with `why` saying what happened (timed out and killed, crashed, could
 * not start), and `out` zeroed. */
int probe_run(probe_fn fn, const void *arg, void *out, size_t size, int timeout_ms, char *why,
              size_t cap);

#endif /* WEFT_TOOLS_INFO_PROBE_H_ */
