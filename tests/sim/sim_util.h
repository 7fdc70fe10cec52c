// sim_util.h -- shared by weft-sim's tests: one model to test with and one call to run it.
#ifndef WEFT_TESTS_SIM_SIM_UTIL_H_
#define WEFT_TESTS_SIM_SIM_UTIL_H_

#include <gtest/gtest.h>

#include <cmath>
#include <cstddef>

extern "C" {
#include "collectives/algorithms.h"
#include "common/error.h"
#include "tools/sim/sim.h"
}

namespace simtest {

// A fast network (10 GB/s, 5 us) where alpha and beta terms both matter over 1 KiB..64 MiB.
inline sim_model_t Model(size_t slice_bytes = 65536, int headers = 1) {
  sim_model_t m;
  sim_model_defaults(&m);
  m.alpha = m.inter_alpha = 5e-6;
  m.beta = m.inter_beta = 1e-10;
  m.gamma = 2e-10;
  m.beta_mem = 0;
  m.slice_bytes = slice_bytes;
  m.headers = headers;
  return m;
}

// Seconds the simulated call takes; fails the test (and returns NaN) if the simulation fails.
inline double Time(const sim_model_t& m, weft_coll_t coll, weft_algo_t algo, int p, size_t count,
                   int root = 0, weft_dtype_t dtype = WEFT_FLOAT32) {
  sim_call_t c = {coll, algo, p, count, dtype, root};
  sim_result_t r;
  weft_result_t res = sim_run(&m, &c, nullptr, nullptr, &r);
  EXPECT_EQ(res, WEFT_SUCCESS) << weft_coll_name(coll) << " " << weft_algo_name(algo) << " p=" << p
                               << " count=" << count << ": " << err_last();
  return res == WEFT_SUCCESS ? r.time : NAN;
}

// |a - b| <= 1e-9 relative: the simulator adds the same terms in another order.
#define EXPECT_SAME_TIME(a, b) EXPECT_NEAR((a), (b), 1e-9 * std::fabs(b))

}  // namespace simtest

#endif  // WEFT_TESTS_SIM_SIM_UTIL_H_
