// reference.cc -- weft-soak's inputs and the results expected of them, computed on the host.
//
// The expected output never comes from weft: each element is recomputed from the generator of
// every rank's input. Two kinds of input, so that every comparison can be bit-exact:
//   - random bits (integers: every op but avg; floats: min and max over integers the dtype holds
//     exactly, and everything that only moves data). Wrapping integer sums and products and all
//     minima and maxima give the same bits in any order, so the order a schedule reduces in
//     cannot matter, and random data makes a misplaced or stale block show.
//   - tests/collectives_mp/patterns.h (float sum, prod and avg, integer avg): small values whose
//     sums, products and means are exact in every dtype and order, as the multi-process tests use.
#include <cstring>
#include <utility>

#include "tests/collectives_mp/patterns.h"
#include "tests/collectives_mp/typed.h"
#include "tools/soak/soak.h"

static const size_t kGuard = 64;  // bytes after each buffer that no call may write
static const unsigned char kFill = 0x5a;

uint64_t soak_mix(uint64_t x) {  // splitmix64's finalizer
  x += 0x9e3779b97f4a7c15ULL;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
  return x ^ (x >> 31);
}

Rng::Rng(uint64_t seed, uint64_t stream, uint64_t index)
    : s_(soak_mix(soak_mix(seed) ^ soak_mix(stream * 0x632be59bd9b4e019ULL + index))) {}

uint64_t Rng::next() {
  s_ += 0x9e3779b97f4a7c15ULL;
  return soak_mix(s_);
}

// Rank r's element i for data that is only moved: random, and exactly representable in d.
static int64_t moved_value(weft_dtype_t d, int r, size_t i, uint64_t salt) {
  uint64_t h = soak_mix(salt ^ ((uint64_t)r << 48) ^ (uint64_t)i * 0xd6e8feb86659fd93ULL);
  switch (d) {
    case WEFT_FLOAT16:
      return (int64_t)(h % 4001) - 2000;  // |v| <= 2048: exact
    case WEFT_BFLOAT16:
      return (int64_t)(h % 501) - 250;  // |v| <= 256: exact
    case WEFT_FLOAT32:
      return (int64_t)(h % (1u << 24)) - (1 << 23);
    case WEFT_FLOAT64:
      return (int64_t)(h % (1ULL << 53)) - (1LL << 52);
    case WEFT_FLOAT8_E4M3:
      return (int64_t)(h % 33) - 16;  // |v| <= 16: exact
    case WEFT_FLOAT8_E5M2:
      return (int64_t)(h % 17) - 8;  // |v| <= 8: exact
    default:
      return (int64_t)h;  // typed_store keeps the low bits: any value is fine
  }
}

static bool uses_patterns(weft_dtype_t d, weft_op_t op) {
  if (op == WEFT_AVG) return true;
  return is_float_dtype(d) && (op == WEFT_SUM || op == WEFT_PROD);
}

// v as dtype d holds it, widened back to 64 bits (sign- or zero-extended).
static int64_t narrow(weft_dtype_t d, int64_t v) {
  switch (d) {
    case WEFT_INT8:
      return (int8_t)v;
    case WEFT_UINT8:
      return (uint8_t)v;
    case WEFT_INT32:
      return (int32_t)v;
    case WEFT_UINT32:
      return (uint32_t)v;
    default:
      return v;
  }
}

static int64_t combine(weft_dtype_t d, weft_op_t op, int64_t acc, int64_t v) {
  acc = narrow(d, acc);
  v = narrow(d, v);
  bool u = d == WEFT_UINT64;  // the others are compared correctly as widened int64
  switch (op) {
    case WEFT_SUM:
      return narrow(d, (int64_t)((uint64_t)acc + (uint64_t)v));
    case WEFT_PROD:
      return narrow(d, (int64_t)((uint64_t)acc * (uint64_t)v));
    case WEFT_MIN:
      return (u ? (uint64_t)v < (uint64_t)acc : v < acc) ? v : acc;
    case WEFT_MAX:
      return (u ? (uint64_t)v > (uint64_t)acc : v > acc) ? v : acc;
    default:
      return acc;
  }
}

static int64_t reduce_input(weft_dtype_t d, weft_op_t op, int r, int n, size_t i, uint64_t salt) {
  if (uses_patterns(d, op)) return pattern_input(d, op, r, n, i + salt % 1000003);
  return moved_value(d, r, i, salt);
}

