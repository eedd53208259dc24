// MetaTxn (server/meta/meta_txn.h): a key's first read is what every later
// read of it returns, and it is compared once, at the version read — read
// with a lookup or answered from a read-ahead run; keys of a run that are
// never read are not compared.
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "server/meta/memory_kv_store.h"
#include "server/meta/meta_txn.h"

namespace ckptfs::meta {
namespace {

class MetaTxnTest : public ::testing::Test {
 protected:
  int64_t Put(const std::string& key, const std::string& value) {
    Txn txn;
    txn.Put(key, value);
    auto revision = kv_.Commit(txn);
    EXPECT_TRUE(revision.ok()) << revision.status();
    return revision.ok() ? *revision : -1;
  }

  std::vector<KeyValue> ScanAll(const std::string& prefix) {
    auto run = kv_.Scan(prefix, "", 1000);
    EXPECT_TRUE(run.ok()) << run.status();
    return run.ok() ? *std::move(run) : std::vector<KeyValue>();
  }

  std::optional<std::string> Get(MetaTxn& txn, const std::string& key) {
    auto value = txn.Get(key);
    EXPECT_TRUE(value.ok()) << value.status();
    return value.ok() ? *value : std::nullopt;
  }

  // Every compare of `txn`, by key; a key compared twice fails the test.
  static std::map<std::string, int64_t> Compares(const MetaTxn& txn) {
    std::map<std::string, int64_t> out;
    for (const Compare& compare : txn.txn().SortedCompares()) {
      EXPECT_TRUE(out.emplace(std::string(compare.key), compare.version).second)
          << compare.key << " compared twice";
    }
    return out;
  }

  // Commits `txn` with one write; true if it committed, false on a conflict.
  bool Commits(MetaTxn& txn) {
    txn.PutRaw("w/result", "1");
    auto result = kv_.Commit(txn.txn());
    EXPECT_TRUE(result.ok() || IsTxnConflict(result.status())) << result.status();
    return result.ok();
  }

  MemoryKvStore kv_;
};

TEST_F(MetaTxnTest, RepeatedReadsReturnTheFirstReadAndCompareItOnce) {
  const int64_t v1 = Put("k/a", "one");
  MetaTxn txn(&kv_);
  EXPECT_EQ(Get(txn, "k/a"), "one");
  Put("k/a", "two");
  EXPECT_EQ(Get(txn, "k/a"), "one");
  EXPECT_EQ(Get(txn, "k/absent"), std::nullopt);
  Put("k/absent", "now here");
  EXPECT_EQ(Get(txn, "k/absent"), std::nullopt);
  EXPECT_EQ(Compares(txn), (std::map<std::string, int64_t>{{"k/a", v1}, {"k/absent", 0}}));
  EXPECT_FALSE(Commits(txn));
}

TEST_F(MetaTxnTest, ReadAheadAnswersWithTheScannedValueAndVersion) {
  std::map<std::string, int64_t> versions;
  for (int i = 0; i < 5; ++i) {
    const std::string key = absl::StrCat("i/", i);
    versions[key] = Put(key, absl::StrCat("v", i));
  }
  MetaTxn txn(&kv_);
  txn.ReadAhead(ScanAll("i/"));
  Put("i/2", "changed after the scan");
  EXPECT_EQ(Get(txn, "i/2"), "v2");
  EXPECT_EQ(Get(txn, "i/2"), "v2");
  auto record = txn.Get("i/4");
  ASSERT_TRUE(record.ok());
  EXPECT_EQ(*record, "v4");
  // Only the keys read are compared, at the scan's versions.
  EXPECT_EQ(Compares(txn),
            (std::map<std::string, int64_t>{{"i/2", versions["i/2"]}, {"i/4", versions["i/4"]}}));
  EXPECT_EQ(txn.reads(), 2u);
  EXPECT_FALSE(Commits(txn));  // i/2 changed
}

TEST_F(MetaTxnTest, KeysOfARunNeverReadAreNotCompared) {
  for (int i = 0; i < 5; ++i) Put(absl::StrCat("i/", i), "v");
  MetaTxn txn(&kv_);
  txn.ReadAhead(ScanAll("i/"));
  EXPECT_EQ(Get(txn, "i/1"), "v");
  Put("i/3", "changed, but never read");
  EXPECT_TRUE(Commits(txn));
}

TEST_F(MetaTxnTest, AKeyReadBeforeTheReadAheadKeepsItsFirstRead) {
  const int64_t first = Put("i/1", "first");
  Put("i/2", "x");
  MetaTxn txn(&kv_);
  EXPECT_EQ(Get(txn, "i/1"), "first");
  Put("i/1", "second");
  txn.ReadAhead(ScanAll("i/"));  // saw "second"
  EXPECT_EQ(Get(txn, "i/1"), "first");
  EXPECT_EQ(Compares(txn), (std::map<std::string, int64_t>{{"i/1", first}}));
  EXPECT_FALSE(Commits(txn));
}

TEST_F(MetaTxnTest, AKeyOfTwoRunsIsAnsweredByTheEarlierOne) {
  const int64_t first = Put("i/1", "first");
  MetaTxn txn(&kv_);
  txn.ReadAhead(ScanAll("i/"));
  Put("i/1", "second");
  txn.ReadAhead(ScanAll("i/"));
  EXPECT_EQ(Get(txn, "i/1"), "first");
  EXPECT_EQ(Compares(txn), (std::map<std::string, int64_t>{{"i/1", first}}));
  EXPECT_FALSE(Commits(txn));
}

TEST_F(MetaTxnTest, AKeyOutsideTheRunsIsLookedUp) {
  Put("i/1", "in the run");
  MetaTxn txn(&kv_);
  txn.ReadAhead(ScanAll("i/"));
  const int64_t other = Put("j/1", "after the scan");
  EXPECT_EQ(Get(txn, "j/1"), "after the scan");
  EXPECT_EQ(Get(txn, "i/0"), std::nullopt);  // in no run: absent at lookup
  EXPECT_EQ(Compares(txn), (std::map<std::string, int64_t>{{"i/0", 0}, {"j/1", other}}));
  EXPECT_TRUE(Commits(txn));
}

}  // namespace
}  // namespace ckptfs::meta
