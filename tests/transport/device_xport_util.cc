// device_xport_util.cc -- see device_xport_util.h.
#include "tests/transport/device_xport_util.h"

#include <dirent.h>
#include <poll.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>

#include "common/error.h"
#include "common/net.h"

#if defined(__SANITIZE_ADDRESS__)
#define WEFT_TEST_LSAN 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define WEFT_TEST_LSAN 1
#endif
#endif
#ifdef WEFT_TEST_LSAN
#include <sanitizer/lsan_interface.h>
#endif

double NowSeconds() {
  timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return ts.tv_sec + ts.tv_nsec * 1e-9;
}

// ---- blobs between ranks ---------------------------------------------------------------------

BlobExchange::BlobExchange(int nranks) : n_(nranks), rd_(nranks, -1), wr_(nranks, -1) {
  for (int r = 0; r < n_; r++) {
    int fds[2];
    if (pipe(fds) == 0) {
      rd_[r] = fds[0];
      wr_[r] = fds[1];
    }
  }
}

BlobExchange::~BlobExchange() {
  for (int r = 0; r < n_; r++) {
    if (rd_[r] >= 0) close(rd_[r]);
    if (wr_[r] >= 0) close(wr_[r]);
  }
}

static bool ReadFull(int fd, void* buf, size_t len, double deadline) {
  char* p = static_cast<char*>(buf);
  while (len > 0) {
    int left = static_cast<int>((deadline - NowSeconds()) * 1000);
    if (left <= 0) return false;
    pollfd pfd = {fd, POLLIN, 0};
    if (poll(&pfd, 1, left) <= 0) continue;
    ssize_t n = read(fd, p, len);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return false;
    p += n;
    len -= static_cast<size_t>(n);
  }
  return true;
}

std::string BlobExchange::Exchange(int rank, const void* blob, size_t size,
                                   std::vector<std::vector<char>>* all, int timeout_ms) {
  all->assign(n_, std::vector<char>());
  (*all)[rank].assign(static_cast<const char*>(blob), static_cast<const char*>(blob) + size);
  std::vector<char> rec(2 * sizeof(uint32_t) + size);
  uint32_t hdr[2] = {static_cast<uint32_t>(rank), static_cast<uint32_t>(size)};
  memcpy(rec.data(), hdr, sizeof hdr);
  memcpy(rec.data() + sizeof hdr, blob, size);
  for (int p = 0; p < n_; p++)  // one write of < PIPE_BUF bytes: never interleaved with others
    if (p != rank && write(wr_[p], rec.data(), rec.size()) != static_cast<ssize_t>(rec.size()))
      return "rank " + std::to_string(rank) + ": writing its address for rank " +
             std::to_string(p) + " failed";
  double deadline = NowSeconds() + timeout_ms / 1000.0;
  for (int got = 0; got < n_ - 1; got++) {
    uint32_t h[2];
    if (!ReadFull(rd_[rank], h, sizeof h, deadline) || h[0] >= static_cast<uint32_t>(n_))
      return "rank " + std::to_string(rank) + ": no address from the other ranks";
    std::vector<char>& b = (*all)[h[0]];
    b.resize(h[1]);
    if (!ReadFull(rd_[rank], b.data(), h[1], deadline))
      return "rank " + std::to_string(rank) + ": address of rank " + std::to_string(h[0]) +
             " cut short";
  }
  return "";
}

// ---- configuration and leftovers -------------------------------------------------------------

weft_result_t OpenTestEngine(dev_engine_t** dev) {
  const char* name = getenv("WEFT_TEST_DEVICE");
  return dev_engine_open(name && *name ? name : "emulated", dev);
}

static const char* NoEnv(void*, const char*) { return nullptr; }

weft_config_t TestConfig(size_t slice_bytes, int shm_slots, int slices_in_flight) {
  weft_config_t cfg;
  memset(&cfg, 0, sizeof cfg);
  config_load(&cfg, NoEnv, nullptr);
  cfg.slice_bytes = slice_bytes;
  cfg.shm_slots = shm_slots;
  cfg.slices_in_flight = slices_in_flight;
  cfg.timeout_ms = 20000;
  cfg.connect_timeout_ms = 20000;
  return cfg;
}