static int64_t reduce_expected(weft_dtype_t d, weft_op_t op, int n, size_t i, uint64_t salt) {
  if (uses_patterns(d, op)) return pattern_expected(d, op, n, i + salt % 1000003);
  int64_t acc = moved_value(d, 0, i, salt);
  for (int r = 1; r < n; r++) acc = combine(d, op, acc, moved_value(d, r, i, salt));
  return acc;
}

// Elements rank src sends rank dst in an all_to_allv or in message `tag` of a p2p group: up to
// `bound`, 0 often, drawn from salt so that both ends know it.
static size_t pair_count(uint64_t salt, int src, int dst, int tag, size_t bound) {
  uint64_t h = soak_mix(salt ^ 0x5bd1e995ULL ^ ((uint64_t)src << 40) ^ ((uint64_t)dst << 20) ^
                        (uint64_t)tag);
  return h % 4 == 0 ? 0 : (size_t)((h >> 8) % (bound + 1));
}

// How many messages (0, 1 or 2, tags 0 and 1) rank src sends rank dst in a p2p group.
static int pair_messages(uint64_t salt, int src, int dst) {
  if (src == dst) return 0;
  return (int)(soak_mix(salt ^ 0x27d4eb2fULL ^ ((uint64_t)src << 32) ^ (uint64_t)dst) % 3);
}

// Element i of rank src's message to dst (tag `tag`): data that is only moved, different for
// every pair and tag.
static int64_t pair_value(weft_dtype_t d, int src, int dst, int tag, size_t i, uint64_t salt) {
  return moved_value(d, src, ((size_t)dst * 2 + (size_t)tag) * 1000003u + i, salt);
}

static void fill_guarded(SoakOp* op, size_t send_n, size_t recv_n, size_t es) {
  op->a.assign(send_n * es + kGuard, (char)kFill);
  op->b.assign(recv_n * es + kGuard, (char)kFill);
  op->a_used = send_n * es;
  op->b_used = recv_n * es;
  op->bytes = (send_n > recv_n ? send_n : recv_n) * es;
  op->want.assign(op->b.begin(), op->b.begin() + (long)op->b_used);  // gaps keep the fill
  op->recv_n = recv_n;
  op->out = op->b.data();
}

// all_to_allv: blocks packed in rank order on the send side with a gap of 0-2 elements before
// each, and in reverse rank order on the receive side, so that displacements matter.
static void prepare_all_to_allv(SoakOp* op, int rank, int n, uint64_t salt) {
  weft_call_t& k = op->call;
  size_t es = weft_dtype_size(k.dtype), p = (size_t)n;
  op->v_counts.assign(4 * p, 0);
  size_t *sc = &op->v_counts[0], *sd = sc + p, *rc = sd + p, *rd = rc + p;
  size_t at = 0;
  for (int j = 0; j < n; j++) {
    at += soak_mix(salt + (uint64_t)j) % 3;
    sc[j] = pair_count(salt, rank, j, 0, k.count);
    sd[j] = at;
    at += sc[j];
  }
  size_t send_n = at;
  at = 0;
  for (int i = n - 1; i >= 0; i--) {
    at += soak_mix(salt ^ (uint64_t)i) % 3;
    rc[i] = pair_count(salt, i, rank, 0, k.count);
    rd[i] = at;
    at += rc[i];
  }
  fill_guarded(op, send_n, at, es);
  for (int j = 0; j < n; j++)
    for (size_t e = 0; e < sc[j]; e++)
      typed_store(k.dtype, op->a.data(), sd[j] + e, pair_value(k.dtype, rank, j, 0, e, salt));
  for (int i = 0; i < n; i++)
    for (size_t e = 0; e < rc[i]; e++)
      typed_store(k.dtype, op->want.data(), rd[i] + e, pair_value(k.dtype, i, rank, 0, e, salt));
  k.sendbuf = op->a.data();
  k.recvbuf = op->b.data();
  k.send_counts = sc;
  k.send_displs = sd;
  k.recv_counts = rc;
  k.recv_displs = rd;
  op->input.assign(op->a.begin(), op->a.begin() + (long)op->a_used);
  op->input_at = op->a.data();
}

