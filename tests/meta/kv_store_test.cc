// Tests of the KvStore contract, run on every backend (RocksDB, memory; etcd
// joins here): versions and revisions, compare semantics, atomicity, scan
// paging and prefix bounds, RunTxn retries under contention; for RocksDB
// also persistence across close/reopen and exclusive opening. Also
// the key encodings of keys.h.
#include <functional>
#include <map>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "gtest/gtest.h"
#include "server/meta/keys.h"
#include "server/meta/memory_kv_store.h"
#include "server/meta/meta_txn.h"
#include "server/meta/rocksdb_kv_store.h"
#include "tests/meta/meta_test_util.h"

namespace ckptfs::meta {
namespace {

// A backend under test and how to open it on a directory.
struct Backend {
  std::string name;
  std::function<absl::StatusOr<std::unique_ptr<KvStore>>(const std::string& dir)> open;
};

void PrintTo(const Backend& backend, std::ostream* os) { *os << backend.name; }

Backend RocksDbBackend() {
  return Backend{"RocksDb", [](const std::string& dir) -> absl::StatusOr<std::unique_ptr<KvStore>> {
                   auto store = RocksDbKvStore::Open(dir, RocksDbKvStore::Options{});
                   if (!store.ok()) return store.status();
                   return std::unique_ptr<KvStore>(*std::move(store));
                 }};
}

Backend MemoryBackend() {
  return Backend{"Memory", [](const std::string&) -> absl::StatusOr<std::unique_ptr<KvStore>> {
                   return std::unique_ptr<KvStore>(std::make_unique<MemoryKvStore>());
                 }};
}

// The KvStore contract, run against every backend.
class KvStoreTest : public ::testing::TestWithParam<Backend> {
 protected:
  void SetUp() override { Open(); }
  void Open() {
    auto store = GetParam().open(dir_.path());
    ASSERT_TRUE(store.ok()) << store.status();
    kv_ = *std::move(store);
  }

  int64_t Put(const std::string& key, const std::string& value) {
    Txn txn;
    txn.Put(key, value);
    auto revision = kv_->Commit(txn);
    EXPECT_TRUE(revision.ok()) << revision.status();
    return revision.ok() ? *revision : -1;
  }

  int64_t VersionOf(const std::string& key) {
    auto value = kv_->Get(key);
    EXPECT_TRUE(value.ok());
    return value.ok() && value->has_value() ? (*value)->version : 0;
  }

  std::vector<std::string> ScanKeys(const std::string& prefix, const std::string& start_after,
                                    size_t limit) {
    auto entries = kv_->Scan(prefix, start_after, limit);
    EXPECT_TRUE(entries.ok()) << entries.status();
    std::vector<std::string> keys;
    if (entries.ok()) {
      for (const KeyValue& kv : *entries) keys.push_back(kv.key);
    }
    return keys;
  }

