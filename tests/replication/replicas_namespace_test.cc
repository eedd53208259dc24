// The metadata service's side of replication (server/meta/namespace.h): a
// new file's layout carries the cluster's replica count or its directory's
// user.ckptfs.replicas, inherited by subdirectories; bad values are EINVAL;
// a create fails with a clear ENOSPC when fewer servers are alive than the
// file needs copies.
#include <cerrno>
#include <string>

#include "absl/strings/match.h"
#include "gtest/gtest.h"
#include "server/meta/keys.h"
#include "tests/meta/meta_test_util.h"

namespace ckptfs::meta {
namespace {

class ReplicasNamespaceTest : public NamespaceFixture {
 protected:
  void SetUp() override {
    options_.default_replicas = 2;
    NamespaceFixture::SetUp();
    for (const char* uuid : {"uuid-a", "uuid-b", "uuid-c"}) AddServer(uuid);
  }

  absl::Status SetReplicas(uint64_t ino, const std::string& value) {
    SetXattrRequest request;
    request.set_ino(ino);
    request.set_name(kReplicasXattr);
    request.set_value(value);
    return ns_->SetXattr(request);
  }
};

TEST_F(ReplicasNamespaceTest, NewFilesGetTheClusterDefault) {
  auto file = CreateFile(kRootIno, "f");
  ASSERT_TRUE(file.ok()) << file.status();
  EXPECT_EQ(file->layout().replicas(), 2u);
  EXPECT_EQ(file->layout().stripe_size(), 3);
  // The layout is stored: a lookup returns the same.
  EXPECT_EQ(ns_->Lookup(kRootIno, "f")->layout().replicas(), 2u);
}

TEST_F(ReplicasNamespaceTest, ADirectorySettingWinsAndIsInherited) {
  auto dir = MakeDir(kRootIno, "three");
  ASSERT_TRUE(dir.ok()) << dir.status();
  ASSERT_OK(SetReplicas(dir->ino(), "3\n"));  // what `echo` writes
  auto file = CreateFile(dir->ino(), "f");
  ASSERT_TRUE(file.ok()) << file.status();
  EXPECT_EQ(file->layout().replicas(), 3u);
  auto sub = MakeDir(dir->ino(), "sub");
  ASSERT_TRUE(sub.ok()) << sub.status();
  EXPECT_EQ(*ns_->GetXattr(sub->ino(), kReplicasXattr), "3\n");
  EXPECT_EQ(CreateFile(sub->ino(), "g")->layout().replicas(), 3u);
  // One copy for one directory of a replicated cluster.
  auto single = MakeDir(kRootIno, "single");
  ASSERT_OK(SetReplicas(single->ino(), "1"));
  EXPECT_EQ(CreateFile(single->ino(), "h")->layout().replicas(), 1u);
  // Removing it brings back the default.
  ASSERT_OK(ns_->RemoveXattr(single->ino(), kReplicasXattr));
  EXPECT_EQ(CreateFile(single->ino(), "i")->layout().replicas(), 2u);
}

TEST_F(ReplicasNamespaceTest, InvalidValuesAreEINVAL) {
  auto dir = MakeDir(kRootIno, "d");
  ASSERT_TRUE(dir.ok());
  for (const char* bad : {"0", "9", "-1", "", "two", "2 ", " 2", "1.5", "99999999999"}) {
    EXPECT_ERRNO(SetReplicas(dir->ino(), bad), EINVAL) << "\"" << bad << "\"";
  }
  EXPECT_OK(SetReplicas(dir->ino(), "8"));
  // On a file it would change nothing (its layout is fixed): refused.
  auto file = CreateFile(kRootIno, "f");
  ASSERT_TRUE(file.ok());
  EXPECT_ERRNO(SetReplicas(file->ino(), "2"), EINVAL);
}

TEST_F(ReplicasNamespaceTest, TooFewServersAliveIsAClearError) {
  auto dir = MakeDir(kRootIno, "four");
  ASSERT_OK(SetReplicas(dir->ino(), "4"));
  absl::StatusOr<Attr> file = CreateFile(dir->ino(), "f");
  ASSERT_FALSE(file.ok());
  EXPECT_EQ(ErrnoOf(file), ENOSPC) << file.status();
  EXPECT_TRUE(absl::StrContains(file.status().message(), "4 replicas")) << file.status();
  EXPECT_TRUE(absl::StrContains(file.status().message(), "only 3 storage servers are alive"))
      << file.status();
  // Nothing was created.
  EXPECT_ERRNO(ns_->Lookup(dir->ino(), "f"), ENOENT);
  // With a fourth server it works.
  AddServer("uuid-d");
  file = CreateFile(dir->ino(), "f");
  ASSERT_TRUE(file.ok()) << file.status();
  EXPECT_EQ(file->layout().replicas(), 4u);
}

// Erasure coding (user.ckptfs.ec, ckptfs-meta --ec): a directory's K+M
// gives its new files fragments instead of copies, inherited by new
// subdirectories; "none" turns a cluster default off; creation needs K+M
// servers alive.
TEST_F(ReplicasNamespaceTest, ErasureCodeFromTheDirectoryNeedsKPlusMServers) {
  auto dir = MakeDir(kRootIno, "ec");
  ASSERT_TRUE(dir.ok());
  SetXattrRequest set;
  set.set_ino(dir->ino());
  set.set_name(kErasureCodeXattr);
  set.set_value("2+1\n");
  ASSERT_OK(ns_->SetXattr(set));
  auto file = CreateFile(dir->ino(), "f");
  ASSERT_TRUE(file.ok()) << file.status();
  EXPECT_EQ(file->layout().ec_data(), 2u);
  EXPECT_EQ(file->layout().ec_parity(), 1u);
  EXPECT_EQ(file->layout().replicas(), 1u);
  auto sub = MakeDir(dir->ino(), "sub");
  ASSERT_TRUE(sub.ok());
  EXPECT_EQ(CreateFile(sub->ino(), "g")->layout().ec_data(), 2u);

  set.set_value("2+2");
  ASSERT_OK(ns_->SetXattr(set));
  absl::StatusOr<Attr> wide = CreateFile(dir->ino(), "wide");
  EXPECT_EQ(ErrnoOf(wide), ENOSPC) << wide.status();
  EXPECT_TRUE(absl::StrContains(wide.status().message(), "needs 4 storage servers"))
      << wide.status();
  AddServer("uuid-d");
  wide = CreateFile(dir->ino(), "wide");
  ASSERT_TRUE(wide.ok()) << wide.status();
  EXPECT_EQ(wide->layout().ec_parity(), 2u);

  for (const char* bad : {"4", "1+1", "4+0", "0+2", "30+3", "4+2 ", "four+two", ""}) {
    set.set_value(bad);
    EXPECT_ERRNO(ns_->SetXattr(set), EINVAL) << "\"" << bad << "\"";
  }
  set.set_ino(file->ino());
  set.set_value("2+1");
  EXPECT_ERRNO(ns_->SetXattr(set), EINVAL);  // a file's layout is fixed
}

TEST(ErasureCodeParseTest, KPlusMOrNone) {
  absl::StatusOr<ErasureCodeSpec> spec = ParseErasureCode("4+2");
  ASSERT_TRUE(spec.ok());
  EXPECT_EQ(spec->k, 4u);
  EXPECT_EQ(spec->m, 2u);
  EXPECT_FALSE(ParseErasureCode("none")->enabled());
  EXPECT_TRUE(ParseErasureCode("30+2").ok());
  EXPECT_FALSE(ParseErasureCode("31+2").ok());
}

class ErasureCodedClusterTest : public NamespaceFixture {
 protected:
  void SetUp() override {
    options_.default_ec = ErasureCodeSpec{2, 1};
    NamespaceFixture::SetUp();
    for (const char* uuid : {"uuid-a", "uuid-b", "uuid-c"}) AddServer(uuid);
  }
};

TEST_F(ErasureCodedClusterTest, TheClusterDefaultAppliesAndNoneTurnsItOff) {
  EXPECT_EQ(CreateFile(kRootIno, "f")->layout().ec_data(), 2u);
  auto dir = MakeDir(kRootIno, "copies");
  ASSERT_TRUE(dir.ok());
  SetXattrRequest set;
  set.set_ino(dir->ino());
  set.set_name(kErasureCodeXattr);
  set.set_value("none");
  ASSERT_OK(ns_->SetXattr(set));
  absl::StatusOr<Attr> plain = CreateFile(dir->ino(), "g");
  ASSERT_TRUE(plain.ok()) << plain.status();
  EXPECT_EQ(plain->layout().ec_data(), 0u);
  EXPECT_EQ(plain->layout().replicas(), 1u);
}

TEST(ReplicasParseTest, AcceptsOneToEight) {
  for (uint32_t n = 1; n <= kMaxReplicas; ++n) {
    absl::StatusOr<uint32_t> parsed = ParseReplicas(std::to_string(n));
    ASSERT_TRUE(parsed.ok()) << n;
    EXPECT_EQ(*parsed, n);
  }
  EXPECT_FALSE(ParseReplicas("0").ok());
  EXPECT_FALSE(ParseReplicas("9").ok());
  EXPECT_TRUE(ValidateReplicas(1).ok());
  EXPECT_FALSE(ValidateReplicas(0).ok());
  EXPECT_FALSE(ValidateReplicas(kMaxReplicas + 1).ok());
}

}  // namespace
}  // namespace ckptfs::meta