// p2p_group: every rank sends each other rank 0, 1 or 2 messages (tags 0 and 1) and receives
// what they send it, listing its ops in an order of its own, so that only the tags can pair them.
static void prepare_p2p_group(SoakOp* op, int rank, int n, uint64_t salt) {
  weft_call_t& k = op->call;
  size_t es = weft_dtype_size(k.dtype);
  struct Msg {
    bool send;
    int peer, tag;
    size_t count, at;
  };
  std::vector<Msg> msgs;
  size_t send_n = 0, recv_n = 0;
  for (int q = 0; q < n; q++) {
    for (int t = 0; t < pair_messages(salt, rank, q); t++) {
      size_t c = pair_count(salt, rank, q, t + 1, k.count);
      msgs.push_back({true, q, t, c, send_n});
      send_n += c;
    }
    for (int t = 0; t < pair_messages(salt, q, rank); t++) {
      size_t c = pair_count(salt, q, rank, t + 1, k.count);
      msgs.push_back({false, q, t, c, recv_n});
      recv_n += c;
    }
  }
  fill_guarded(op, send_n, recv_n, es);
  Rng order(salt, 0x9e37, (uint64_t)rank);
  for (size_t j = msgs.size(); j > 1; j--) std::swap(msgs[j - 1], msgs[order.below(j)]);
  for (const Msg& m : msgs) {
    char* base = m.send ? op->a.data() : op->b.data();
    for (size_t e = 0; e < m.count; e++) {
      if (m.send)
        typed_store(k.dtype, base, m.at + e, pair_value(k.dtype, rank, m.peer, m.tag, e, salt));
      else
        typed_store(k.dtype, op->want.data(), m.at + e,
                    pair_value(k.dtype, m.peer, rank, m.tag, e, salt));
    }
    op->p2p_ops.push_back({m.send ? WEFT_COLL_SEND : WEFT_COLL_RECV, base + m.at * es, m.count,
                           k.dtype, m.peer, m.tag});
  }
  k.ops = op->p2p_ops.data();
  k.nops = (int)op->p2p_ops.size();
  op->input.assign(op->a.begin(), op->a.begin() + (long)op->a_used);
  op->input_at = op->a.data();
}

