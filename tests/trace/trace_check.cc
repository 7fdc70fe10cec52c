// trace_check.cc -- reading the trace files weft writes: shape checks and event lookups.
#include "tests/trace/trace_check.h"

#include <dirent.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <fstream>
#include <map>
#include <sstream>

std::string ReadFile(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  std::stringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

bool FileExists(const std::string& path) { return access(path.c_str(), F_OK) == 0; }

std::vector<std::string> ListDir(const std::string& dir) {
  std::vector<std::string> names;
  DIR* d = opendir(dir.c_str());
  if (!d) return names;
  while (dirent* de = readdir(d)) {
    std::string n = de->d_name;
    if (n != "." && n != "..") names.push_back(n);
  }
  closedir(d);
  std::sort(names.begin(), names.end());
  return names;
}

std::string MakeTempDir() {
  const char* base = getenv("TEST_TMPDIR");
  std::string tmpl = std::string(base && *base ? base : "/tmp") + "/traceXXXXXX";
  std::vector<char> buf(tmpl.begin(), tmpl.end());
  buf.push_back('\0');
  return mkdtemp(buf.data()) ? std::string(buf.data()) : "";
}

std::string JsonShapeError(const std::string& text) {
  std::string stack;
  char prev = 0;  // last significant character outside strings
  bool done = false;
  for (size_t i = 0; i < text.size(); i++) {
    char c = text[i];
    if (c == ' ' || c == '\n' || c == '\r' || c == '\t') continue;
    std::string at = " at byte " + std::to_string(i);
    if (done) return "text after the top-level object" + at;
    if (c == '"') {
      for (i++; i < text.size() && text[i] != '"'; i++) {
        if (text[i] == '\\') i++;
        if (static_cast<unsigned char>(text[i]) < 0x20) return "control character in string" + at;
      }
      if (i >= text.size()) return "unterminated string" + at;
    } else if (c == '{' || c == '[') {
      if (stack.empty() && c != '{') return "top level is not an object" + at;
      stack.push_back(c);
    } else if (c == '}' || c == ']') {
      if (stack.empty() || stack.back() != (c == '}' ? '{' : '[')) return "unbalanced" + at;
      if (prev == ',') return "trailing comma" + at;
      stack.pop_back();
      done = stack.empty();
    } else if (c == ',') {
      if (prev == ',' || prev == '[' || prev == '{') return "empty element" + at;
    } else if (stack.empty()) {
      return "value outside the top-level object" + at;
    }
    prev = c == '"' ? 's' : c;
  }
  if (!done) return "unclosed object or array at the end";
  return "";
}

namespace {

std::string StrField(const std::string& line, const std::string& key) {
  std::string k = "\"" + key + "\":\"";
  size_t p = line.find(k);
  if (p == std::string::npos) return "";
  p += k.size();
  return line.substr(p, line.find('"', p) - p);
}

long IntField(const std::string& line, const std::string& key) {
  std::string k = "\"" + key + "\":";
  size_t p = line.find(k);
  return p == std::string::npos ? -1 : strtol(line.c_str() + p + k.size(), nullptr, 10);
}

// "123.456" microseconds as 123456 ns, exactly.
int64_t UsField(const std::string& line, const std::string& key) {
  std::string k = "\"" + key + "\":";
  size_t p = line.find(k);
  if (p == std::string::npos) return -1;
  char* end;
  int64_t us = strtoll(line.c_str() + p + k.size(), &end, 10), frac = 0;
  if (*end == '.') frac = strtoll(end + 1, nullptr, 10);
  return us * 1000 + frac;
}

}  // namespace

std::vector<Event> Events(const std::string& text) {
  std::vector<Event> evs;
  std::istringstream in(text);
  std::string line;
  while (std::getline(in, line)) {
    size_t start = line.find("{\"name\":");
    if (start == std::string::npos) continue;
    Event e;
    e.line = line.substr(start);
    e.name = StrField(e.line, "name");
    e.ph = StrField(e.line, "ph");
    e.pid = static_cast<int>(IntField(e.line, "pid"));
    e.tid = static_cast<int>(IntField(e.line, "tid"));
    e.peer = static_cast<int>(IntField(e.line, "peer"));
    if (e.ph == "X") {
      e.ts_ns = UsField(e.line, "ts");
      e.dur_ns = UsField(e.line, "dur");
    }
    evs.push_back(e);
  }
  return evs;
}

std::vector<Event> Find(const std::vector<Event>& evs, const std::string& name, int pid,
                        const std::vector<std::string>& has) {
  std::vector<Event> out;
  for (const Event& e : evs) {
    if (e.name != name || e.pid != pid) continue;
    bool all = true;
    for (const std::string& h : has) all = all && e.line.find(h) != std::string::npos;
    if (all) out.push_back(e);
  }
  return out;
}

std::string OverlapError(const std::vector<Event>& evs) {
  std::map<std::pair<int, int>, std::vector<const Event*>> tracks;
  for (const Event& e : evs)
    if (e.ph == "X") tracks[{e.pid, e.tid}].push_back(&e);
  for (auto& kv : tracks) {
    auto& v = kv.second;
    std::sort(v.begin(), v.end(), [](const Event* a, const Event* b) {
      return a->ts_ns < b->ts_ns || (a->ts_ns == b->ts_ns && a->dur_ns < b->dur_ns);
    });
    for (size_t i = 1; i < v.size(); i++)
      if (v[i - 1]->ts_ns + v[i - 1]->dur_ns > v[i]->ts_ns)
        return "overlapping events on one track:\n  " + v[i - 1]->line + "\n  " + v[i]->line;
  }
  return "";
}

int64_t RealtimeNs() {
  timespec ts;
  clock_gettime(CLOCK_REALTIME, &ts);
  return static_cast<int64_t>(ts.tv_sec) * 1000000000LL + ts.tv_nsec;
}
