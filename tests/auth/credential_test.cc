// common/credential: creating, loading and comparing the cluster credential,
// and the refusals a daemon's start relies on (a file other users may read,
// an empty one, a missing one).
#include "common/credential.h"

#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <fstream>
#include <string>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "common/errno_status.h"
#include "gtest/gtest.h"

namespace ckptfs {
namespace {

class CredentialTest : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string templ = ::testing::TempDir() + "ckptfs-credential-XXXXXX";
    ASSERT_NE(::mkdtemp(templ.data()), nullptr);
    dir_ = templ;
  }
  void TearDown() override {
    for (const char* name : {"/credential", "/other"}) ::unlink((dir_ + name).c_str());
    ::rmdir(dir_.c_str());
  }
  void WriteFile(const std::string& path, const std::string& content, mode_t mode) {
    { std::ofstream(path) << content; }
    ASSERT_EQ(::chmod(path.c_str(), mode), 0);
  }
  std::string dir_;
};

TEST_F(CredentialTest, CreatedFileIsPrivateHexAndLoadsBack) {
  const std::string path = dir_ + "/credential";
  absl::StatusOr<std::string> created = CreateCredential(path);
  ASSERT_TRUE(created.ok()) << created.status();
  EXPECT_EQ(created->size(), 2 * kCredentialBytes);
  for (char c : *created) EXPECT_TRUE(std::isxdigit(static_cast<unsigned char>(c))) << c;
  struct stat st {};
  ASSERT_EQ(::stat(path.c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 07777, 0600u);
  absl::StatusOr<std::string> loaded = LoadCredential(path);
  ASSERT_TRUE(loaded.ok()) << loaded.status();
  EXPECT_EQ(*loaded, *created);
}

TEST_F(CredentialTest, TwoCredentialsDiffer) {
  absl::StatusOr<std::string> a = CreateCredential(dir_ + "/credential");
  absl::StatusOr<std::string> b = CreateCredential(dir_ + "/other");
  ASSERT_TRUE(a.ok() && b.ok());
  EXPECT_NE(*a, *b);
}

TEST_F(CredentialTest, CreateNeverReplacesAnExistingFile) {
  const std::string path = dir_ + "/credential";
  ASSERT_TRUE(CreateCredential(path).ok());
  absl::StatusOr<std::string> again = CreateCredential(path);
  ASSERT_FALSE(again.ok());
  EXPECT_EQ(ErrnoFromStatus(again.status()), EEXIST);
}

TEST_F(CredentialTest, LoadOrCreateKeepsTheFirst) {
  const std::string path = dir_ + "/credential";
  absl::StatusOr<std::string> first = LoadOrCreateCredential(path);
  absl::StatusOr<std::string> second = LoadOrCreateCredential(path);
  ASSERT_TRUE(first.ok() && second.ok());
  EXPECT_EQ(*first, *second);
}

TEST_F(CredentialTest, FileOthersCanReadIsRefusedWithTheFix) {
  const std::string path = dir_ + "/credential";
  for (mode_t mode : {0644, 0640, 0604, 0620}) {
    WriteFile(path, "secret\n", mode);
    absl::StatusOr<std::string> loaded = LoadCredential(path);
    ASSERT_FALSE(loaded.ok()) << std::oct << mode;
    EXPECT_EQ(ErrnoFromStatus(loaded.status()), EACCES);
    EXPECT_TRUE(absl::StrContains(loaded.status().message(), "chmod 600")) << loaded.status();
    EXPECT_TRUE(absl::StrContains(loaded.status().message(), path)) << loaded.status();
  }
  // 0400 (read-only for the owner) is fine.
  WriteFile(path, "secret\n", 0400);
  EXPECT_TRUE(LoadCredential(path).ok());
}

TEST_F(CredentialTest, EmptyOrBlankFileIsRefused) {
  const std::string path = dir_ + "/credential";
  for (const char* content : {"", "\n", "  \n\t\n"}) {
    WriteFile(path, content, 0600);
    absl::StatusOr<std::string> loaded = LoadCredential(path);
    ASSERT_FALSE(loaded.ok());
    EXPECT_EQ(ErrnoFromStatus(loaded.status()), EINVAL);
    EXPECT_TRUE(absl::StrContains(loaded.status().message(), "empty")) << loaded.status();
  }
  WriteFile(path, "two words\n", 0600);
  EXPECT_EQ(ErrnoFromStatus(LoadCredential(path).status()), EINVAL);
}

TEST_F(CredentialTest, SurroundingBlanksAreTrimmed) {
  const std::string path = dir_ + "/credential";
  WriteFile(path, "  abc123\r\n\n", 0600);
  absl::StatusOr<std::string> loaded = LoadCredential(path);
  ASSERT_TRUE(loaded.ok()) << loaded.status();
  EXPECT_EQ(*loaded, "abc123");
}

TEST_F(CredentialTest, MissingFileNamesThePath) {
  absl::StatusOr<std::string> loaded = LoadCredential(dir_ + "/none");
  ASSERT_FALSE(loaded.ok());
  EXPECT_EQ(ErrnoFromStatus(loaded.status()), ENOENT);
  EXPECT_TRUE(absl::StrContains(loaded.status().message(), dir_ + "/none"));
  // An optional flag left empty is "no credential", not an error.
  absl::StatusOr<std::string> none = LoadCredentialFlag("");
  ASSERT_TRUE(none.ok());
  EXPECT_EQ(*none, "");
}

TEST(CredentialMatchesTest, OnlyTheSameBytesMatch) {
  EXPECT_TRUE(CredentialMatches("abcdef", "abcdef"));
  EXPECT_FALSE(CredentialMatches("abcdeg", "abcdef"));
  EXPECT_FALSE(CredentialMatches("bbcdef", "abcdef"));
  EXPECT_FALSE(CredentialMatches("abcde", "abcdef"));
  EXPECT_FALSE(CredentialMatches("abcdefg", "abcdef"));
  EXPECT_FALSE(CredentialMatches("", "abcdef"));
}

}  // namespace
}  // namespace ckptfs
