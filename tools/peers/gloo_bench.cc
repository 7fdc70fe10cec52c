// gloo_bench.cc -- times Gloo's ring, ring-chunked and halving-doubling all-reduce over its TCP transport.
// Ranks come from RANK / WORLD_SIZE and meet through a FileStore in $GLOO_STORE_DIR (compare.sh
// makes a fresh one per run: stale keys from an earlier run would pair ranks with dead peers).
#include <gloo/allreduce_halving_doubling.h>
#include <gloo/allreduce_ring.h>
#include <gloo/allreduce_ring_chunked.h>
#include <gloo/barrier_all_to_all.h>
#include <gloo/config.h>
#include <gloo/rendezvous/context.h>
#include <gloo/rendezvous/file_store.h>
#include <gloo/transport/tcp/device.h>

#include <functional>
#include <memory>
#include <vector>

#include "peer_common.h"

using Make = std::function<std::unique_ptr<gloo::Algorithm>(float *, int)>;

int main(int argc, char **argv) {
  int rank = atoi(getenv("RANK")), nranks = atoi(getenv("WORLD_SIZE"));
  peer_args_t a = peer_parse_args(argc, argv);
  gloo::transport::tcp::attr attr("127.0.0.1");
  auto dev = gloo::transport::tcp::CreateDevice(attr);
  gloo::rendezvous::FileStore store(getenv("GLOO_STORE_DIR"));
  auto ctx = std::make_shared<gloo::rendezvous::Context>(rank, nranks);
  ctx->setTimeout(std::chrono::seconds(60));
  ctx->connectFullMesh(store, dev);
  std::shared_ptr<gloo::Context> c = ctx;

  // Built once per size and reused, as torch's ProcessGroupGloo caches them: setup (buffer
  // registration, pair slots) is not part of the timed all-reduce.
  std::vector<std::pair<const char *, Make>> algos = {
      {"ring", [&](float *p, int n) { return std::unique_ptr<gloo::Algorithm>(new gloo::AllreduceRing<float>(c, {p}, n)); }},
      {"ring_chunked", [&](float *p, int n) { return std::unique_ptr<gloo::Algorithm>(new gloo::AllreduceRingChunked<float>(c, {p}, n)); }},
      {"halving_doubling", [&](float *p, int n) { return std::unique_ptr<gloo::Algorithm>(new gloo::AllreduceHalvingDoubling<float>(c, {p}, n)); }},
  };
  std::vector<float> buf(a.maxbytes / sizeof(float)), pristine(buf.size());
  std::vector<double> t(peer_max_iters(&a));
  peer_fill(pristine.data(), pristine.size(), rank);
  gloo::BarrierAllToAll barrier(c);
  for (auto &algo : algos) {
    if (rank == 0) peer_header("gloo", algo.first, nranks);
    for (size_t bytes = a.minbytes; bytes <= a.maxbytes; bytes *= 2) {
      int count = (int)(bytes / sizeof(float)), iters = peer_iters(&a, bytes);
      auto run = algo.second(buf.data(), count);
      for (int i = -a.warmup; i < iters; i++) {
        memcpy(buf.data(), pristine.data(), bytes);  // in place: refill outside the timed region
        barrier.run();
        double t0 = peer_now_us();
        run->run();
        if (i >= 0) t[i] = peer_now_us() - t0;
      }
      double wrong = (double)peer_check(buf.data(), count, nranks);
      gloo::AllreduceRing<double>(c, {t.data()}, iters, gloo::ReductionFunction<double>::max).run();
      gloo::AllreduceRing<double>(c, {&wrong}, 1).run();
      if (rank == 0) peer_row(bytes, iters, peer_median(t.data(), iters), nranks, (long)wrong);
    }
  }
  return 0;
}