  TempDir dir_;
  std::unique_ptr<KvStore> kv_;
};

// Closing, reopening and exclusive opening: backends with a data dir.
class RocksDbKvStoreTest : public KvStoreTest {};

TEST_P(KvStoreTest, GetOfMissingKeyIsEmpty) {
  auto value = kv_->Get("nothing");
  ASSERT_TRUE(value.ok());
  EXPECT_FALSE(value->has_value());
}

TEST_P(KvStoreTest, EachCommitAdvancesTheRevisionAndVersionsFollowIt) {
  const int64_t r1 = Put("a", "1");
  const int64_t r2 = Put("b", "2");
  EXPECT_GT(r1, 0);
  EXPECT_EQ(r2, r1 + 1);
  auto a = kv_->Get("a");
  ASSERT_TRUE(a.ok() && a->has_value());
  EXPECT_EQ((*a)->value, "1");
  EXPECT_EQ((*a)->version, r1);
  EXPECT_EQ(VersionOf("b"), r2);
  // Rewriting a key gives it the new revision.
  EXPECT_EQ(VersionOf("a"), r1);
  const int64_t r3 = Put("a", "3");
  EXPECT_EQ(VersionOf("a"), r3);
}

TEST_P(KvStoreTest, CompareOnAbsentKeyWithVersionZero) {
  Txn create;
  create.ExpectVersion("k", 0);
  create.Put("k", "v");
  ASSERT_TRUE(kv_->Commit(create).ok());
  // The same "must be absent" compare now fails.
  auto again = kv_->Commit(create);
  EXPECT_TRUE(IsTxnConflict(again.status())) << again.status();
}

TEST_P(KvStoreTest, StaleVersionAbortsAndWritesNothing) {
  const int64_t v1 = Put("x", "old");
  Put("x", "newer");
  Txn txn;
  txn.ExpectVersion("x", v1);  // stale
  txn.Put("x", "lost");
  txn.Put("y", "also lost");
  txn.Delete("z");
  Put("z", "kept");
  auto result = kv_->Commit(txn);
  ASSERT_FALSE(result.ok());
  EXPECT_EQ(result.status().code(), absl::StatusCode::kAborted);
  EXPECT_TRUE(IsTxnConflict(result.status()));
  auto x = kv_->Get("x");
  ASSERT_TRUE(x.ok() && x->has_value());
  EXPECT_EQ((*x)->value, "newer");
  EXPECT_FALSE(kv_->Get("y")->has_value());
  EXPECT_TRUE(kv_->Get("z")->has_value());
}

TEST_P(KvStoreTest, MatchingVersionsCommitPutsAndDeletesTogether) {
  const int64_t va = Put("a", "1");
  const int64_t vb = Put("b", "2");
  Txn txn;
  txn.ExpectVersion("a", va);
  txn.ExpectVersion("b", vb);
  txn.ExpectVersion("c", 0);
  txn.Delete("a");
  txn.Put("b", "22");
  txn.Put("c", "3");
  auto revision = kv_->Commit(txn);
  ASSERT_TRUE(revision.ok()) << revision.status();
  EXPECT_FALSE(kv_->Get("a")->has_value());
  EXPECT_EQ((*kv_->Get("b"))->value, "22");
  EXPECT_EQ((*kv_->Get("b"))->version, *revision);
  EXPECT_EQ((*kv_->Get("c"))->version, *revision);
}

TEST_P(KvStoreTest, LaterWriteOfTheSameKeyInOneTxnWins) {
  Txn txn;
  txn.Put("k", "first");
  txn.Delete("k");
  txn.Put("k", "last");
  ASSERT_TRUE(kv_->Commit(txn).ok());
  EXPECT_EQ((*kv_->Get("k"))->value, "last");
  Txn remove;
  remove.Put("k", "ignored");
  remove.Delete("k");
  ASSERT_TRUE(kv_->Commit(remove).ok());
  EXPECT_FALSE(kv_->Get("k")->has_value());
}

TEST_P(KvStoreTest, CompareOnlyTxnWritesNothing) {
  const int64_t v = Put("k", "v");
  Txn check;
  check.ExpectVersion("k", v);
  auto revision = kv_->Commit(check);
  ASSERT_TRUE(revision.ok());
  EXPECT_EQ(*revision, v);  // no new revision
  check.ExpectVersion("other", 5);
  EXPECT_TRUE(IsTxnConflict(kv_->Commit(check).status()));
}

TEST_P(KvStoreTest, ScanStaysWithinItsPrefixInKeyOrder) {
  for (const char* key : {"a", "a/", "a/1", "a/2", "a/3", "a0", "b/1", "`/z"}) Put(key, key);
  EXPECT_EQ(ScanKeys("a/", "", 100), (std::vector<std::string>{"a/", "a/1", "a/2", "a/3"}));
  EXPECT_EQ(ScanKeys("a/", "1", 100), (std::vector<std::string>{"a/2", "a/3"}));
  EXPECT_EQ(ScanKeys("a/", "3", 100), std::vector<std::string>{});
  EXPECT_EQ(ScanKeys("a/", "", 2), (std::vector<std::string>{"a/", "a/1"}));
  EXPECT_EQ(ScanKeys("b/", "", 100), std::vector<std::string>{"b/1"});
  EXPECT_EQ(ScanKeys("c/", "", 100), std::vector<std::string>{});
  EXPECT_EQ(ScanKeys("", "", 100).size(), 8u);
}

TEST_P(KvStoreTest, ScanHandlesPrefixesEndingInFF) {
  const std::string ff("\xff", 1);
  Put("p" + ff + "1", "a");
  Put("p" + ff + ff, "b");
  Put("q", "c");
  EXPECT_EQ(ScanKeys("p" + ff, "", 10).size(), 2u);
  EXPECT_EQ(ScanKeys(ff, "", 10).size(), 0u);
}

TEST_P(KvStoreTest, ScanPagesThroughManyKeys) {
  Txn txn;
  for (int i = 0; i < 2500; ++i) txn.Put(DentryKey(7, absl::StrCat("f", 10000 + i)), "x");
  txn.Put(DentryKey(8, "other"), "x");
  txn.Put(DentryKey(6, "other"), "x");
  ASSERT_TRUE(kv_->Commit(txn).ok());
  const std::string prefix = DentryPrefix(7);
  std::string start_after;
  int seen = 0;
  while (true) {
    auto page = kv_->Scan(prefix, start_after, 1000);
    ASSERT_TRUE(page.ok());
    for (const KeyValue& kv : *page) {
      EXPECT_EQ(kv.key.substr(prefix.size()), absl::StrCat("f", 10000 + seen));
      ++seen;
    }
    if (page->size() < 1000) break;
    start_after = page->back().key.substr(prefix.size());
  }
  EXPECT_EQ(seen, 2500);
}

TEST_P(RocksDbKvStoreTest, StatePersistsAcrossCloseAndReopen) {
  const int64_t va = Put("a", "alpha");
  Put("gone", "x");
  Txn remove;
  remove.Delete("gone");
  const int64_t last = *kv_->Commit(remove);
  kv_.reset();
  Open();
  auto a = kv_->Get("a");
  ASSERT_TRUE(a.ok() && a->has_value());
  EXPECT_EQ((*a)->value, "alpha");
  EXPECT_EQ((*a)->version, va);
  EXPECT_FALSE(kv_->Get("gone")->has_value());
  // The revision continues rather than restarting (no version is reused).
  EXPECT_GT(Put("b", "beta"), last);
}

TEST_P(RocksDbKvStoreTest, SecondOpenOfTheSameDirectorySaysInUse) {
  auto second = GetParam().open(dir_.path());
  ASSERT_FALSE(second.ok());
  EXPECT_EQ(ErrnoFromStatus(second.status()), EBUSY);
  EXPECT_NE(second.status().message().find("in use"), std::string::npos)
      << second.status().message();
}

TEST_P(KvStoreTest, RunTxnRetriesConflictsSoNoIncrementIsLost) {
  constexpr int kThreads = 4;
  constexpr int kIncrements = 150;
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&] {
      for (int i = 0; i < kIncrements; ++i) {
        absl::Status status = RunTxn(kv_.get(), "increment", [](MetaTxn& txn) -> absl::Status {
          auto current = txn.Get("counter");
          if (!current.ok()) return current.status();
          uint64_t value = current->has_value() ? *DecodeU64(**current) : 0;
          txn.PutRaw("counter", EncodeU64(value + 1));
          return absl::OkStatus();
        });
        EXPECT_TRUE(status.ok()) << status;
      }
    });
  }
  for (auto& thread : threads) thread.join();
  EXPECT_EQ(DecodeU64((*kv_->Get("counter"))->value), uint64_t{kThreads * kIncrements});
}