uint64_t TestCommId() {
  static std::atomic<uint64_t> counter{0};
  timespec ts;
  clock_gettime(CLOCK_REALTIME, &ts);
  return (static_cast<uint64_t>(getpid()) << 40) ^ (static_cast<uint64_t>(ts.tv_nsec) << 8) ^
         (counter++ * 0x9e3779b97f4a7c15ull);
}

std::string Leftovers(uint64_t comm_id) {
  char prefix[64];
  snprintf(prefix, sizeof prefix, "weft-%016llx-", static_cast<unsigned long long>(comm_id));
  std::string found;
  DIR* d = opendir("/dev/shm");
  if (!d) return found;
  while (dirent* e = readdir(d))
    if (std::string(e->d_name).rfind(prefix, 0) == 0) found += std::string(e->d_name) + " ";
  closedir(d);
  return found;
}

// ---- transports ------------------------------------------------------------------------------

void RankXport::Close(bool abortive) {
  for (conn_t* c : conns)
    if (c) c->ops->close(c, abortive);
  conns.clear();
  if (t) {
    t->aborting = abortive;
    t->ops->destroy(t);
    t = nullptr;
  }
}

static std::string Fail(int rank, const std::string& what) {
  return "rank " + std::to_string(rank) + ": " + what + ": " + err_last();
}

// create, exchange blobs, attach_peers (where the transport has it), connect to every peer.
static std::string Open(const transport_ops_t* ops, const transport_params_t* tp, BlobExchange* ex,
                        RankXport* out) {
  int rank = tp->rank, n = tp->nranks;
  if (ops->create(tp, &out->t) != WEFT_SUCCESS)
    return Fail(rank, std::string(ops->name) + " create");
  std::vector<char> blob(ops->addr_size);
  ops->local_addr(out->t, blob.data());
  std::vector<std::vector<char>> all;
  std::string err = ex->Exchange(rank, blob.data(), blob.size(), &all, 20000);
  if (!err.empty()) return err;
  std::vector<int> peers;
  std::vector<const void*> blobs;
  for (int p = 0; p < n; p++)
    if (p != rank) {
      peers.push_back(p);
      blobs.push_back(all[p].data());
    }
  if (ops->attach_peers && ops->attach_peers(out->t, peers.data(), blobs.data(),
                                             static_cast<int>(peers.size())) != WEFT_SUCCESS)
    return Fail(rank, "attach_peers");
  out->conns.assign(n, nullptr);
  for (int p : peers)
    if (ops->connect(out->t, p, all[p].data(), &out->conns[p]) != WEFT_SUCCESS)
      return Fail(rank, "connect to rank " + std::to_string(p));
  return "";
}

std::string OpenCudaIpc(int rank, int n, uint64_t comm_id, const weft_config_t* cfg,
                        dev_engine_t* dev, BlobExchange* ex, RankXport* out) {
  transport_params_t tp = {rank, n, comm_id, cfg, nullptr, dev};
  return Open(&cuda_ipc_transport_ops, &tp, ex, out);
}

std::string OpenShm(int rank, int n, uint64_t comm_id, const weft_config_t* cfg, BlobExchange* ex,
                    RankXport* out) {
  transport_params_t tp = {rank, n, comm_id, cfg, nullptr, nullptr};
  return Open(&shm_transport_ops, &tp, ex, out);
}

std::string OpenTcp(int rank, int n, uint64_t comm_id, const weft_config_t* cfg, BlobExchange* ex,
                    RankXport* out) {
  net_addr_t addr;
  if (net_resolve("127.0.0.1", 0, &addr) != WEFT_SUCCESS) return Fail(rank, "resolve 127.0.0.1");
  transport_params_t tp = {rank, n, comm_id, cfg, &addr, nullptr};
  return Open(&tcp_transport_ops, &tp, ex, out);
}

// ---- scripted streams ------------------------------------------------------------------------

