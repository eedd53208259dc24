// CRC32C (ISA-L) against the standard test vectors (RFC 3720 B.4 and the
// "123456789" check value), and Crc32cExtend == Crc32c of the whole.
#include "common/crc32c.h"

#include <string>

#include "gtest/gtest.h"

namespace ckptfs {
namespace {

TEST(Crc32cTest, CheckValue) { EXPECT_EQ(Crc32c("123456789", 9), 0xE3069283u); }

TEST(Crc32cTest, EmptyIsZero) {
  EXPECT_EQ(Crc32c("", 0), 0u);
  EXPECT_EQ(Crc32cExtend(0x12345678u, "", 0), 0x12345678u);
}

TEST(Crc32cTest, Rfc3720Vectors) {
  std::string zeros(32, '\0');
  std::string ones(32, '\xff');
  std::string up(32, '\0');
  std::string down(32, '\0');
  for (int i = 0; i < 32; ++i) {
    up[i] = static_cast<char>(i);
    down[i] = static_cast<char>(31 - i);
  }
  EXPECT_EQ(Crc32c(zeros.data(), zeros.size()), 0x8A9136AAu);
  EXPECT_EQ(Crc32c(ones.data(), ones.size()), 0x62A8AB43u);
  EXPECT_EQ(Crc32c(up.data(), up.size()), 0x46DD794Eu);
  EXPECT_EQ(Crc32c(down.data(), down.size()), 0x113FDB5Cu);
}

TEST(Crc32cTest, ExtendEqualsWholeAtEverySplit) {
  std::string data;
  for (int i = 0; i < 300; ++i) data.push_back(static_cast<char>(i * 7 + 3));
  const uint32_t whole = Crc32c(data.data(), data.size());
  for (size_t split = 0; split <= data.size(); ++split) {
    const uint32_t first = Crc32c(data.data(), split);
    EXPECT_EQ(Crc32cExtend(first, data.data() + split, data.size() - split), whole)
        << "split at " << split;
  }
}

TEST(Crc32cTest, DetectsOneFlippedBit) {
  std::string data(4096, 'x');
  const uint32_t before = Crc32c(data.data(), data.size());
  data[1234] ^= 0x10;
  EXPECT_NE(Crc32c(data.data(), data.size()), before);
}

}  // namespace
}  // namespace ckptfs