TEST_P(KvStoreTest, RunTxnReturnsBodyErrorsWithoutCommitting) {
  absl::Status status = RunTxn(kv_.get(), "failing", [](MetaTxn& txn) -> absl::Status {
    txn.PutRaw("k", "v");
    return ErrnoStatus(ENOSPC, "no");
  });
  EXPECT_EQ(ErrnoFromStatus(status), ENOSPC);
  EXPECT_FALSE(kv_->Get("k")->has_value());
}

std::string BackendName(const ::testing::TestParamInfo<Backend>& info) { return info.param.name; }

// A commit over many keys (the iterator walk of RocksDbKvStore: Next
// between neighbours, a seek across a gap, keys past the last one) holds
// exactly when every compare does, whichever form gave it and in whatever
// order; each kind of mismatch, anywhere, aborts and writes nothing.
TEST_P(KvStoreTest, ManyComparesHoldOnlyWhenEveryOneDoes) {
  std::map<std::string, int64_t> stored;
  for (int i = 0; i < 120; ++i) {
    // Dense keys, then a gap of 80, then dense again.
    const std::string key = absl::StrFormat("c/%04d", i < 60 ? i : i + 80);
    stored[key] = Put(key, absl::StrCat("value-", i));
  }
  // Keys no compare names, inside the gap: the walk must seek past them.
  for (int i = 70; i < 110; ++i) Put(absl::StrFormat("c/%04d", i), "not compared");
  Put("a/before", "x");
  // Every stored key, some absent ones (between neighbours, in the gap,
  // before and past every key) at 0.
  std::vector<std::pair<std::string, int64_t>> matching(stored.begin(), stored.end());
  for (const char* absent :
       {"c/0010x", "c/0065", "c/0100x", "c/0139", "b/absent", "z/absent", "c/9999"}) {
    matching.emplace_back(absent, 0);
  }
  auto commit = [&](const std::vector<std::pair<std::string, int64_t>>& compares) {
    Txn txn;
    // Most given once, newest key first; every seventh through the
    // collapsing form.
    for (size_t i = compares.size(); i-- > 0;) {
      if (i % 7 == 3) {
        txn.ExpectVersion(compares[i].first, compares[i].second);
      } else {
        txn.ExpectVersionOnce(compares[i].first, compares[i].second);
      }
    }
    txn.Put("w/result", "written");
    return kv_->Commit(txn);
  };
  auto changed = [&](const std::string& key, int64_t version) {
    std::vector<std::pair<std::string, int64_t>> compares = matching;
    bool found = false;
    for (auto& [k, v] : compares) {
      if (k == key) {
        v = version;
        found = true;
      }
    }
    if (!found) compares.emplace_back(key, version);
    return compares;
  };
  const int64_t stale = stored.at("c/0030");
  Put("c/0030", "rewritten");
  stored["c/0030"] = VersionOf("c/0030");
  matching = changed("c/0030", stored["c/0030"]);

  const std::vector<std::pair<std::string, std::vector<std::pair<std::string, int64_t>>>>
      mismatches = {
          {"a stale version among neighbours", changed("c/0030", stale)},
          {"the first key stale", changed("c/0000", stored.at("c/0000") + 1000)},
          {"the last key stale", changed("c/0199", stored.at("c/0199") - 1)},
          {"an absent key between neighbours expected present", changed("c/0010x", 5)},
          {"an absent key in the gap expected present", changed("c/0100x", 5)},
          {"a key past the uncompared ones stale", changed("c/0140", stored.at("c/0140") + 1)},
          {"a key past every key expected present", changed("z/absent", 1)},
          {"a present key expected absent", changed("c/0150", 0)},
      };
  for (const auto& [what, compares] : mismatches) {
    auto result = commit(compares);
    EXPECT_TRUE(IsTxnConflict(result.status())) << what << ": " << result.status();
    EXPECT_EQ(VersionOf("w/result"), 0) << what;
  }
  auto result = commit(matching);
  ASSERT_TRUE(result.ok()) << result.status();
  EXPECT_EQ(VersionOf("w/result"), *result);
}