std::vector<Msg> Script(int from, int count, size_t slot, size_t host_cap, uint32_t seed) {
  std::vector<Msg> s = {
      {true, 1, false},   {true, 1, true},         {false, 40, false},
      {false, 1, false},  {true, slot - 1, true},  {true, slot, false},
      {true, slot, true}, {false, 257, false},     {false, 40, true},
      {true, 0, false},   {true, slot + 1, false}, {true, 3 * slot + 7, false},
      {false, 1, true},   {true, 7, true},         {false, 0, false},
      {true, 0, true},    {true, 2 * slot, false}, {true, 13, false},
  };
  uint32_t x = seed * 2654435761u + static_cast<uint32_t>(from) * 40503u + 1;
  auto next = [&x]() {
    x = x * 1664525u + 1013904223u;
    return x >> 8;
  };
  while (static_cast<int>(s.size()) < count) {
    Msg m;
    m.device = next() % 10 < 7;
    m.len = m.device ? 1 + next() % (2 * slot + slot / 2) : 1 + next() % 600;
    size_t cap = m.device ? slot : host_cap;
    m.inplace = m.len <= cap && next() % 2 == 0;
    s.push_back(m);
  }
  s.resize(static_cast<size_t>(count));
  for (Msg& m : s)
    if (m.inplace && m.len > (m.device ? slot : host_cap)) m.inplace = false;
  return s;
}

std::vector<Msg> LentScript(int from, int count, size_t slot, size_t host_cap, bool host_lent,
                            uint32_t seed) {
  // Ordinary sends before, between and after runs of lent ones, of every kind.
  std::vector<Msg> s = {
      {true, 40, false, false},       {false, 40, false, false},     {true, 1, false, true},
      {true, slot, true, true},       {true, slot - 1, false, true}, {true, 7, true, true},
      {false, 1, true, false},        {true, 3 * slot + 1, false},   {true, slot, false, true},
      {true, 2 * slot, false},        {true, 13, true, true},        {true, slot / 2, false, true},
      {true, 0, false, false},        {false, 40, false, host_lent}, {true, 1, true, true},
      {false, 257, false, false},     {true, 100, false, true},      {false, 3, true, host_lent},
      {false, 200, false, host_lent}, {true, slot, true, true},
  };
  uint32_t x = seed * 2654435761u + static_cast<uint32_t>(from) * 40503u + 3;
  auto next = [&x]() {
    x = x * 1664525u + 1013904223u;
    return x >> 8;
  };
  while (static_cast<int>(s.size()) < count) {
    // A run of one to five messages of the same way of sending.
    bool lent = next() % 2 == 0;
    int run = 1 + static_cast<int>(next() % 5);
    for (int i = 0; i < run && static_cast<int>(s.size()) < count; i++) {
      Msg m;
      m.device = next() % 10 < 7 || (lent && !host_lent);
      size_t cap = m.device ? slot : host_cap;
      if (lent)
        m.len = 1 + next() % (m.device ? slot : host_cap);
      else
        m.len = m.device ? 1 + next() % (2 * slot + slot / 2) : 1 + next() % 600;
      m.inplace = m.len <= cap && next() % 2 == 0;
      m.lent = lent;
      s.push_back(m);
    }
  }
  s.resize(static_cast<size_t>(count));
  for (Msg& m : s)
    if (m.inplace && m.len > (m.device ? slot : host_cap)) m.inplace = false;
  return s;
}

static uint8_t Byte(int from, size_t m, size_t j) {
  return static_cast<uint8_t>(from * 101 + m * 37 + j * 13 + (j >> 9) * 7 + 1);
}

namespace {

// Device memory for a stream's device messages, at 64-byte aligned offsets.
struct DevArea {
  dev_engine_t* dev = nullptr;
  char* base = nullptr;
  std::vector<size_t> off;
  ~DevArea() {
    if (base) dev->ops->release(dev, base, 0);
  }
  std::string Alloc(dev_engine_t* d, const std::vector<Msg>& msgs) {
    dev = d;
    size_t total = 64;
    for (const Msg& m : msgs) {
      off.push_back(total);
      if (m.device) total += (m.len + 63) & ~static_cast<size_t>(63);
    }
    void* p = nullptr;
    if (dev->ops->alloc(dev, total, 0, &p) != WEFT_SUCCESS)
      return std::string("alloc: ") + err_last();
    base = static_cast<char*>(p);
    return "";
  }
};

}  // namespace

static std::string Describe(int rank, const char* dir, int peer, size_t m, const Msg& msg) {
  char buf[160];
  snprintf(buf, sizeof buf, "rank %d: message %zu %s rank %d (%s, %zu bytes, %s)", rank, m, dir,
           peer, msg.device ? "device" : "host", msg.len, msg.inplace ? "in place" : "copy");
  return buf;
}

