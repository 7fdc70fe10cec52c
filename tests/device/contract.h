// contract.h -- the checks every device engine must pass (device/device.h), written once and run
// against each engine: the emulated one everywhere, the CUDA one where a GPU is present, so that
// a GPU run checks exactly what the emulation is checked for.
#ifndef WEFT_TESTS_DEVICE_CONTRACT_H_
#define WEFT_TESTS_DEVICE_CONTRACT_H_

#include <gtest/gtest.h>

#include <cstddef>
#include <string>
#include <utility>
#include <vector>

#include "common/error.h"
#include "device/device.h"

// What a test binary supplies for its engine.
struct EngineParam {
  const char *name;  // for dev_engine_open
  // Enqueues a copy on a user's stream (from stream_create), as the user's own work would be:
  // the interface has no call for that, since weft never enqueues on a user's stream itself.
  weft_result_t (*user_copy)(dev_engine_t *e, void *stream, void *dst, const void *src,
                             size_t bytes);
};

inline std::string EngineParamName(const testing::TestParamInfo<EngineParam> &info) {
  return info.param.name;
}

class EngineContract : public testing::TestWithParam<EngineParam> {
 protected:
  void SetUp() override;
  void TearDown() override;

  // Copies between device and (pageable) host memory on q_ and waits for it.
  void ToHost(void *host, const void *dev, size_t bytes);
  void FromHost(void *dev, const void *host, size_t bytes);
  void *Alloc(size_t bytes, int host_pinned);  // released by TearDown

  dev_engine_t *e_ = nullptr;
  const dev_ops_t *ops_ = nullptr;
  dev_queue_t *q_ = nullptr;
  std::vector<std::pair<void *, int>> allocs_;
};

// Bounded waits in the tests: long against any queue's work, short against a hung test.
constexpr int kWaitMs = 10000;

#define ASSERT_OK(call) ASSERT_EQ(WEFT_SUCCESS, (call)) << err_last()
#define EXPECT_OK(call) EXPECT_EQ(WEFT_SUCCESS, (call)) << err_last()

// The child side of the IPC test (contract.cc's main runs it when the environment asks).
int IpcChildMain(const char *spec);
// The child side of WorkRunsWhileAGateHoldsAStream (engine name).
int GateChildMain(const char *name);

#endif  // WEFT_TESTS_DEVICE_CONTRACT_H_
