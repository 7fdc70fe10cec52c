// flood.h -- strangers on a port: a helper process that opens many connections to 127.0.0.1:port
// and holds them, silent or sending a few bytes at a time, until it is stopped. Tests of the
// store's and the TCP transport's listeners use it to check that real ranks still get in.
#ifndef WEFT_TESTS_HARNESS_FLOOD_H_
#define WEFT_TESTS_HARNESS_FLOOD_H_

#include <sys/types.h>

struct Flood {
  pid_t pid = -1;
  int ready_fd = -1;  // the helper writes its count of open connections here (an int)
  int opened = 0;     // how many were open at that moment (flood_wait_ready)
};

enum FloodKind {
  kFloodIdle,  // connect and say nothing
  kFloodSlow,  // send `slow_bytes` one byte per connection every 100 ms, then go silent
};

// Forks the helper: it raises its own descriptor limit as far as it may, then opens `count`
// connections to 127.0.0.1:port, retrying while nobody listens there. It writes to ready_fd once
// `count` are established or 3 s after the first one, whichever comes first, and holds them
// until flood_stop. Closed connections are not reopened.
Flood flood_start(int port, int count, FloodKind kind, const unsigned char* slow_bytes = nullptr,
                  int slow_len = 0);
// Waits up to timeout_ms for the helper's signal; returns how many connections it had open, or
// -1. Safe to call in a forked child that inherited the Flood.
int flood_wait_ready(Flood* f, int timeout_ms);
// Kills and reaps the helper.
void flood_stop(Flood* f);

#endif  // WEFT_TESTS_HARNESS_FLOOD_H_