static std::string Compare(const uint8_t* got, int from, size_t m, size_t len) {
  for (size_t j = 0; j < len; j++)
    if (got[j] != Byte(from, m, j))
      return ": byte " + std::to_string(j) + " is " + std::to_string(got[j]) + ", expected " +
             std::to_string(Byte(from, m, j));
  return "";
}

namespace {

// What a stream's transfers point at: kept until the connection is closed.
struct Buffers {
  std::vector<std::vector<uint8_t>> src, dst;
  DevArea dout, din;
  std::vector<xfer_t> sx, rx;
  std::vector<uint64_t> fill;  // lent device messages: fence after their fill
};

struct QueueGuard {
  dev_engine_t* d;
  dev_queue_t* q;
  ~QueueGuard() {
    if (q) d->ops->queue_destroy(q);
  }
};

std::string DriveWith(Buffers* b, conn_t* c, dev_engine_t* dev, int rank,
                      const std::vector<Msg>& out, const std::vector<Msg>& in, Windows w,
                      int timeout_ms);

}  // namespace

std::string Drive(conn_t* c, dev_engine_t* dev, int rank, const std::vector<Msg>& out,
                  const std::vector<Msg>& in, Windows w, int timeout_ms) {
  Buffers* b = new Buffers;
  std::string err = DriveWith(b, c, dev, rank, out, in, w, timeout_ms);
  // After a failure the connection may still hold transfers of these buffers, and device copies
  // of them may be in flight until it is closed: they stay (leaked) rather than be freed under it.
  if (err.empty()) delete b;
  return err;
}

