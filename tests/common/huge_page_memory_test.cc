// HugePageMemory: the mapping's alignment and size, that it is usable
// memory, that moves hand over ownership, and that an impossible size is an
// error rather than a crash.
#include "common/huge_page_memory.h"

#include <cerrno>
#include <cstdint>
#include <cstring>
#include <utility>

#include "common/errno_status.h"
#include "gtest/gtest.h"

namespace ckptfs {
namespace {

TEST(HugePageMemoryTest, StartsOnAHugePageAndRoundsToWholePages) {
  absl::StatusOr<HugePageMemory> memory = HugePageMemory::Map(4 * 1024 * 1024 + 1);
  ASSERT_TRUE(memory.ok()) << memory.status();
  EXPECT_EQ(reinterpret_cast<uintptr_t>(memory->data()) % kHugePageSize, 0u);
  EXPECT_EQ(memory->size(), size_t{4 * 1024 * 1024 + 4096});
  // Zero-filled, and every byte writable.
  EXPECT_EQ(memory->data()[0], 0);
  EXPECT_EQ(memory->data()[memory->size() - 1], 0);
  std::memset(memory->data(), 0x5a, memory->size());
  EXPECT_EQ(memory->data()[memory->size() - 1], 0x5a);
}

TEST(HugePageMemoryTest, MovesHandOverTheMapping) {
  absl::StatusOr<HugePageMemory> mapped = HugePageMemory::Map(8192);
  ASSERT_TRUE(mapped.ok()) << mapped.status();
  char* const data = mapped->data();
  data[0] = 'x';
  HugePageMemory moved(*std::move(mapped));
  EXPECT_EQ(moved.data(), data);
  EXPECT_EQ(moved.data()[0], 'x');
  HugePageMemory assigned;
  EXPECT_EQ(assigned.data(), nullptr);
  EXPECT_EQ(assigned.size(), 0u);
  assigned = std::move(moved);
  EXPECT_EQ(assigned.data(), data);
  EXPECT_EQ(assigned.size(), 8192u);
  EXPECT_EQ(moved.data(), nullptr);  // NOLINT(bugprone-use-after-move): moved-from is empty
  EXPECT_EQ(moved.size(), 0u);
  assigned = HugePageMemory();  // unmaps
  EXPECT_EQ(assigned.data(), nullptr);
}

TEST(HugePageMemoryTest, AnImpossibleSizeIsAnError) {
  absl::StatusOr<HugePageMemory> memory = HugePageMemory::Map(size_t{1} << 60);
  ASSERT_FALSE(memory.ok());
  EXPECT_EQ(ErrnoFromStatus(memory.status()), ENOMEM) << memory.status();
  memory = HugePageMemory::Map(SIZE_MAX);  // would overflow the rounding
  ASSERT_FALSE(memory.ok());
  EXPECT_EQ(ErrnoFromStatus(memory.status()), ENOMEM) << memory.status();
}

}  // namespace
}  // namespace ckptfs
