// config_test.cc -- the WEFT_* knob table: defaults, parsing and the errors for bad values.
#include <gtest/gtest.h>

#include <sys/stat.h>
#include <unistd.h>

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

// A private file for WEFT_JOB_TOKEN_FILE tests, removed when it goes out of scope.
struct TokenFile {
  std::string path;
  TokenFile(const std::string& content, mode_t mode) {
    char tmpl[] = "/tmp/weft_token_XXXXXX";
    int fd = mkstemp(tmpl);
    path = tmpl;
    EXPECT_EQ(write(fd, content.data(), content.size()), (ssize_t)content.size());
    fchmod(fd, mode);
    close(fd);
  }
  ~TokenFile() { unlink(path.c_str()); }
};

TEST(Config, JobTokenFromTheVariableOrAFile) {
  std::map<std::string, std::string> env = {{"WEFT_JOB_TOKEN", "s3cret value"}};
  weft_config_t cfg;
  ASSERT_EQ(config_load(&cfg, fake_getenv, &env), WEFT_SUCCESS) << err_last();
  EXPECT_STREQ(cfg.job_token, "s3cret value");

  TokenFile f("from a file\n", 0600);
  env = {{"WEFT_JOB_TOKEN_FILE", f.path}};
  ASSERT_EQ(config_load(&cfg, fake_getenv, &env), WEFT_SUCCESS) << err_last();
  EXPECT_STREQ(cfg.job_token, "from a file");

  env = {};
  ASSERT_EQ(config_load(&cfg, fake_getenv, &env), WEFT_SUCCESS);
  EXPECT_STREQ(cfg.job_token, "");
}

TEST(Config, JobTokenErrorsNameThePathNeverTheToken) {
  TokenFile loose("hush-hush\n", 0644), empty("\n", 0600);
  struct Case {
    std::map<std::string, std::string> env;
    const char* expect;
  } cases[] = {
      {{{"WEFT_JOB_TOKEN", "hush-hush"}, {"WEFT_JOB_TOKEN_FILE", empty.path}}, "both"},
      {{{"WEFT_JOB_TOKEN_FILE", "/nonexistent/weft-token"}}, "/nonexistent/weft-token"},
      {{{"WEFT_JOB_TOKEN_FILE", loose.path}}, "chmod 600"},
      {{{"WEFT_JOB_TOKEN_FILE", empty.path}}, "is empty"},
      {{{"WEFT_JOB_TOKEN", "hush-hush" + std::string(2000, 'x')}}, "WEFT_JOB_TOKEN is longer"},
  };
  for (Case& c : cases) {
    weft_config_t cfg;
    EXPECT_EQ(config_load(&cfg, fake_getenv, &c.env), WEFT_ERR_INVALID_ARGUMENT) << c.expect;
    std::string err = err_last();
    EXPECT_NE(err.find(c.expect), std::string::npos) << err;
    EXPECT_EQ(err.find("hush-hush"), std::string::npos) << err;
  }
  // The loose file's error names it.
  std::map<std::string, std::string> env = {{"WEFT_JOB_TOKEN_FILE", loose.path}};
  weft_config_t cfg;
  config_load(&cfg, fake_getenv, &env);
  EXPECT_NE(std::string(err_last()).find(loose.path), std::string::npos) << err_last();
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