namespace {

std::string DriveWith(Buffers* b, conn_t* c, dev_engine_t* dev, int rank,
                      const std::vector<Msg>& out, const std::vector<Msg>& in, Windows w,
                      int timeout_ms) {
  int peer = c->peer;
  const transport_ops_t* ops = c->ops;
  dev_queue_t *q = nullptr, *fq = nullptr;
  if (dev->ops->queue_create(dev, &q) != WEFT_SUCCESS) return Fail(rank, "queue_create");
  QueueGuard guard{dev, q};
  // Lent slots are filled on a queue of their own, as the executor's reductions run on its queue.
  if (dev->ops->queue_create(dev, &fq) != WEFT_SUCCESS) return Fail(rank, "queue_create");
  QueueGuard fguard{dev, fq};
  // Sources: the pattern in host memory, copied to device memory for device messages.
  std::vector<std::vector<uint8_t>>& src = b->src;
  std::vector<std::vector<uint8_t>>& dst = b->dst;
  src.resize(out.size());
  dst.resize(in.size());
  DevArea& dout = b->dout;
  DevArea& din = b->din;
  std::string err = dout.Alloc(dev, out);
  if (err.empty()) err = din.Alloc(dev, in);
  if (!err.empty()) return "rank " + std::to_string(rank) + ": " + err;
  for (size_t m = 0; m < out.size(); m++) {
    src[m].resize(out[m].len + 1);
    for (size_t j = 0; j < out[m].len; j++) src[m][j] = Byte(rank, m, j);
    if (out[m].device && out[m].len &&
        dev->ops->copy(q, dout.base + dout.off[m], src[m].data(), out[m].len) != WEFT_SUCCESS)
      return Fail(rank, "filling device buffers");
  }
  for (size_t m = 0; m < in.size(); m++) dst[m].assign(in[m].len + 1, 0);
  if (dev->ops->drain(q, 20000) != WEFT_SUCCESS) return Fail(rank, "filling device buffers");

  std::vector<xfer_t>& sx = b->sx;
  std::vector<xfer_t>& rx = b->rx;
  sx.resize(out.size());
  rx.resize(in.size());
  b->fill.assign(out.size(), 0);
  // Sends [pc, ps) are lent and not committed yet (only lent ones: no post_send meanwhile).
  size_t ps = 0, pr = 0, ds = 0, dr = 0, pc = 0;
  std::vector<uint8_t> tmp;
  double deadline = NowSeconds() + timeout_ms / 1000.0;
  while (ds < out.size() || dr < in.size()) {
    int progressed = 0;
    bool no_slot = false;
    while (ps < out.size() && ps - ds < static_cast<size_t>(w.send)) {
      xfer_t* x = &sx[ps];
      const Msg& m = out[ps];
      const char* from = m.device ? dout.base + dout.off[ps] : nullptr;
      if (m.lent) {
        memset(x, 0, sizeof *x);
        x->device = m.device;
        char* slot = nullptr;
        if (ops->lend_send(c, m.len, x, &slot) != WEFT_SUCCESS)
          return Fail(rank, Describe(rank, "to", peer, ps, m) + ": lend_send");
        if (!slot) {
          no_slot = true;
          break;
        }
        // Copies and reductions by turns (max(a, a) = a): both are how fused steps fill slots.
        weft_result_t res = WEFT_SUCCESS;
        if (!m.device)
          memcpy(slot, src[ps].data(), m.len);
        else if (ps % 2)
          res = dev->ops->copy(fq, slot, from, m.len);
        else
          res = dev->ops->reduce(fq, slot, nullptr, from, from, m.len, WEFT_UINT8, WEFT_MAX, 0);
        if (res == WEFT_SUCCESS && m.device) res = dev->ops->fence(fq, &b->fill[ps]);
        if (res != WEFT_SUCCESS)
          return Fail(rank, Describe(rank, "to", peer, ps, m) + ": filling the lent slot");
        ps++;
        progressed = 1;
        continue;
      }
      if (pc < ps) break;
      memset(x, 0, sizeof *x);
      x->device = m.device;
      const void* buf = m.device ? from : static_cast<const void*>(src[ps].data());
      if (ops->post_send(c, buf, m.len, x) != WEFT_SUCCESS)
        return Fail(rank, Describe(rank, "to", peer, ps, m) + ": post_send");
      pc = ++ps;
      progressed = 1;
    }
    // Commits in lending order once the run of lent messages is all lent (or no slot is free,
    // or the window is full): several slots are lent at once.
    if (pc < ps &&
        (no_slot || ps == out.size() || !out[ps].lent || ps - ds >= static_cast<size_t>(w.send))) {
      for (; pc < ps; pc++) {
        int done = 1;
        if (out[pc].device && dev->ops->poll(fq, b->fill[pc], &done) != WEFT_SUCCESS)
          return Fail(rank, Describe(rank, "to", peer, pc, out[pc]) + ": filling the lent slot");
        if (!done) break;
        if (ops->commit_send(c, &sx[pc]) != WEFT_SUCCESS)
          return Fail(rank, Describe(rank, "to", peer, pc, out[pc]) + ": commit_send");
        progressed = 1;
      }
    }
    while (pr < in.size() && pr - dr < static_cast<size_t>(w.recv)) {
      xfer_t* x = &rx[pr];
      memset(x, 0, sizeof *x);
      x->device = in[pr].device;
      weft_result_t res;
      if (in[pr].inplace)
        res = ops->post_recv_inplace(c, in[pr].len, x);
      else
        res = ops->post_recv(
            c, in[pr].device ? din.base + din.off[pr] : static_cast<void*>(dst[pr].data()),
            in[pr].len, x);
      if (res != WEFT_SUCCESS)
        return Fail(rank, Describe(rank, "from", peer, pr, in[pr]) + ": post_recv");
      pr++;
      progressed = 1;
    }
    if (ops->progress(c, &progressed) != WEFT_SUCCESS)
      return Fail(rank, "progress with rank " + std::to_string(peer));
    while (ds < ps && sx[ds].complete) {
      ds++;
      progressed = 1;
    }
    // Receives retire in posting order, so in-place ones are released in that order.
    while (dr < pr && rx[dr].complete) {
      const Msg& m = in[dr];
      xfer_t* x = &rx[dr];
      std::string what = Describe(rank, "from", peer, dr, m);
      const uint8_t* got = dst[dr].data();
      if (m.inplace || m.device) {
        const void* from = m.inplace ? static_cast<const void*>(x->data) : din.base + din.off[dr];
        if (m.len && !from) return what + ": complete without data";
        tmp.assign(m.len + 1, 0);
        if (m.len && (dev->ops->copy(q, tmp.data(), from, m.len) != WEFT_SUCCESS ||
                      dev->ops->drain(q, 20000) != WEFT_SUCCESS))
          return Fail(rank, what + ": reading it back");
        got = tmp.data();
      }
      std::string bad = Compare(got, peer, dr, m.len);
      if (!bad.empty()) return what + bad;
      if (m.inplace && ops->release_recv(c, x) != WEFT_SUCCESS)
        return Fail(rank, what + ": release_recv");
      dr++;
      progressed = 1;
    }
    if (progressed) continue;
    if (NowSeconds() > deadline)
      return "rank " + std::to_string(rank) + ": stuck with rank " + std::to_string(peer) +
             ": sent " + std::to_string(ds) + "/" + std::to_string(out.size()) + ", received " +
             std::to_string(dr) + "/" + std::to_string(in.size());
    // A fill in flight wakes nobody: look again soon.
    if (ops->wait(&c, 1, pc < ps ? 1 : 50, kWaitSpinUs) != WEFT_SUCCESS)
      return Fail(rank, "wait on rank " + std::to_string(peer));
  }
  return "";
}

}  // namespace

