// hmac_test.cc -- SHA-256 against the NIST examples (FIPS 180-4's SHA256.pdf) and HMAC-SHA256
// against RFC 4231's test cases.
#include "common/hmac.h"

#include <gtest/gtest.h>

#include <cstring>
#include <string>

namespace {

std::string Hex(const uint8_t* p, size_t n) {
  static const char digits[] = "0123456789abcdef";
  std::string s;
  for (size_t i = 0; i < n; i++) s += std::string{digits[p[i] >> 4], digits[p[i] & 15]};
  return s;
}

std::string Sha(const std::string& msg) {
  sha256_t s;
  uint8_t out[SHA256_BYTES];
  sha256_init(&s);
  sha256_update(&s, msg.data(), msg.size());
  sha256_final(&s, out);
  return Hex(out, sizeof out);
}

std::string Hmac(const std::string& key, const std::string& msg) {
  const void* parts[] = {msg.data()};
  size_t lens[] = {msg.size()};
  uint8_t out[SHA256_BYTES];
  hmac_sha256(key.data(), key.size(), 1, parts, lens, out);
  return Hex(out, sizeof out);
}

TEST(Sha256, NistExamples) {
  EXPECT_EQ(Sha("abc"), "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
  EXPECT_EQ(Sha("abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq"),
            "248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1");
  EXPECT_EQ(Sha(""), "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
}

TEST(Sha256, OneMillionAsInPiecesOfEveryAlignment) {
  sha256_t s;
  uint8_t out[SHA256_BYTES];
  sha256_init(&s);
  std::string chunk(997, 'a');  // a prime, so the pieces straddle every block boundary
  size_t left = 1000000;
  while (left > 0) {
    size_t n = left < chunk.size() ? left : chunk.size();
    sha256_update(&s, chunk.data(), n);
    left -= n;
  }
  sha256_final(&s, out);
  EXPECT_EQ(Hex(out, sizeof out),
            "cdc76e5c9914fb9281a1c7e284d73e67f1809a48a497200e046d39ccc7112cd0");
}

TEST(HmacSha256, Rfc4231) {
  EXPECT_EQ(Hmac(std::string(20, '\x0b'), "Hi There"),
            "b0344c61d8db38535ca8afceaf0bf12b881dc200c9833da726e9376c2e32cff7");
  EXPECT_EQ(Hmac("Jefe", "what do ya want for nothing?"),
            "5bdcc146bf60754e6a042426089575c75a003f089d2739839dec58b964ec3843");
  EXPECT_EQ(Hmac(std::string(20, '\xaa'), std::string(50, '\xdd')),
            "773ea91e36800e46854db8ebd09181a72959098b3ef8c122d9635514ced565fe");
  std::string key4;
  for (int i = 1; i <= 25; i++) key4 += (char)i;
  EXPECT_EQ(Hmac(key4, std::string(50, '\xcd')),
            "82558a389a443c0ea4cc819899f2083a85f0faa3e578f8077a2e3ff46729665b");
  // Test cases 6 and 7: a key longer than a block is hashed first.
  EXPECT_EQ(
      Hmac(std::string(131, '\xaa'), "Test Using Larger Than Block-Size Key - Hash Key First"),
      "60e431591ee0b67f0d8a26aacbf5b77f8e0bc6213728c5140546040f0ee37f54");
  EXPECT_EQ(Hmac(std::string(131, '\xaa'),
                 "This is a test using a larger than block-size key and a larger than block-size "
                 "data. The key needs to be hashed before being used by the HMAC algorithm."),
            "9b09ffa71b942fcb27635fbcd5b0e944bfdc63644f0713938a7f51535c3a35e2");
}

TEST(HmacSha256, PartsAreConcatenated) {
  const char* a = "what do ya ";
  const char* b = "want for nothing?";
  const void* parts[] = {a, b};
  size_t lens[] = {strlen(a), strlen(b)};
  uint8_t out[SHA256_BYTES];
  hmac_sha256("Jefe", 4, 2, parts, lens, out);
  EXPECT_EQ(Hex(out, sizeof out), Hmac("Jefe", "what do ya want for nothing?"));
}

TEST(HmacEqual, ComparesEveryByte) {
  uint8_t a[32] = {0}, b[32] = {0};
  EXPECT_TRUE(hmac_equal(a, b, 32));
  b[31] = 1;
  EXPECT_FALSE(hmac_equal(a, b, 32));
  b[31] = 0;
  b[0] = 0x80;
  EXPECT_FALSE(hmac_equal(a, b, 32));
}

TEST(HmacRandom, FreshBytes) {
  uint8_t a[32], b[32];
  ASSERT_EQ(hmac_random(a, sizeof a), 0);
  ASSERT_EQ(hmac_random(b, sizeof b), 0);
  EXPECT_FALSE(hmac_equal(a, b, sizeof a));
}

}  // namespace
