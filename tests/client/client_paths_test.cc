// Client path helpers and namespace pass-through over the metadata service
// in-process (client_fixture.h).
#include <fcntl.h>

#include <cerrno>
#include <string>

#include "client/file.h"
#include "common/errno_status.h"
#include "gtest/gtest.h"
#include "tests/client/client_fixture.h"

namespace ckptfs::client {
namespace {

class ClientPathsTest : public ClientFixture {};

TEST_F(ClientPathsTest, MkdirAllLookupPathOpenPath) {
  auto dir = client_->MkdirAll("/runs/exp1/step-100", 0755);
  ASSERT_TRUE(dir.ok()) << dir.status();
  EXPECT_EQ(dir->type(), meta::DIRECTORY);
  auto again = client_->MkdirAll("runs//exp1/./step-100/", 0755);  // idempotent
  ASSERT_TRUE(again.ok());
  EXPECT_EQ(again->ino(), dir->ino());

  auto file = client_->OpenPath("/runs/exp1/step-100/rank0.pt", O_CREAT | O_WRONLY, 0644);
  ASSERT_TRUE(file.ok()) << file.status();
  ASSERT_TRUE((*file)->Write(0, "weights", 7).ok());
  ASSERT_TRUE((*file)->Close().ok());

  auto attr = client_->LookupPath("/runs/exp1/step-100/rank0.pt");
  ASSERT_TRUE(attr.ok());
  EXPECT_EQ(attr->size(), 7u);
  EXPECT_EQ(ReadAll(attr->ino()), "weights");
  auto root = client_->LookupPath("/");
  ASSERT_TRUE(root.ok());
  EXPECT_EQ(root->ino(), kRootIno);

  auto opened = client_->OpenPath("/runs/exp1/step-100/rank0.pt", O_RDONLY, 0);
  ASSERT_TRUE(opened.ok());
  EXPECT_EQ((*opened)->size(), 7u);
}

TEST_F(ClientPathsTest, PathErrors) {
  EXPECT_EQ(ErrnoFromStatus(client_->LookupPath("/nope").status()), ENOENT);
  EXPECT_EQ(ErrnoFromStatus(client_->OpenPath("/nope/f", O_RDONLY, 0).status()), ENOENT);
  EXPECT_EQ(ErrnoFromStatus(client_->OpenPath("/", O_RDONLY, 0).status()), EISDIR);
  auto file = client_->OpenPath("/plain", O_CREAT | O_WRONLY, 0644);
  ASSERT_TRUE(file.ok());
  EXPECT_EQ(ErrnoFromStatus(client_->LookupPath("/plain/x").status()), ENOTDIR);
  EXPECT_EQ(ErrnoFromStatus(client_->MkdirAll("/plain/x", 0755).status()), ENOTDIR);
  EXPECT_EQ(ErrnoFromStatus(client_->MkdirAll("/plain", 0755).status()), ENOTDIR);
  ASSERT_TRUE(client_->MkdirAll("/a/b", 0755).ok());
  EXPECT_EQ(ErrnoFromStatus(client_->LookupPath("/a/../b").status()), EINVAL);
}

// A directory removed under a walk (the service's ESTALE) makes the walk
// start again from the root once; a second ESTALE reads as ENOENT.
TEST_F(ClientPathsTest, AWalkThatMeetsAStaleDirectoryStartsAgainOnce) {
  ASSERT_TRUE(client_->MkdirAll("/run/step_1", 0755).ok());
  auto file = client_->OpenPath("/run/step_1/rank0.pt", O_CREAT | O_WRONLY, 0644);
  ASSERT_TRUE(file.ok()) << file.status();
  ASSERT_TRUE((*file)->Close().ok());
  const absl::Status stale = ErrnoStatus(ESTALE, "directory 2 no longer exists");

  meta_->FailNext("Lookup", stale);
  auto found = client_->LookupPath("/run/step_1/rank0.pt");
  ASSERT_TRUE(found.ok()) << found.status();

  meta_->FailNext("Lookup", stale, 2);
  EXPECT_EQ(ErrnoFromStatus(client_->LookupPath("/run/step_1").status()), ENOENT);

  meta_->FailNext("Create", stale);
  auto created = client_->OpenPath("/run/step_1/rank1.pt", O_CREAT | O_WRONLY, 0644);
  ASSERT_TRUE(created.ok()) << created.status();
  ASSERT_TRUE((*created)->Close().ok());

  meta_->FailNext("Lookup", stale);
  EXPECT_TRUE(client_->MkdirAll("/run/step_1/sub", 0755).ok());

  // Other errors are not retried.
  const int lookups = meta_->Calls("Lookup");
  meta_->FailNext("Lookup", ErrnoStatus(EIO, "disk"));
  EXPECT_EQ(ErrnoFromStatus(client_->LookupPath("/run").status()), EIO);
  EXPECT_EQ(meta_->Calls("Lookup"), lookups + 1);
}

TEST_F(ClientPathsTest, NamespacePassThrough) {
  auto dir = client_->Mkdir(kRootIno, "d", 0755, 0, 0);
  ASSERT_TRUE(dir.ok());
  auto link = client_->Symlink(dir->ino(), "l", "../target", 0, 0);
  ASSERT_TRUE(link.ok());
  auto target = client_->ReadLink(link->ino());
  ASSERT_TRUE(target.ok());
  EXPECT_EQ(*target, "../target");
  ASSERT_TRUE(client_->Rename(dir->ino(), "l", dir->ino(), "m", false).ok());
  auto page = client_->ReadDir(dir->ino(), "", 0);
  ASSERT_TRUE(page.ok());
  ASSERT_EQ(page->entries_size(), 1);
  EXPECT_EQ(page->entries(0).name(), "m");
  ASSERT_TRUE(client_->SetXattr(dir->ino(), "user.k", "v", 0).ok());
  auto value = client_->GetXattr(dir->ino(), "user.k");
  ASSERT_TRUE(value.ok());
  EXPECT_EQ(*value, "v");
  auto names = client_->ListXattr(dir->ino());
  ASSERT_TRUE(names.ok());
  EXPECT_EQ(names->size(), 1u);
  ASSERT_TRUE(client_->RemoveXattr(dir->ino(), "user.k").ok());
  EXPECT_EQ(ErrnoFromStatus(client_->GetXattr(dir->ino(), "user.k").status()), ENODATA);
  EXPECT_EQ(ErrnoFromStatus(client_->Rmdir(kRootIno, "d")), ENOTEMPTY);
  ASSERT_TRUE(client_->Unlink(dir->ino(), "m").ok());
  ASSERT_TRUE(client_->Rmdir(kRootIno, "d").ok());
  auto stat = client_->StatFs();
  ASSERT_TRUE(stat.ok());
  EXPECT_EQ(stat->servers_up(), 3u);
}

TEST_F(ClientPathsTest, UnlinkedOpenFileStaysReadable) {
  auto file = CreateFile("doomed");
  const std::string data = RandomBytes(3ull * kTestChunk, 8);
  ASSERT_TRUE(file->Write(0, data.data(), data.size()).ok());
  ASSERT_TRUE(file->Flush().ok());
  ASSERT_TRUE(client_->Unlink(kRootIno, "doomed").ok());
  std::string got(data.size(), '\0');
  auto n = file->Read(0, got.data(), got.size());
  ASSERT_TRUE(n.ok());
  EXPECT_TRUE(SameBytes(got, data));
  EXPECT_TRUE(file->Close().ok());
}

}  // namespace
}  // namespace ckptfs::client
