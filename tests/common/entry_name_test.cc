// ValidateName: the rules every directory entry name obeys.
#include "common/entry_name.h"

#include <cerrno>
#include <string>

#include "common/errno_status.h"
#include "gtest/gtest.h"

namespace ckptfs {
namespace {

int ErrnoOf(absl::string_view name) { return ErrnoFromStatus(ValidateName(name)); }

TEST(EntryNameTest, AcceptsOrdinaryNames) {
  for (absl::string_view name :
       {"a", "model.pt", ".metadata", "...", "__0_0.distcp", "with space", "ünïcödé"}) {
    EXPECT_TRUE(ValidateName(name).ok()) << name;
  }
  EXPECT_TRUE(ValidateName(std::string(255, 'n')).ok());
}

TEST(EntryNameTest, RejectsTooLong) {
  EXPECT_EQ(ErrnoOf(std::string(256, 'n')), ENAMETOOLONG);
  EXPECT_EQ(ErrnoOf(std::string(4096, 'n')), ENAMETOOLONG);
}

TEST(EntryNameTest, RejectsSpecialAndEmpty) {
  EXPECT_EQ(ErrnoOf(""), EINVAL);
  EXPECT_EQ(ErrnoOf("."), EINVAL);
  EXPECT_EQ(ErrnoOf(".."), EINVAL);
}

TEST(EntryNameTest, RejectsSlashAndNul) {
  EXPECT_EQ(ErrnoOf("a/b"), EINVAL);
  EXPECT_EQ(ErrnoOf("/"), EINVAL);
  EXPECT_EQ(ErrnoOf(absl::string_view("a\0b", 3)), EINVAL);
}

}  // namespace
}  // namespace ckptfs
