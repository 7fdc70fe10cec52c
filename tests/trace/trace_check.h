// trace_check.h -- reading the trace files weft writes: shape checks and event lookups, no parser.
#ifndef WEFT_TESTS_TRACE_TRACE_CHECK_H_
#define WEFT_TESTS_TRACE_TRACE_CHECK_H_

#include <cstdint>
#include <string>
#include <vector>

// The whole file, or "" if it cannot be read.
std::string ReadFile(const std::string& path);
bool FileExists(const std::string& path);
// Names in `dir` other than "." and "..".
std::vector<std::string> ListDir(const std::string& dir);
// A fresh empty folder under $TEST_TMPDIR (or /tmp).
std::string MakeTempDir();

// "" if `text` is one JSON object whose brackets and strings are well formed, with no empty
// elements (",,", ",]", "[,", ...) and nothing after it; otherwise what is wrong and where.
std::string JsonShapeError(const std::string& text);

// One event of a trace file: the file has one event per line.
struct Event {
  std::string line;
  std::string name, ph;
  int pid = -1, tid = -1, peer = -1;
  int64_t ts_ns = 0, dur_ns = 0;  // "X" events: ts and dur (microseconds, 3 decimals) in ns
};
std::vector<Event> Events(const std::string& text);

// Events named `name` of process `pid` whose line also contains every string in `has`.
std::vector<Event> Find(const std::vector<Event>& evs, const std::string& name, int pid,
                        const std::vector<std::string>& has = {});

// "" if no two "X" events of one (pid, tid) track overlap; otherwise the pair that does.
std::string OverlapError(const std::vector<Event>& evs);

// CLOCK_REALTIME in ns, to compare with the traces' timestamps.
int64_t RealtimeNs();

#endif  // WEFT_TESTS_TRACE_TRACE_CHECK_H_
