// ErasureCode: encode, then every way of losing up to m of the k+m
// fragments decodes back to the exact bytes (data and parity), for several
// codes and lengths (1 byte, odd sizes, a MiB); bad arguments are refused.
#include "common/erasure_code.h"

#include <random>
#include <string>
#include <vector>

#include "common/errno_status.h"
#include "gtest/gtest.h"

namespace ckptfs {
namespace {

std::vector<std::string> RandomFragments(int count, size_t len, uint32_t seed) {
  std::mt19937 rng(seed);
  std::vector<std::string> out(static_cast<size_t>(count), std::string(len, '\0'));
  for (std::string& f : out) {
    for (char& c : f) c = static_cast<char>(rng());
  }
  return out;
}

std::vector<const unsigned char*> Pointers(const std::vector<std::string>& v) {
  std::vector<const unsigned char*> p;
  for (const std::string& s : v) p.push_back(reinterpret_cast<const unsigned char*>(s.data()));
  return p;
}

// All k+m fragments (data, then parity) of random data.
std::vector<std::string> Encoded(const ErasureCode& code, size_t len, uint32_t seed) {
  std::vector<std::string> all = RandomFragments(code.k(), len, seed);
  std::vector<std::string> parity(static_cast<size_t>(code.m()), std::string(len, '\0'));
  std::vector<unsigned char*> out;
  for (std::string& p : parity) out.push_back(reinterpret_cast<unsigned char*>(p.data()));
  code.Encode(len, Pointers(all).data(), out.data());
  all.insert(all.end(), parity.begin(), parity.end());
  return all;
}

TEST(ErasureCodeTest, AnyKFragmentsRebuildEveryOther) {
  for (auto [k, m] : {std::pair{4, 2}, {2, 1}, {6, 3}, {1, 1}}) {
    auto code = ErasureCode::Create(k, m);
    ASSERT_TRUE(code.ok()) << code.status();
    for (size_t len : {size_t{1}, size_t{1000}, size_t{4099}, size_t{1} << 20}) {
      const std::vector<std::string> all = Encoded(*code, len, static_cast<uint32_t>(len + k));
      const int n = k + m;
      // Every subset of exactly k survivors.
      for (uint32_t mask = 0; mask < (1u << n); ++mask) {
        if (__builtin_popcount(mask) != k) continue;
        std::vector<int> have, want;
        std::vector<std::string> have_bytes;
        for (int f = 0; f < n; ++f) {
          if (mask & (1u << f)) {
            have.push_back(f);
            have_bytes.push_back(all[static_cast<size_t>(f)]);
          } else {
            want.push_back(f);
          }
        }
        std::vector<std::string> rebuilt(want.size(), std::string(len, '\0'));
        std::vector<unsigned char*> out;
        for (std::string& r : rebuilt) out.push_back(reinterpret_cast<unsigned char*>(r.data()));
        ASSERT_TRUE(code->Decode(len, have, Pointers(have_bytes).data(), want, out.data()).ok());
        for (size_t w = 0; w < want.size(); ++w) {
          ASSERT_EQ(rebuilt[w], all[static_cast<size_t>(want[w])])
              << k << "+" << m << " len " << len << " survivors mask " << mask << " fragment "
              << want[w];
        }
      }
    }
  }
}

TEST(ErasureCodeTest, ParityChangesWhenAnyDataByteDoes) {
  auto code = ErasureCode::Create(4, 2);
  ASSERT_TRUE(code.ok());
  std::vector<std::string> data = RandomFragments(4, 512, 9);
  auto parity_of = [&](const std::vector<std::string>& d) {
    std::vector<std::string> parity(2, std::string(512, '\0'));
    std::vector<unsigned char*> out;
    for (std::string& p : parity) out.push_back(reinterpret_cast<unsigned char*>(p.data()));
    code->Encode(512, Pointers(d).data(), out.data());
    return parity;
  };
  const std::vector<std::string> before = parity_of(data);
  for (int f = 0; f < 4; ++f) {
    std::vector<std::string> changed = data;
    changed[static_cast<size_t>(f)][100] ^= 1;
    const std::vector<std::string> after = parity_of(changed);
    EXPECT_NE(after[0], before[0]) << f;
    EXPECT_NE(after[1], before[1]) << f;
  }
}

TEST(ErasureCodeTest, RefusesBadCodesAndBadDecodeArguments) {
  EXPECT_EQ(ErrnoFromStatus(ErasureCode::Create(0, 2).status()), EINVAL);
  EXPECT_EQ(ErrnoFromStatus(ErasureCode::Create(4, 0).status()), EINVAL);
  EXPECT_EQ(ErrnoFromStatus(ErasureCode::Create(30, 3).status()), EINVAL);
  auto code = ErasureCode::Create(4, 2);
  ASSERT_TRUE(code.ok());
  const std::vector<std::string> all = Encoded(*code, 64, 1);
  std::vector<std::string> three = {all[0], all[1], all[2]};
  std::vector<std::string> four = {all[0], all[1], all[2], all[2]};
  std::string out(64, '\0');
  unsigned char* o = reinterpret_cast<unsigned char*>(out.data());
  EXPECT_EQ(ErrnoFromStatus(code->Decode(64, {0, 1, 2}, Pointers(three).data(), {3}, &o)), EINVAL);
  EXPECT_EQ(ErrnoFromStatus(code->Decode(64, {0, 1, 2, 2}, Pointers(four).data(), {3}, &o)),
            EINVAL);
  EXPECT_EQ(ErrnoFromStatus(code->Decode(64, {0, 1, 2, 6}, Pointers(four).data(), {3}, &o)),
            EINVAL);
  std::vector<std::string> ok = {all[0], all[1], all[2], all[4]};
  EXPECT_EQ(ErrnoFromStatus(code->Decode(64, {0, 1, 2, 4}, Pointers(ok).data(), {7}, &o)), EINVAL);
}

}  // namespace
}  // namespace ckptfs