std::string WaitForFailure(conn_t* c, dev_engine_t* dev, size_t len, int nrecvs, int nsends,
                           int timeout_ms, std::string* msg, double* seconds) {
  int total = nrecvs + nsends;
  void* p = nullptr;
  if (dev->ops->alloc(dev, len * total, 0, &p) != WEFT_SUCCESS)
    return std::string("alloc: ") + err_last();
  char* buf = static_cast<char*>(p);
  // Leaked on purpose (the memory too): after a failure the connection may still point at them.
  std::vector<xfer_t>* xs = new std::vector<xfer_t>(total);
  memset(xs->data(), 0, sizeof(xfer_t) * xs->size());
  double start = NowSeconds();
  weft_result_t res = WEFT_SUCCESS;
  for (int i = 0; res == WEFT_SUCCESS && i < total; i++) {
    (*xs)[i].device = 1;
    res = i < nrecvs ? c->ops->post_recv(c, buf + len * i, len, &(*xs)[i])
                     : c->ops->post_send(c, buf + len * i, len, &(*xs)[i]);
  }
  while (res == WEFT_SUCCESS && NowSeconds() - start < timeout_ms / 1000.0) {
    int progressed = 0;
    res = c->ops->progress(c, &progressed);
    if (res == WEFT_SUCCESS) res = c->ops->wait(&c, 1, 200, kWaitSpinUs);
  }
  *seconds = NowSeconds() - start;
  if (res == WEFT_SUCCESS) return "no failure within " + std::to_string(timeout_ms) + " ms";
  *msg = err_last();
  return "";
}

// ---- lending ---------------------------------------------------------------------------------

namespace {

// What LendUntilFull's transfers point at: kept until the connection is closed.
struct LendState {
  DevArea src;
  std::vector<xfer_t> sx;
};

}  // namespace

