// error_test.cc -- the last-error message: context reads outside-in, and a timeout's message
// leads with "Timed out: " (the words torch's backends use) whatever context is added to it.
#include <gtest/gtest.h>

#include <string>

extern "C" {
#include "common/error.h"
}

namespace {

std::string last() { return err_last(); }

TEST(Error, ContextReadsOutsideIn) {
  EXPECT_EQ(WEFT_ERR(WEFT_ERR_REMOTE, "peer closed"), WEFT_ERR_REMOTE);
  EXPECT_EQ(err_context(WEFT_ERR_REMOTE, "recv from rank %d", 1), WEFT_ERR_REMOTE);
  err_context(WEFT_ERR_REMOTE, "rank %d: all_reduce", 2);
  EXPECT_EQ(last().rfind("rank 2: all_reduce: recv from rank 1: peer closed [", 0), 0u) << last();
}

TEST(Error, OnlyTimeoutsSayTimedOut) {
  WEFT_ERR(WEFT_ERR_MISMATCH, "count 3 here, 4 there");
  EXPECT_EQ(last().find("Timed out"), std::string::npos) << last();
}

TEST(Error, TimeoutLeadsWithTimedOutAndKeepsContextAfterIt) {
  EXPECT_EQ(WEFT_ERR(WEFT_ERR_TIMEOUT, "no progress for %d ms (WEFT_TIMEOUT_MS)", 1000),
            WEFT_ERR_TIMEOUT);
  EXPECT_EQ(last().rfind("Timed out: no progress for 1000 ms (WEFT_TIMEOUT_MS) [", 0), 0u)
      << last();
  err_context(WEFT_ERR_TIMEOUT, "barrier #%d", 1);
  err_context(WEFT_ERR_TIMEOUT, "rank %d", 0);
  EXPECT_EQ(last().rfind("Timed out: rank 0: barrier #1: no progress for 1000 ms", 0), 0u)
      << last();
  EXPECT_EQ(last().find("Timed out", 1), std::string::npos) << "said twice: " << last();
}

TEST(Error, TimeoutThatSaysItAlreadyIsNotDoubled) {
  WEFT_ERR(WEFT_ERR_TIMEOUT, "Timed out: %s", "accept");
  EXPECT_EQ(last().rfind("Timed out: accept [", 0), 0u) << last();
}

TEST(Error, MessageCopiedFromAnotherThreadKeepsItsWords) {
  WEFT_ERR(WEFT_ERR_TIMEOUT, "no answer");
  std::string msg = last();
  err_clear();
  EXPECT_EQ(last(), "");
  err_set_message(WEFT_ERR_TIMEOUT, msg.c_str());
  err_context(WEFT_ERR_TIMEOUT, "rank 3");
  EXPECT_EQ(last().rfind("Timed out: rank 3: no answer [", 0), 0u) << last();
}

}  // namespace