void soak_prepare(SoakOp* op, int rank, int n, uint64_t salt, bool in_place, bool null_unused) {
  weft_call_t& k = op->call;
  if (k.coll == WEFT_COLL_ALL_TO_ALLV) return prepare_all_to_allv(op, rank, n, salt);
  if (k.coll == WEFT_COLL_P2P_GROUP) return prepare_p2p_group(op, rank, n, salt);
  weft_dtype_t d = k.dtype;
  size_t es = weft_dtype_size(d), count = k.count, p = (size_t)n;
  int root = k.root;
  bool is_root = rank == root;
  size_t send_n = count, recv_n = count;
  switch (k.coll) {
    case WEFT_COLL_ALL_GATHER:
    case WEFT_COLL_GATHER:
      recv_n = count * p;
      break;
    case WEFT_COLL_REDUCE_SCATTER:
    case WEFT_COLL_SCATTER:
      send_n = count * p;
      break;
    case WEFT_COLL_ALL_TO_ALL:
      send_n = recv_n = count * p;
      break;
    case WEFT_COLL_SEND:
      recv_n = 0;
      break;
    case WEFT_COLL_RECV:
      send_n = 0;
      break;
    case WEFT_COLL_BARRIER:
      send_n = recv_n = 0;
      break;
    default:
      break;
  }
  size_t a_n = send_n > recv_n ? send_n : recv_n;
  op->a.assign(a_n * es + kGuard, (char)kFill);
  op->b.assign(recv_n * es + kGuard, (char)kFill);
  op->a_used = a_n * es;
  op->b_used = recv_n * es;
  op->bytes = a_n * es;
  char* send = op->a.data();
  char* recv = op->b.data();
  // The in-place layouts of weft.h: NCCL's for all_gather and reduce_scatter, the same on the
  // root of gather and scatter, the same buffer for the others.
  if (in_place) {
    if (k.coll == WEFT_COLL_ALL_GATHER || (k.coll == WEFT_COLL_GATHER && is_root)) {
      recv = op->a.data();
      send = recv + (size_t)rank * count * es;
    } else if (k.coll == WEFT_COLL_REDUCE_SCATTER || (k.coll == WEFT_COLL_SCATTER && is_root)) {
      recv = send + (size_t)rank * count * es;
    } else if (k.coll != WEFT_COLL_GATHER && k.coll != WEFT_COLL_SCATTER &&
               k.coll != WEFT_COLL_SEND && k.coll != WEFT_COLL_RECV) {
      recv = send;
    }
  }
  bool reducing = k.coll == WEFT_COLL_ALL_REDUCE || k.coll == WEFT_COLL_REDUCE ||
                  k.coll == WEFT_COLL_REDUCE_SCATTER;
  // Only the root of a broadcast or scatter has input: elsewhere its buffer keeps the fill, so an
  // in-place broadcast that never reaches a rank leaves that rank's buffer wrong, not already
  // right.
  bool has_input = is_root || (k.coll != WEFT_COLL_BROADCAST && k.coll != WEFT_COLL_SCATTER);
  for (size_t i = 0; i < send_n && has_input; i++) {
    int64_t v;
    if (reducing)
      v = reduce_input(d, k.op, rank, n, i, salt);
    else if (k.coll == WEFT_COLL_BROADCAST || k.coll == WEFT_COLL_SCATTER)
      v = moved_value(d, root, i, salt);
    else
      v = moved_value(d, rank, i, salt);
    typed_store(d, send, i, v);
  }
  op->want.assign(recv_n * es, 0);
  op->recv_n = recv_n;
  for (size_t i = 0; i < recv_n; i++) {
    int64_t v;
    switch (k.coll) {
      case WEFT_COLL_ALL_GATHER:
      case WEFT_COLL_GATHER:
        v = moved_value(d, (int)(i / count), i % count, salt);
        break;
      case WEFT_COLL_SCATTER:
        v = moved_value(d, root, (size_t)rank * count + i, salt);
        break;
      case WEFT_COLL_ALL_TO_ALL:  // block i / count came from that rank's block `rank`
        v = moved_value(d, (int)(i / count), (size_t)rank * count + i % count, salt);
        break;
      case WEFT_COLL_REDUCE_SCATTER:
        v = reduce_expected(d, k.op, n, (size_t)rank * count + i, salt);
        break;
      case WEFT_COLL_BROADCAST:
        v = moved_value(d, root, i, salt);
        break;
      case WEFT_COLL_RECV:
        v = moved_value(d, root, i, salt);
        break;  // root: the sender
      default:
        v = reduce_expected(d, k.op, n, i, salt);
    }
    typed_store(d, op->want.data(), i, v);
  }
  op->out = recv;
  // The buffers a rank does not use may be NULL (weft.h): pass NULL where that is sometimes
  // chosen, so that any touch of them crashes here instead of passing unnoticed.
  if (k.coll == WEFT_COLL_REDUCE && !is_root && !in_place && null_unused) recv = nullptr;
  if (k.coll == WEFT_COLL_GATHER && !is_root) recv = nullptr;
  if (k.coll == WEFT_COLL_SCATTER && !is_root) send = nullptr;
  if (k.coll == WEFT_COLL_BROADCAST && !is_root && !in_place && null_unused) send = nullptr;
  if (k.coll == WEFT_COLL_SEND || k.coll == WEFT_COLL_BARRIER) recv = nullptr;
  if (k.coll == WEFT_COLL_RECV) send = nullptr;  // as weft_recv passes it
  k.sendbuf = send;
  k.recvbuf = recv;
  // An input apart from the output is read-only to weft: keep a copy to hold it to that.
  bool apart =
      !in_place || ((k.coll == WEFT_COLL_GATHER || k.coll == WEFT_COLL_SCATTER) && !is_root);
  if (send && apart && send_n) {
    op->input.assign(send, send + send_n * es);
    op->input_at = send;
  }
  bool checked = k.coll != WEFT_COLL_BARRIER && k.coll != WEFT_COLL_SEND &&
                 !((k.coll == WEFT_COLL_REDUCE || k.coll == WEFT_COLL_GATHER) && !is_root);
  if (!checked) op->out = nullptr;
}

static std::string guard_diff(const std::vector<char>& v, size_t used, const char* name) {
  for (size_t i = used; i < v.size(); i++)
    if ((unsigned char)v[i] != kFill)
      return std::string("wrote past the end of ") + name + ": byte " + std::to_string(i - used) +
             " after its " + std::to_string(used) + " bytes";
  return "";
}

std::string soak_verify(const SoakOp& op, int rank) {
  std::string diff = guard_diff(op.a, op.a_used, "the input buffer");
  if (diff.empty()) diff = guard_diff(op.b, op.b_used, "the output buffer");
  if (diff.empty() && op.out)
    diff = typed_compare(op.call.dtype, op.out, op.want.data(), op.recv_n);
  if (diff.empty() && op.input_at) {
    diff = typed_compare(op.call.dtype, op.input_at, op.input.data(),
                         op.input.size() / weft_dtype_size(op.call.dtype));
    if (!diff.empty()) diff = "changed its input (not in place): " + diff;
  }
  if (diff.empty()) return "";
  return "rank " + std::to_string(rank) + ": " + op.what + ": " + diff;
}
