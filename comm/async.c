/* async.c -- issue-order execution of operations on a communicator. */
#include "comm/comm.h"

weft_result_t comm_submit(weft_comm_t *c, const weft_call_t *call) { return comm_call(c, call); }
