// config_test.cc -- the WEFT_* knob table: defaults, parsing and the errors for bad values.
#include <gtest/gtest.h>

#include <map>
#include <string>

extern "C" {
#include "common/config.h"
#include "common/error.h"
}

namespace {

const char* fake_getenv(void* ctx, const char* name) {
  auto* env = static_cast<std::map<std::string, std::string>*>(ctx);
  auto it = env->find(name);
  return it == env->end() ? nullptr : it->second.c_str();
}

TEST(Config, DefaultsWhenNothingIsSet) {
  std::map<std::string, std::string> env;
  weft_config_t cfg;
  ASSERT_EQ(config_load(&cfg, fake_getenv, &env), WEFT_SUCCESS);
  EXPECT_EQ(cfg.timeout_ms, 30000);
  EXPECT_EQ(cfg.nsocks, 1);
  EXPECT_EQ(cfg.slice_bytes, 65536u);
  EXPECT_STREQ(cfg.socket_ifname, "");
  EXPECT_EQ(cfg.spin_us, 1000);
}

TEST(Config, ReadsValuesAndSizeSuffixes) {
  std::map<std::string, std::string> env = {
      {"WEFT_TIMEOUT_MS", "1500"}, {"WEFT_NSOCKS", "4"}, {"WEFT_SLICE_BYTES", "1M"},
      {"WEFT_SOCKET_IFNAME", "^lo,docker"}};
  weft_config_t cfg;
  ASSERT_EQ(config_load(&cfg, fake_getenv, &env), WEFT_SUCCESS) << err_last();
  EXPECT_EQ(cfg.timeout_ms, 1500);
  EXPECT_EQ(cfg.nsocks, 4);
  EXPECT_EQ(cfg.slice_bytes, 1u << 20);
  EXPECT_STREQ(cfg.socket_ifname, "^lo,docker");
}

TEST(Config, RejectsMalformedAndOutOfRangeValues) {
  struct Case {
    const char *name, *value, *expect;
  } cases[] = {
      {"WEFT_TIMEOUT_MS", "abc", "WEFT_TIMEOUT_MS=\"abc\" is not an integer"},
      {"WEFT_TIMEOUT_MS", "10x", "is not an integer"},
      {"WEFT_NSOCKS", "0", "WEFT_NSOCKS=0 is out of range [1, 16]"},
      {"WEFT_NSOCKS", "17", "out of range"},
      {"WEFT_SLICE_BYTES", "12", "out of range"},
  };
  for (const Case& c : cases) {
    std::map<std::string, std::string> env = {{c.name, c.value}};
    weft_config_t cfg;
    EXPECT_EQ(config_load(&cfg, fake_getenv, &env), WEFT_ERR_INVALID_ARGUMENT) << c.name;
    EXPECT_NE(std::string(err_last()).find(c.expect), std::string::npos) << err_last();
  }
}

TEST(Config, EveryKnobIsDescribed) {
  ASSERT_GT(config_knob_count(), 5);
  for (int i = 0; i < config_knob_count(); i++) {
    const char *name, *def, *desc;
    config_knob_info(i, &name, &def, &desc);
    EXPECT_EQ(std::string(name).rfind("WEFT_", 0), 0u);
    EXPECT_GT(strlen(desc), 10u);
  }
}

}  // namespace
