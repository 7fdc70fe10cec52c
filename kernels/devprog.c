/* devprog.c -- what a device program (devprog.h) owns, and its kinds' names for messages. */
#include "kernels/devprog.h"

#include <stdlib.h>

void dp_free(dp_program_t *p) {
  free(p->steps);
  p->steps = NULL;
  p->nsteps = 0;
  p->nlinks = 0;
}

const char *dp_kind_name(dp_kind_t k) {
  switch (k) {
    case DP_SEND:
      return "send";
    case DP_RECV_COPY:
      return "recv-copy";
    case DP_RECV_REDUCE:
      return "recv-reduce";
    case DP_RECV_REDUCE_SEND:
      return "recv-reduce-send";
    case DP_RECV_REDUCE_COPY_SEND:
      return "recv-reduce-copy-send";
    case DP_RECV_COPY_SEND:
      return "recv-copy-send";
    case DP_COPY:
      return "copy";
    case DP_NUM_KINDS:
      break;
  }
  return "?";
}