std::string LendUntilFull(conn_t* c, dev_engine_t* dev, int rank, size_t len, int total,
                          const std::function<std::string()>& release, int* lent_at_once,
                          int* stalled_at, int timeout_ms) {
  int peer = c->peer;
  const transport_ops_t* ops = c->ops;
  std::string who = "rank " + std::to_string(rank) + " lending to rank " + std::to_string(peer);
  dev_queue_t* q = nullptr;
  if (dev->ops->queue_create(dev, &q) != WEFT_SUCCESS) return Fail(rank, "queue_create");
  QueueGuard guard{dev, q};
  // Leaked on a failure, as in Drive: the connection may still point at them.
  LendState* st = new LendState;
  std::vector<Msg> msgs(static_cast<size_t>(total), Msg{true, len, false, true});
  std::string err = st->src.Alloc(dev, msgs);
  if (!err.empty()) return who + ": " + err;
  std::vector<uint8_t> pattern(len);
  for (int m = 0; m < total; m++) {
    for (size_t j = 0; j < len; j++) pattern[j] = Byte(rank, static_cast<size_t>(m), j);
    if (dev->ops->copy(q, st->src.base + st->src.off[m], pattern.data(), len) != WEFT_SUCCESS ||
        dev->ops->drain(q, 20000) != WEFT_SUCCESS)
      return Fail(rank, "filling device buffers");
  }
  st->sx.assign(static_cast<size_t>(total), xfer_t{});
  std::vector<char*> slots;
  int m = 0;
  auto lend = [&](char** slot) {
    memset(&st->sx[m], 0, sizeof(xfer_t));
    st->sx[m].device = 1;
    return ops->lend_send(c, len, &st->sx[m], slot);
  };
  auto fill = [&](char* slot, int i) {
    return dev->ops->copy(q, slot, st->src.base + st->src.off[i], len);
  };
  auto progress = [&]() {
    int progressed = 0;
    if (ops->progress(c, &progressed) != WEFT_SUCCESS) return false;
    return progressed || ops->wait(&c, 1, 50, kWaitSpinUs) == WEFT_SUCCESS;
  };

  // The slots of earlier messages (the handshake's) come back only once their completions are
  // polled: poll until 50 ms pass without progress, so that the ring starts whole (else fewer
  // are lent at once, as seen once under load: 0 of 2).
  for (double quiet_until = NowSeconds() + 0.05; NowSeconds() < quiet_until;) {
    int progressed = 0;
    if (ops->progress(c, &progressed) != WEFT_SUCCESS) return Fail(rank, who + ": progress");
    if (progressed)
      quiet_until = NowSeconds() + 0.05;
    else
      (void)ops->wait(&c, 1, 10, kWaitSpinUs);
  }
  // Lent and not committed: the ring has no more than its capacity to lend.
  for (char* slot = nullptr; m < total; m++) {
    if (lend(&slot) != WEFT_SUCCESS) return Fail(rank, who + ": lend_send");
    if (!slot) break;
    slots.push_back(slot);
  }
  *lent_at_once = m;
  if (m == total) return who + ": lent all " + std::to_string(total) + " slots at once";
  for (int i = 0; i < m; i++)
    if (fill(slots[i], i) != WEFT_SUCCESS) return Fail(rank, who + ": filling a lent slot");
  if (dev->ops->drain(q, 20000) != WEFT_SUCCESS) return Fail(rank, who + ": filling lent slots");
  for (int i = 0; i < m; i++)
    if (ops->commit_send(c, &st->sx[i]) != WEFT_SUCCESS) return Fail(rank, who + ": commit_send");

  // One at a time until the peer, which receives nothing yet, holds up every slot.
  double stalled_since = -1, deadline = NowSeconds() + timeout_ms / 1000.0;
  for (bool after_release = false;;) {
    if (m == total) {
      if (after_release) break;
      return who + ": never ran out of slots in " + std::to_string(total) + " messages";
    }
    char* slot = nullptr;
    if (lend(&slot) != WEFT_SUCCESS) return Fail(rank, who + ": lend_send");
    if (slot) {
      if (fill(slot, m) != WEFT_SUCCESS || dev->ops->drain(q, 20000) != WEFT_SUCCESS)
        return Fail(rank, who + ": filling a lent slot");
      if (ops->commit_send(c, &st->sx[m]) != WEFT_SUCCESS) return Fail(rank, who + ": commit_send");
      m++;
      stalled_since = -1;
      continue;
    }
    if (!progress()) return Fail(rank, who + ": progress");
    if (NowSeconds() > deadline)
      return who + ": stuck at message " + std::to_string(m) + " of " + std::to_string(total);
    if (after_release) continue;
    if (stalled_since < 0) {
      stalled_since = NowSeconds();
    } else if (NowSeconds() - stalled_since > 0.3) {
      *stalled_at = m;
      err = release();
      if (!err.empty()) return err;
      after_release = true;
    }
  }
  for (int d = 0; d < total;) {
    if (st->sx[d].complete) {
      d++;
      continue;
    }
    if (!progress()) return Fail(rank, who + ": progress");
    if (NowSeconds() > deadline)
      return who + ": message " + std::to_string(d) + " of " + std::to_string(total) +
             " never completed";
  }
  delete st;
  return "";
}

// Whether the last error is WEFT_ERR_INTERNAL and names rank `peer`.
static std::string RefusedNaming(weft_result_t res, int peer, const std::string& what) {
  if (res != WEFT_ERR_INTERNAL) return what + " was not refused (" + std::to_string(res) + ")";
  if (std::string(err_last()).find("rank " + std::to_string(peer)) == std::string::npos)
    return what + ": the message does not name rank " + std::to_string(peer) + ": " + err_last();
  return "";
}

