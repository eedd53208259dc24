// Read-ahead (ReadInodesAhead in server/meta/checkpoint/subtree.h, over
// MetaTxn::ReadAhead): a subtree read with read-ahead sees the same entries
// and records the same compares as one without, reads a dense directory's
// inodes with scans instead of lookups (and a sparse one's with lookups),
// and a value changed after it was read ahead fails the commit.
#include <atomic>
#include <map>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "server/meta/checkpoint/subtree.h"
#include "server/meta/keys.h"
#include "tests/meta/checkpoint_test_util.h"

namespace ckptfs::meta {
namespace {

// Counts the inode lookups that reach the store.
class CountingKv : public KvStore {
 public:
  explicit CountingKv(KvStore* kv) : kv_(kv) {}
  absl::StatusOr<std::optional<VersionedValue>> Get(absl::string_view key) override {
    if (absl::StartsWith(key, kInodePrefix)) ++inode_gets;
    return kv_->Get(key);
  }
  absl::StatusOr<std::vector<KeyValue>> Scan(absl::string_view prefix,
                                             absl::string_view start_after, size_t limit) override {
    return kv_->Scan(prefix, start_after, limit);
  }
  absl::StatusOr<int64_t> Commit(const Txn& txn) override { return kv_->Commit(txn); }

  std::atomic<int> inode_gets{0};

 private:
  KvStore* const kv_;
};

// Every compare of `txn`, by key.
std::map<std::string, int64_t> Compares(const Txn& txn) {
  std::map<std::string, int64_t> out;
  for (const Compare& compare : txn.SortedCompares()) {
    EXPECT_TRUE(out.emplace(std::string(compare.key), compare.version).second)
        << "key compared twice";
  }
  return out;
}

class SubtreeReadAheadTest : public CheckpointFixture {
 protected:
  // `count` files in a new directory `name`, plus a subdirectory with two.
  uint64_t Tree(const std::string& name, int count) {
    const uint64_t dir = Dir(kRootIno, name);
    for (int i = 0; i < count; ++i) File(dir, absl::StrCat("file-", i), 100 + i);
    const uint64_t sub = Dir(dir, "sub");
    File(sub, "a");
    File(sub, "b");
    return dir;
  }
};

TEST_F(SubtreeReadAheadTest, SameEntriesAndComparesWithFewerLookups) {
  const uint64_t dir = Tree("dense", 200);
  CountingKv counting(store_.get());
  MetaTxn plain(&counting);
  auto without = ReadSubtree(plain, dir);
  ASSERT_TRUE(without.ok()) << without.status();
  const int plain_gets = counting.inode_gets.exchange(0);
  EXPECT_EQ(plain_gets, 203);  // 200 files, sub, a, b

  MetaTxn txn(&counting);
  auto with = ReadSubtree(txn, dir, /*read_ahead=*/true);
  ASSERT_TRUE(with.ok()) << with.status();
  // The 201 entries of the top directory came with one scan; the
  // subdirectory's two are too few to read ahead.
  EXPECT_EQ(counting.inode_gets.load(), 2);
  ASSERT_EQ(with->size(), without->size());
  for (size_t i = 0; i < with->size(); ++i) {
    EXPECT_EQ((*with)[i].path, (*without)[i].path);
    EXPECT_EQ((*with)[i].inode.SerializeAsString(), (*without)[i].inode.SerializeAsString());
  }
  EXPECT_EQ(Compares(txn.txn()), Compares(plain.txn()));
}

TEST_F(SubtreeReadAheadTest, SparseInodesAreLookedUpOneByOne) {
  // Files of three directories created in turn: each directory's inode
  // numbers are every third one, too sparse for a scan of their range.
  const uint64_t a = Dir(kRootIno, "a");
  const uint64_t b = Dir(kRootIno, "b");
  const uint64_t c = Dir(kRootIno, "c");
  for (int i = 0; i < 64; ++i) {
    File(a, absl::StrCat("f", i));
    File(b, absl::StrCat("f", i));
    File(c, absl::StrCat("f", i));
  }
  CountingKv counting(store_.get());
  MetaTxn txn(&counting);
  auto entries = ReadSubtree(txn, a, /*read_ahead=*/true);
  ASSERT_TRUE(entries.ok()) << entries.status();
  EXPECT_EQ(entries->size(), 64u);
  EXPECT_EQ(counting.inode_gets.load(), 64);
}

TEST_F(SubtreeReadAheadTest, AValueChangedSinceTheReadAheadFailsTheCommit) {
  const uint64_t dir = Tree("dense", 100);
  MetaTxn list(store_.get());
  auto entries = ReadSubtree(list, dir);
  ASSERT_TRUE(entries.ok()) << entries.status();
  std::vector<uint64_t> inos;
  for (const SubtreeEntry& entry : *entries) inos.push_back(entry.inode.attr().ino());
  MetaTxn txn(store_.get());
  ASSERT_OK(ReadInodesAhead(txn, inos));
  // A file grows after the read-ahead: the txn reads the value and version
  // the scan saw, and its commit must fail.
  const uint64_t file = inos[5];
  const uint64_t size = (*entries)[5].inode.attr().size();
  ASSERT_OK(ns_->CommitWrite(file, 5000, 0));
  auto inode = txn.GetInode(file);
  ASSERT_TRUE(inode.ok()) << inode.status();
  EXPECT_EQ(inode->attr().size(), size);  // as read ahead
  txn.PutRaw("x/test", "1");
  auto committed = store_->Commit(txn.txn());
  EXPECT_TRUE(IsTxnConflict(committed.status())) << committed.status();
  EXPECT_FALSE(store_->Get("x/test")->has_value());
}

}  // namespace
}  // namespace ckptfs::meta