INSTANTIATE_TEST_SUITE_P(Backends, KvStoreTest,
                         ::testing::Values(RocksDbBackend(), MemoryBackend()), BackendName);
INSTANTIATE_TEST_SUITE_P(Persistent, RocksDbKvStoreTest, ::testing::Values(RocksDbBackend()),
                         BackendName);

TEST(TxnTest, SortedComparesMergesBothFormsByKey) {
  Txn txn;
  txn.ExpectVersionOnce("k/3", 3);
  txn.ExpectVersion("k/2", 2);
  txn.ExpectVersionOnce("k/1", 1);
  txn.ExpectVersion("k/2", 20);  // the collapsing form keeps the first
  txn.ExpectVersion("k/5", 5);
  txn.ExpectVersionOnce("k/4", 4);
  EXPECT_EQ(txn.compare_count(), 5u);
  std::vector<std::pair<std::string, int64_t>> sorted;
  for (const Compare& compare : txn.SortedCompares()) {
    sorted.emplace_back(std::string(compare.key), compare.version);
  }
  const std::vector<std::pair<std::string, int64_t>> expected = {
      {"k/1", 1}, {"k/2", 2}, {"k/3", 3}, {"k/4", 4}, {"k/5", 5}};
  EXPECT_EQ(sorted, expected);
  EXPECT_FALSE(txn.empty());
  EXPECT_TRUE(Txn().empty());
}

TEST(KeysTest, InodeKeysSortNumerically) {
  EXPECT_LT(InodeKey(2), InodeKey(10));
  EXPECT_LT(InodeKey(255), InodeKey(256));
  EXPECT_LT(InodeKey(0xffffffff), InodeKey(0x100000000ull));
  EXPECT_EQ(InoFromKey(InodeKey(12345)), 12345u);
  EXPECT_EQ(InoFromKey(OrphanKey(77)), 77u);
  EXPECT_EQ(InoFromKey("x/12345678"), std::nullopt);
}

TEST(KeysTest, DentriesOfOneDirectoryShareAPrefixAndSortByName) {
  const std::string prefix = DentryPrefix(300);
  EXPECT_EQ(DentryKey(300, "b").rfind(prefix, 0), 0u);
  EXPECT_LT(DentryKey(300, "a"), DentryKey(300, "b"));
  // A directory's entries never interleave with another directory's.
  EXPECT_LT(DentryKey(300, "\xff\xff"), DentryKey(301, ""));
  EXPECT_LT(ServerKey(2), ServerKey(10));
  EXPECT_EQ(DecodeU32(EncodeU32(0xdeadbeef)), 0xdeadbeefu);
  EXPECT_EQ(DecodeU64("short"), std::nullopt);
}

}  // namespace
}  // namespace ckptfs::meta
