// Namespace tests, part 1: the root, lookup, create (layouts, stripes,
// O_EXCL/O_TRUNC), mkdir, symlink, setattr, open/commit-write, xattrs,
// statfs, name validation, persistence after reopening the store, and
// concurrent creates in one directory.
#include <sys/stat.h>

#include <set>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "server/meta/keys.h"
#include "tests/meta/meta_test_util.h"

namespace ckptfs::meta {
namespace {

class NamespaceTest : public NamespaceFixture {
 protected:
  void SetUp() override {
    NamespaceFixture::SetUp();
    server_ = AddServer("uuid-a");
  }
  uint32_t server_ = 0;
};

TEST_F(NamespaceTest, RootIsADirectoryOwnedByRoot) {
  auto root = ns_->GetAttr(kRootIno);
  ASSERT_TRUE(root.ok()) << root.status();
  EXPECT_EQ(root->type(), DIRECTORY);
  EXPECT_EQ(root->mode(), S_IFDIR | 0755u);
  EXPECT_EQ(root->uid(), 0u);
  EXPECT_EQ(root->gid(), 0u);
  EXPECT_EQ(root->nlink(), 2u);
  // Init on an existing namespace changes nothing.
  ASSERT_OK(ns_->Init());
  EXPECT_EQ(ns_->GetAttr(kRootIno)->ctime_ns(), root->ctime_ns());
}

// Unknown inodes are ENOENT; an unknown parent of a name is a stale handle
// (ESTALE), which a mount answers by walking the path again.
TEST_F(NamespaceTest, UnknownInodesAreENOENTAndUnknownParentsESTALE) {
  EXPECT_ERRNO(ns_->GetAttr(0), ENOENT);
  EXPECT_ERRNO(ns_->GetAttr(999999), ENOENT);
  EXPECT_ERRNO(ns_->Lookup(0, "x"), ESTALE);
  EXPECT_ERRNO(ns_->Lookup(kRootIno, "missing"), ENOENT);
  EXPECT_ERRNO(ns_->ReadDir(424242, "", 0), ENOENT);
  EXPECT_ERRNO(CreateFile(5555, "f"), ESTALE);
  EXPECT_ERRNO(ns_->Open(0, false), ENOENT);
  EXPECT_ERRNO(ns_->CommitWrite(31337, 10, 0), ENOENT);
  EXPECT_ERRNO(ns_->GetXattr(31337, "user.x"), ENOENT);
}

TEST_F(NamespaceTest, CreateThenLookupReturnsTheSameFile) {
  clock_.Advance(absl::Seconds(5));
  auto file = CreateFile(kRootIno, "shard.pt", 0640);
  ASSERT_TRUE(file.ok()) << file.status();
  EXPECT_GE(file->ino(), 2u);
  EXPECT_EQ(file->type(), REGULAR);
  EXPECT_EQ(file->mode(), S_IFREG | 0640u);
  EXPECT_EQ(file->nlink(), 1u);
  EXPECT_EQ(file->size(), 0u);
  EXPECT_EQ(file->uid(), 1000u);
  EXPECT_EQ(file->mtime_ns(), clock_.NowNs());
  auto found = ns_->Lookup(kRootIno, "shard.pt");
  ASSERT_TRUE(found.ok());
  EXPECT_EQ(found->ino(), file->ino());
  EXPECT_EQ(found->layout().chunk_size(), 4u << 20);
  // The parent's times moved with the new entry.
  EXPECT_EQ(ns_->GetAttr(kRootIno)->mtime_ns(), clock_.NowNs());
  // Lookup through a regular file is ENOTDIR.
  EXPECT_ERRNO(ns_->Lookup(file->ino(), "x"), ENOTDIR);
  EXPECT_ERRNO(CreateFile(file->ino(), "x"), ENOTDIR);
}

TEST_F(NamespaceTest, CreateOfAnExistingNameOpensOrFails) {
  auto first = CreateFile(kRootIno, "f");
  ASSERT_TRUE(first.ok());
  ASSERT_OK(ns_->CommitWrite(first->ino(), 5000, 0));

  CreateRequest again;
  again.set_parent(kRootIno);
  again.set_name("f");
  again.set_mode(0600);
  auto opened = ns_->Create(again);
  ASSERT_TRUE(opened.ok());
  EXPECT_FALSE(opened->created());
  EXPECT_EQ(opened->attr().ino(), first->ino());
  EXPECT_EQ(opened->attr().size(), 5000u);
  EXPECT_EQ(opened->attr().mode(), S_IFREG | 0644u);  // mode of an existing file is kept

  again.set_truncate(true);
  auto truncated = ns_->Create(again);
  ASSERT_TRUE(truncated.ok());
  EXPECT_FALSE(truncated->created());
  EXPECT_EQ(truncated->attr().size(), 0u);
  EXPECT_EQ(ns_->GetAttr(first->ino())->size(), 0u);

  again.set_exclusive(true);
  EXPECT_ERRNO(ns_->Create(again), EEXIST);

  ASSERT_TRUE(MakeDir(kRootIno, "d").ok());
  again.set_name("d");
  again.set_exclusive(false);
  EXPECT_ERRNO(ns_->Create(again), EISDIR);
}

TEST_F(NamespaceTest, NamesAreValidated) {
  EXPECT_ERRNO(CreateFile(kRootIno, std::string(256, 'n')), ENAMETOOLONG);
  EXPECT_TRUE(CreateFile(kRootIno, std::string(255, 'n')).ok());
  for (const std::string& bad : {std::string(""), std::string("."), std::string(".."),
                                 std::string("a/b"), std::string("a\0b", 3)}) {
    EXPECT_ERRNO(CreateFile(kRootIno, bad), EINVAL) << "name of " << bad.size() << " bytes";
    EXPECT_ERRNO(MakeDir(kRootIno, bad), EINVAL);
    EXPECT_ERRNO(ns_->Lookup(kRootIno, bad), EINVAL);
    EXPECT_ERRNO(ns_->Unlink(kRootIno, bad), EINVAL);
    EXPECT_ERRNO(Rename(kRootIno, std::string(255, 'n'), kRootIno, bad), EINVAL);
  }
  EXPECT_ERRNO(MakeDir(kRootIno, std::string(300, 'd')), ENAMETOOLONG);
  EXPECT_ERRNO(ns_->Lookup(kRootIno, std::string(256, 'x')), ENAMETOOLONG);
}

TEST_F(NamespaceTest, StripesCoverAllAliveServersAndRotate) {
  const uint32_t b = AddServer("uuid-b");
  const uint32_t c = AddServer("uuid-c");
  const std::set<uint32_t> all = {server_, b, c};
  std::set<uint32_t> first_servers;
  for (int i = 0; i < 6; ++i) {
    auto file = CreateFile(kRootIno, absl::StrCat("f", i));
    ASSERT_TRUE(file.ok());
    const Layout& layout = file->layout();
    ASSERT_EQ(layout.stripe_size(), 3);
    EXPECT_EQ(std::set<uint32_t>(layout.stripe().begin(), layout.stripe().end()), all);
    first_servers.insert(layout.stripe(0));
  }
  // Consecutive files start on different servers: load spreads over all.
  EXPECT_EQ(first_servers, all);
}

TEST_F(NamespaceTest, CreateWithoutAliveServersFailsWithEIO) {
  clock_.Advance(absl::Seconds(11));  // the only server's heartbeat is now too old
  auto file = CreateFile(kRootIno, "f");
  EXPECT_ERRNO(file, EIO);
  EXPECT_NE(file.status().message().find("no storage servers are alive"), std::string::npos)
      << file.status().message();
  EXPECT_ERRNO(ns_->Lookup(kRootIno, "f"), ENOENT);  // nothing half-created
  // Directories need no storage server.
  EXPECT_TRUE(MakeDir(kRootIno, "d").ok());
  HeartbeatRequest heartbeat;
  heartbeat.set_server_id(server_);
  ASSERT_OK(membership_->Heartbeat(heartbeat));
  EXPECT_TRUE(CreateFile(kRootIno, "f").ok());
}

TEST_F(NamespaceTest, ChunkSizeComesFromTheDirectoryAndIsInherited) {
  auto dir = MakeDir(kRootIno, "ckpt");
  ASSERT_TRUE(dir.ok());
  SetXattrRequest set;
  set.set_ino(dir->ino());
  set.set_name(std::string(kChunkSizeXattr));
  set.set_value("1048576");
  ASSERT_OK(ns_->SetXattr(set));
  auto file = CreateFile(dir->ino(), "a");
  ASSERT_TRUE(file.ok());
  EXPECT_EQ(file->layout().chunk_size(), 1u << 20);
  auto sub = MakeDir(dir->ino(), "step-100");
  ASSERT_TRUE(sub.ok());
  EXPECT_EQ(*ns_->GetXattr(sub->ino(), kChunkSizeXattr), "1048576");
  EXPECT_EQ(CreateFile(sub->ino(), "b")->layout().chunk_size(), 1u << 20);
  // Elsewhere the default applies.
  EXPECT_EQ(CreateFile(kRootIno, "c")->layout().chunk_size(), 4u << 20);

  for (const char* bad : {"1000", "abc", "32768", "134217728", ""}) {
    set.set_value(bad);
    EXPECT_ERRNO(ns_->SetXattr(set), EINVAL) << bad;
  }
}

TEST_F(NamespaceTest, MkdirMaintainsNlinkAndRefusesExistingNames) {
  auto a = MakeDir(kRootIno, "a", 0700);
  ASSERT_TRUE(a.ok());
  EXPECT_EQ(a->mode(), S_IFDIR | 0700u);
  EXPECT_EQ(a->nlink(), 2u);
  EXPECT_EQ(ns_->GetAttr(kRootIno)->nlink(), 3u);
  ASSERT_TRUE(MakeDir(a->ino(), "b").ok());
  EXPECT_EQ(ns_->GetAttr(a->ino())->nlink(), 3u);
  EXPECT_ERRNO(MakeDir(kRootIno, "a"), EEXIST);
  ASSERT_TRUE(CreateFile(kRootIno, "file").ok());
  EXPECT_ERRNO(MakeDir(kRootIno, "file"), EEXIST);
  EXPECT_EQ(ns_->GetAttr(kRootIno)->nlink(), 3u);  // files do not count
}

TEST_F(NamespaceTest, SymlinksStoreTheirTarget) {
  SymlinkRequest request;
  request.set_parent(kRootIno);
  request.set_name("latest");
  request.set_target("step-200/model.pt");
  auto link = ns_->Symlink(request);
  ASSERT_TRUE(link.ok()) << link.status();
  EXPECT_EQ(link->type(), SYMLINK);
  EXPECT_EQ(link->mode(), S_IFLNK | 0777u);
  EXPECT_EQ(link->size(), request.target().size());
  EXPECT_EQ(*ns_->ReadLink(link->ino()), "step-200/model.pt");
  EXPECT_ERRNO(ns_->Symlink(request), EEXIST);
  auto file = CreateFile(kRootIno, "f");
  EXPECT_ERRNO(ns_->ReadLink(file->ino()), EINVAL);
  request.set_name("empty");
  request.set_target("");
  EXPECT_ERRNO(ns_->Symlink(request), ENOENT);
  request.set_target(std::string(5000, 'x'));
  EXPECT_ERRNO(ns_->Symlink(request), ENAMETOOLONG);
  // Create over a symlink's name does not replace it.
  EXPECT_ERRNO(CreateFile(kRootIno, "latest"), EEXIST);
}

TEST_F(NamespaceTest, SetAttrAppliesOnlyTheValidFields) {
  auto file = CreateFile(kRootIno, "f", 0644);
  ASSERT_TRUE(file.ok());
  clock_.Advance(absl::Seconds(1));
  SetAttrRequest request;
  request.set_ino(file->ino());
  request.set_valid(SET_MODE | SET_UID);
  request.set_mode(S_IFDIR | 04711);  // type bits in the request are ignored
  request.set_uid(42);
  request.set_gid(43);  // not in valid
  auto changed = ns_->SetAttr(request);
  ASSERT_TRUE(changed.ok());
  EXPECT_EQ(changed->mode(), S_IFREG | 04711u);
  EXPECT_EQ(changed->uid(), 42u);
  EXPECT_EQ(changed->gid(), 1000u);
  EXPECT_EQ(changed->ctime_ns(), clock_.NowNs());
  EXPECT_EQ(changed->mtime_ns(), file->mtime_ns());

  request.set_valid(SET_SIZE | SET_ATIME | SET_GID);
  request.set_size(12345);
  request.set_atime_ns(777);
  auto truncated = ns_->SetAttr(request);
  ASSERT_TRUE(truncated.ok());
  EXPECT_EQ(truncated->size(), 12345u);
  EXPECT_EQ(truncated->atime_ns(), 777);
  EXPECT_EQ(truncated->gid(), 43u);
  EXPECT_EQ(truncated->mtime_ns(), clock_.NowNs());  // a size change sets mtime

  clock_.Advance(absl::Seconds(1));
  request.set_valid(SET_MTIME);
  request.set_mtime_ns(999);
  EXPECT_EQ(ns_->SetAttr(request)->mtime_ns(), 999);
  request.set_valid(SET_ATIME_NOW | SET_MTIME_NOW);
  auto now = ns_->SetAttr(request);
  EXPECT_EQ(now->atime_ns(), clock_.NowNs());
  EXPECT_EQ(now->mtime_ns(), clock_.NowNs());
  EXPECT_EQ(ns_->GetAttr(file->ino())->size(), 12345u);

  request.set_ino(kRootIno);
  request.set_valid(SET_SIZE);
  EXPECT_ERRNO(ns_->SetAttr(request), EISDIR);
  request.set_ino(0);
  EXPECT_ERRNO(ns_->SetAttr(request), ENOENT);
}

TEST_F(NamespaceTest, OpenTruncatesAndCommitWriteOnlyGrows) {
  auto file = CreateFile(kRootIno, "f");
  ASSERT_TRUE(file.ok());
  auto grown = ns_->CommitWrite(file->ino(), 10 << 20, 0);
  ASSERT_TRUE(grown.ok());
  EXPECT_EQ(grown->size(), 10u << 20);
  EXPECT_EQ(ns_->CommitWrite(file->ino(), 100, 5555)->size(), 10u << 20);
  EXPECT_EQ(ns_->GetAttr(file->ino())->mtime_ns(), 5555);
  EXPECT_EQ(ns_->Open(file->ino(), false)->size(), 10u << 20);
  EXPECT_EQ(ns_->Open(file->ino(), true)->size(), 0u);
  EXPECT_EQ(ns_->GetAttr(file->ino())->size(), 0u);
  EXPECT_ERRNO(ns_->Open(kRootIno, true), EISDIR);
  EXPECT_TRUE(ns_->Open(kRootIno, false).ok());
  EXPECT_ERRNO(ns_->CommitWrite(kRootIno, 1, 0), EISDIR);
}

// Clients tell a changed file by its ctime (close-to-open page caching):
// every change must move it forward, even within one clock tick or after
// the service's clock stepped back.
TEST_F(NamespaceTest, EveryChangeMovesCtimeForwardWhateverTheClockDoes) {
  auto file = CreateFile(kRootIno, "f");
  ASSERT_TRUE(file.ok());
  int64_t last = file->ctime_ns();
  auto expect_later = [&](const absl::StatusOr<Attr>& attr, const char* what) {
    ASSERT_TRUE(attr.ok()) << what << ": " << attr.status();
    EXPECT_GT(attr->ctime_ns(), last) << what;
    last = attr->ctime_ns();
  };
  expect_later(ns_->CommitWrite(file->ino(), 100, 5555), "commit, same tick");
  expect_later(ns_->CommitWrite(file->ino(), 50, 5555), "rewrite in place, same mtime");
  clock_.Advance(absl::Seconds(-10));
  expect_later(ns_->Open(file->ino(), /*truncate=*/true), "truncate, clock stepped back");
  SetAttrRequest chmod;
  chmod.set_ino(file->ino());
  chmod.set_valid(SET_MODE);
  chmod.set_mode(0600);
  expect_later(ns_->SetAttr(chmod), "chmod");
  CreateRequest truncate;
  truncate.set_parent(kRootIno);
  truncate.set_name("f");
  truncate.set_mode(0644);
  truncate.set_truncate(true);
  auto created = ns_->Create(truncate);
  ASSERT_TRUE(created.ok()) << created.status();
  expect_later(created->attr(), "O_CREAT|O_TRUNC of the existing file");
}

TEST_F(NamespaceTest, XattrsFollowLinuxSemantics) {
  auto file = CreateFile(kRootIno, "f");
  ASSERT_TRUE(file.ok());
  const uint64_t ino = file->ino();
  SetXattrRequest set;
  set.set_ino(ino);
  set.set_name("user.rank");
  set.set_value(std::string("7\0bin", 5));
  EXPECT_ERRNO(ns_->GetXattr(ino, "user.rank"), ENODATA);
  set.set_replace_only(true);
  EXPECT_ERRNO(ns_->SetXattr(set), ENODATA);
  set.set_replace_only(false);
  set.set_create_only(true);
  ASSERT_OK(ns_->SetXattr(set));
  EXPECT_ERRNO(ns_->SetXattr(set), EEXIST);
  EXPECT_EQ(*ns_->GetXattr(ino, "user.rank"), std::string("7\0bin", 5));
  set.set_create_only(false);
  set.set_replace_only(true);
  set.set_value("8");
  ASSERT_OK(ns_->SetXattr(set));
  EXPECT_EQ(*ns_->GetXattr(ino, "user.rank"), "8");
  set.set_replace_only(false);
  set.set_name("user.a");
  ASSERT_OK(ns_->SetXattr(set));
  EXPECT_EQ(*ns_->ListXattr(ino), (std::vector<std::string>{"user.a", "user.rank"}));
  ASSERT_OK(ns_->RemoveXattr(ino, "user.a"));
  EXPECT_ERRNO(ns_->RemoveXattr(ino, "user.a"), ENODATA);
  EXPECT_EQ(*ns_->ListXattr(ino), std::vector<std::string>{"user.rank"});

  set.set_name(std::string(256, 'x'));
  EXPECT_ERRNO(ns_->SetXattr(set), ERANGE);
  set.set_name("");
  EXPECT_ERRNO(ns_->SetXattr(set), ERANGE);
  set.set_name("user.big");
  set.set_value(std::string(65537, 'v'));
  EXPECT_ERRNO(ns_->SetXattr(set), E2BIG);
  set.set_value(std::string(65536, 'v'));
  EXPECT_OK(ns_->SetXattr(set));
  set.set_ino(0);
  EXPECT_ERRNO(ns_->SetXattr(set), ENOENT);
}

TEST_F(NamespaceTest, XattrsOfOneInodeAreBounded) {
  auto file = CreateFile(kRootIno, "f");
  ASSERT_TRUE(file.ok());
  SetXattrRequest set;
  set.set_ino(file->ino());
  set.set_value(std::string(65536, 'v'));
  for (int i = 0; i < 15; ++i) {
    set.set_name(absl::StrCat("user.x", i));
    ASSERT_OK(ns_->SetXattr(set));
  }
  set.set_name("user.x15");
  EXPECT_ERRNO(ns_->SetXattr(set), ENOSPC);
  set.set_name("user.x3");  // replacing one in place still fits
  EXPECT_OK(ns_->SetXattr(set));
  EXPECT_EQ(ns_->ListXattr(file->ino())->size(), 15u);
}

TEST_F(NamespaceTest, StatFsSumsAliveServersAndCountsInodes) {
  AddServer("uuid-b", 5000, 1000);
  auto stats = ns_->StatFs();
  ASSERT_TRUE(stats.ok());
  EXPECT_EQ(stats->total_bytes(), 6000u);
  EXPECT_EQ(stats->free_bytes(), 900u + 4000u);
  EXPECT_EQ(stats->servers_up(), 2u);
  EXPECT_EQ(stats->servers_total(), 2u);
  EXPECT_EQ(stats->files(), 1u);  // the root
  ASSERT_TRUE(CreateFile(kRootIno, "f").ok());
  ASSERT_TRUE(MakeDir(kRootIno, "d").ok());
  EXPECT_EQ(ns_->StatFs()->files(), 3u);
  ASSERT_OK(ns_->Rmdir(kRootIno, "d"));
  EXPECT_EQ(ns_->StatFs()->files(), 2u);

  clock_.Advance(absl::Seconds(8));
  HeartbeatRequest heartbeat;
  heartbeat.set_server_id(server_);
  heartbeat.set_capacity_bytes(2000);
  heartbeat.set_used_bytes(500);
  ASSERT_OK(membership_->Heartbeat(heartbeat));
  clock_.Advance(absl::Seconds(5));  // uuid-b is now down
  stats = ns_->StatFs();
  EXPECT_EQ(stats->total_bytes(), 2000u);
  EXPECT_EQ(stats->free_bytes(), 1500u);
  EXPECT_EQ(stats->servers_up(), 1u);
  EXPECT_EQ(stats->servers_total(), 2u);
}

TEST_F(NamespaceTest, EverythingSurvivesReopeningTheStore) {
  auto dir = MakeDir(kRootIno, "run");
  ASSERT_TRUE(dir.ok());
  auto file = CreateFile(dir->ino(), "rank0.pt");
  ASSERT_TRUE(file.ok());
  ASSERT_TRUE(ns_->CommitWrite(file->ino(), 123456, 0).ok());
  SetXattrRequest set;
  set.set_ino(dir->ino());
  set.set_name("user.note");
  set.set_value("kept");
  ASSERT_OK(ns_->SetXattr(set));

  Reopen();

  auto found_dir = ns_->Lookup(kRootIno, "run");
  ASSERT_TRUE(found_dir.ok()) << found_dir.status();
  EXPECT_EQ(found_dir->ino(), dir->ino());
  EXPECT_EQ(*ns_->GetXattr(dir->ino(), "user.note"), "kept");
  auto found = ns_->Lookup(dir->ino(), "rank0.pt");
  ASSERT_TRUE(found.ok());
  EXPECT_EQ(found->size(), 123456u);
  EXPECT_EQ(found->layout().stripe_size(), 1);
  EXPECT_EQ(ns_->GetAttr(kRootIno)->nlink(), 3u);
  EXPECT_EQ(ns_->StatFs()->files(), 3u);
  // Inode numbers are never reused after a restart.
  auto after = CreateFile(dir->ino(), "rank1.pt");
  ASSERT_TRUE(after.ok());
  EXPECT_GT(after->ino(), file->ino());
}

TEST_F(NamespaceTest, ConcurrentCreatesInOneDirectoryAllSucceed) {
  constexpr int kThreads = 8;
  constexpr int kFiles = 60;
  auto dir = MakeDir(kRootIno, "storm");
  ASSERT_TRUE(dir.ok());
  std::vector<std::thread> threads;
  std::vector<std::vector<uint64_t>> inos(kThreads);
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      for (int i = 0; i < kFiles; ++i) {
        auto file = CreateFile(dir->ino(), absl::StrCat("rank", t, "_", i));
        EXPECT_TRUE(file.ok()) << file.status();
        if (file.ok()) inos[t].push_back(file->ino());
      }
    });
  }
  for (auto& thread : threads) thread.join();
  std::set<uint64_t> unique;
  for (const auto& list : inos) unique.insert(list.begin(), list.end());
  EXPECT_EQ(unique.size(), size_t{kThreads * kFiles});
  auto listing = ns_->ReadDir(dir->ino(), "", 10000);
  ASSERT_TRUE(listing.ok());
  EXPECT_EQ(listing->entries_size(), kThreads * kFiles);
  EXPECT_EQ(ns_->StatFs()->files(), uint64_t{kThreads * kFiles + 2});
}

}  // namespace
}  // namespace ckptfs::meta