std::string SendThenLendWithoutCommit(conn_t* c, dev_engine_t* dev, int rank, size_t before,
                                      int lent, size_t len, size_t slot, std::vector<xfer_t>* xs,
                                      int timeout_ms) {
  int peer = c->peer;
  const transport_ops_t* ops = c->ops;
  std::string err = Drive(c, dev, rank, {{true, before, false}}, {}, Windows{1, 1}, timeout_ms);
  if (!err.empty()) return err;
  xs->assign(static_cast<size_t>(lent) + 1, xfer_t{});
  for (xfer_t& x : *xs) x.device = 1;
  char* p = nullptr;
  xfer_t& other = xs->back();  // never lent
  err = RefusedNaming(ops->lend_send(c, 0, &other, &p), peer, "an empty lent send");
  if (err.empty())
    err = RefusedNaming(ops->lend_send(c, slot + 1, &other, &p), peer, "a lent send of slot + 1");
  if (err.empty())
    err = RefusedNaming(ops->commit_send(c, &other), peer, "a commit with nothing lent");
  if (!err.empty()) return "rank " + std::to_string(rank) + ": " + err;

  dev_queue_t* q = nullptr;
  if (dev->ops->queue_create(dev, &q) != WEFT_SUCCESS) return Fail(rank, "queue_create");
  QueueGuard guard{dev, q};
  void* src = nullptr;
  if (dev->ops->alloc(dev, len, 0, &src) != WEFT_SUCCESS) return Fail(rank, "alloc");
  std::vector<uint8_t> pattern(len, 0xA5);
  err = dev->ops->copy(q, src, pattern.data(), len) == WEFT_SUCCESS ? "" : "copy";
  double deadline = NowSeconds() + timeout_ms / 1000.0;
  for (int i = 0; i < lent && err.empty();) {
    if (ops->lend_send(c, len, &(*xs)[i], &p) != WEFT_SUCCESS) {
      err = "lend_send";
    } else if (p) {
      if (dev->ops->copy(q, p, src, len) != WEFT_SUCCESS) err = "filling a lent slot";
      i++;
    } else {
      int progressed = 0;
      if (ops->progress(c, &progressed) != WEFT_SUCCESS) err = "progress";
      if (NowSeconds() > deadline) return "rank " + std::to_string(rank) + ": no slot to lend";
    }
  }
  if (err.empty() && dev->ops->drain(q, 20000) != WEFT_SUCCESS) err = "filling lent slots";
  // Progress while holding them, as an executor would: still nothing may reach the peer.
  for (double until = NowSeconds() + 0.1; err.empty() && NowSeconds() < until;) {
    int progressed = 0;
    if (ops->progress(c, &progressed) != WEFT_SUCCESS ||
        ops->wait(&c, 1, 10, kWaitSpinUs) != WEFT_SUCCESS)
      err = "progress while holding lent slots";
  }
  // The filled slots are ready, but a commit out of lending order is refused.
  if (err.empty() && lent > 1)
    err = RefusedNaming(ops->commit_send(c, &(*xs)[1]), peer, "a commit out of lending order");
  dev->ops->release(dev, src, 0);
  return err.empty() ? "" : Fail(rank, err);
}

std::string ReceiveThenNothing(conn_t* c, dev_engine_t* dev, int rank, size_t before, size_t len,
                               xfer_t* x, int timeout_ms) {
  int peer = c->peer;
  std::string err = Drive(c, dev, rank, {}, {{true, before, false}}, Windows{1, 1}, timeout_ms);
  if (!err.empty()) return err;
  std::string what = "rank " + std::to_string(rank) + " receiving from rank " +
                     std::to_string(peer) + " after it closed with lent slots";
  memset(x, 0, sizeof *x);
  x->device = 1;
  weft_result_t res = c->ops->post_recv_inplace(c, len, x);
  double deadline = NowSeconds() + timeout_ms / 1000.0;
  while (res == WEFT_SUCCESS && !x->complete && NowSeconds() < deadline) {
    int progressed = 0;
    res = c->ops->progress(c, &progressed);
    if (res == WEFT_SUCCESS && !progressed) res = c->ops->wait(&c, 1, 50, kWaitSpinUs);
  }
  if (x->complete) return what + ": a message arrived from a slot never committed";
  if (res == WEFT_SUCCESS)
    return what + ": no failure within " + std::to_string(timeout_ms) + " ms";
  if (std::string(err_last()).find("rank " + std::to_string(peer)) == std::string::npos)
    return what + ": the failure does not name the peer: " + err_last();
  return "";
}

std::string LeakCheck(int rank) {
#ifdef WEFT_TEST_LSAN
  if (__lsan_do_recoverable_leak_check())
    return "rank " + std::to_string(rank) +
           ": LeakSanitizer found leaks (its report is in the log)";
#endif
  (void)rank;
  return "";
}
