// EtcdKvStore against a real 3-member etcd cluster on 127.0.0.1: the KvStore
// contract (versions, scans, compares, atomicity), etcd's limits as ckptfs
// configures them, and failover when the leader is killed mid-stream — with
// no commit lost or applied twice. Skipped when etcd-server is not installed.
#include "server/meta/etcd/etcd_kv_store.h"
#include "server/meta/etcd/etcd_duty_lock.h"
#include "server/meta/etcd/etcd_server_lock.h"

#include <atomic>
#include <cstdio>
#include <fstream>
#include <functional>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "gtest/gtest.h"
#include "tests/etcd/etcd_cluster.h"
#include "tests/integration/local_cluster.h"

namespace ckptfs::meta {
namespace {

using ::ckptfs::testing::EtcdBinary;
using ::ckptfs::testing::EtcdCluster;

class EtcdKvStoreTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    if (EtcdBinary().empty()) return;
    auto cluster = EtcdCluster::Start(3);
    ASSERT_TRUE(cluster.ok()) << cluster.status();
    cluster_ = cluster->release();
  }
  static void TearDownTestSuite() {
    delete cluster_;
    cluster_ = nullptr;
  }
  void SetUp() override {
    if (EtcdBinary().empty()) GTEST_SKIP() << "etcd-server is not installed";
    ASSERT_NE(cluster_, nullptr);
    // Each test its own key prefix: tests share the cluster, not the keys.
    store_ = OpenStore(absl::StrCat(
        "/test/", ::testing::UnitTest::GetInstance()->current_test_info()->name(), "/"));
  }

  static std::shared_ptr<EtcdClient> Client() {
    EtcdClient::Options options;
    auto endpoints = EtcdClient::ParseEndpoints(cluster_->endpoints());
    EXPECT_TRUE(endpoints.ok());
    options.endpoints = *endpoints;
    return std::make_shared<EtcdClient>(options);
  }

  std::unique_ptr<EtcdKvStore> OpenStore(const std::string& prefix) {
    EtcdKvStore::Options options;
    options.key_prefix = prefix;
    auto store = EtcdKvStore::Open(Client(), options);
    EXPECT_TRUE(store.ok()) << store.status();
    return store.ok() ? *std::move(store) : nullptr;
  }

  int64_t Put(const std::string& key, const std::string& value) {
    Txn txn;
    txn.Put(key, value);
    absl::StatusOr<int64_t> revision = store_->Commit(txn);
    EXPECT_TRUE(revision.ok()) << revision.status();
    return revision.ok() ? *revision : 0;
  }

  static EtcdCluster* cluster_;
  std::unique_ptr<EtcdKvStore> store_;
};

EtcdCluster* EtcdKvStoreTest::cluster_ = nullptr;

TEST(EtcdEndpoints, Parse) {
  auto endpoints = EtcdClient::ParseEndpoints("127.0.0.1:2379, http://10.0.0.2:2379");
  ASSERT_TRUE(endpoints.ok());
  EXPECT_EQ(*endpoints, (std::vector<std::string>{"127.0.0.1:2379", "10.0.0.2:2379"}));
  EXPECT_FALSE(EtcdClient::ParseEndpoints("").ok());
  EXPECT_FALSE(EtcdClient::ParseEndpoints("127.0.0.1").ok());
  EXPECT_FALSE(EtcdClient::ParseEndpoints("a:0").ok());
  EXPECT_FALSE(EtcdClient::ParseEndpoints("a:99999").ok());
}

TEST(EtcdTls, TheFlagsGoTogetherAndNameWhatIsWrong) {
  auto none = EtcdClient::LoadTls("", "", "");
  ASSERT_TRUE(none.ok());
  EXPECT_FALSE(none->has_value());
  const std::string dir = ::testing::TempDir();
  const std::string ca = dir + "/etcd-tls-test-ca.pem";
  const std::string cert = dir + "/etcd-tls-test-cert.pem";
  const std::string key = dir + "/etcd-tls-test-key.pem";
  for (const auto& [path, text] : {std::pair{ca, "CA"}, {cert, "CERT"}, {key, "KEY"}}) {
    std::ofstream(path) << text;
  }
  auto full = EtcdClient::LoadTls(ca, cert, key);
  ASSERT_TRUE(full.ok()) << full.status();
  ASSERT_TRUE(full->has_value());
  EXPECT_EQ((*full)->ca_pem, "CA");
  EXPECT_EQ((*full)->cert_pem, "CERT");
  EXPECT_EQ((*full)->key_pem, "KEY");
  auto ca_only = EtcdClient::LoadTls(ca, "", "");
  ASSERT_TRUE(ca_only.ok());
  EXPECT_TRUE((*ca_only)->cert_pem.empty());
  auto no_key = EtcdClient::LoadTls(ca, cert, "");
  EXPECT_FALSE(no_key.ok());
  EXPECT_TRUE(absl::StrContains(no_key.status().message(), "--etcd_key_file")) << no_key.status();
  auto no_ca = EtcdClient::LoadTls("", cert, key);
  EXPECT_FALSE(no_ca.ok());
  EXPECT_TRUE(absl::StrContains(no_ca.status().message(), "--etcd_ca_file")) << no_ca.status();
  auto missing = EtcdClient::LoadTls(dir + "/etcd-tls-test-nothing.pem", "", "");
  EXPECT_FALSE(missing.ok());
  EXPECT_TRUE(absl::StrContains(missing.status().message(), "etcd-tls-test-nothing.pem"))
      << missing.status();
  for (const std::string& path : {ca, cert, key}) std::remove(path.c_str());
}

TEST(EtcdOpen, NoMemberAnswersIsAClearError) {
  auto port = ckptfs::testing::PickFreePort();
  ASSERT_TRUE(port.ok());
  EtcdClient::Options options;
  options.endpoints = {absl::StrCat("127.0.0.1:", *port)};
  options.call_timeout = absl::Seconds(2);
  options.attempt_timeout = absl::Milliseconds(500);
  auto client = std::make_shared<EtcdClient>(options);
  auto store = EtcdKvStore::Open(client, {});
  ASSERT_FALSE(store.ok());
  EXPECT_NE(store.status().message().find(options.endpoints[0]), std::string::npos)
      << store.status();
  EXPECT_EQ(EtcdKvStore::Open(client, {""}).status().code(), absl::StatusCode::kInvalidArgument);
}

TEST_F(EtcdKvStoreTest, VersionsAreCommitRevisions) {
  EXPECT_FALSE(store_->Get("a").value().has_value());
  Txn txn;
  txn.Put("a", "1");
  txn.Put("b", "2");
  absl::StatusOr<int64_t> revision = store_->Commit(txn);
  ASSERT_TRUE(revision.ok()) << revision.status();
  auto a = store_->Get("a");
  auto b = store_->Get("b");
  ASSERT_TRUE(a.ok() && b.ok());
  ASSERT_TRUE(a->has_value() && b->has_value());
  EXPECT_EQ((*a)->value, "1");
  EXPECT_EQ((*a)->version, *revision);
  EXPECT_EQ((*b)->version, *revision);
  EXPECT_GT(Put("a", "3"), *revision);
}

TEST_F(EtcdKvStoreTest, ScanIsOrderedBoundedAndPrefixed) {
  for (const char* key : {"d/3", "d/1", "d/2", "e/1", "d"}) Put(key, key);
  auto all = store_->Scan("d/", "", 100);
  ASSERT_TRUE(all.ok()) << all.status();
  ASSERT_EQ(all->size(), 3u);
  EXPECT_EQ((*all)[0].key, "d/1");
  EXPECT_EQ((*all)[2].key, "d/3");
  EXPECT_EQ((*all)[1].value, "d/2");
  auto after = store_->Scan("d/", "1", 1);
  ASSERT_TRUE(after.ok());
  ASSERT_EQ(after->size(), 1u);
  EXPECT_EQ((*after)[0].key, "d/2");
  // Binary keys (inode numbers are big-endian bytes) scan in byte order.
  Put(std::string("x/\x01\xff", 4), "lo");
  Put(std::string("x/\x02\x00", 4), "hi");
  auto binary = store_->Scan("x/", "", 10);
  ASSERT_TRUE(binary.ok());
  ASSERT_EQ(binary->size(), 2u);
  EXPECT_EQ((*binary)[0].value, "lo");
  // Another prefix sees none of it.
  std::unique_ptr<EtcdKvStore> other = OpenStore("/test/other-cluster/");
  ASSERT_NE(other, nullptr);
  EXPECT_FALSE(other->Get("d/1").value().has_value());
  EXPECT_TRUE(other->Scan("", "", 10).value().empty());
}

// The count-only Range the commit barrier counts arrivals with.
TEST_F(EtcdKvStoreTest, CountPrefixCountsTheKeysOfOnePrefix) {
  for (const char* key : {"a/1", "a/2", "a/3", "b/1", "a"}) Put(key, key);
  EXPECT_EQ(store_->CountPrefix("a/").value(), 3u);
  EXPECT_EQ(store_->CountPrefix("b/").value(), 1u);
  EXPECT_EQ(store_->CountPrefix("c/").value(), 0u);
  std::unique_ptr<EtcdKvStore> other = OpenStore("/test/other-cluster/");
  ASSERT_NE(other, nullptr);
  EXPECT_EQ(other->CountPrefix("a/").value(), 0u);
}

// Servers that all serve (--etcd_shared): the duties run on one at a time,
// and move to the other when the holder stops.
TEST_F(EtcdKvStoreTest, DutyLockRunsTheDutiesOnOneServerAtATime) {
  EtcdServerLock::Options options;
  options.key_prefix = "/test/duties/";
  // Room for a loaded machine: a holder that misses its renewals for a TTL
  // loses the lock (and may take it again).
  options.ttl = absl::Seconds(10);
  std::atomic<int> running{0}, started{0};
  auto duties = [&](const std::string& holder) {
    EtcdServerLock::Options mine = options;
    mine.holder = holder;
    return std::make_unique<EtcdDutyLock>(
        Client(), mine,
        [&] {
          running.fetch_add(1);
          started.fetch_add(1);
        },
        [&] { running.fetch_sub(1); });
  };
  auto first = duties("first");
  auto wait_for = [](const std::function<bool()>& done) {
    const absl::Time deadline = absl::Now() + absl::Seconds(30);  // a bound on a hang
    while (!done() && absl::Now() < deadline) absl::SleepFor(absl::Milliseconds(20));
    return done();
  };
  ASSERT_TRUE(wait_for([&] { return first->held(); }));
  auto second = duties("second");
  absl::SleepFor(absl::Seconds(1));  // time to take them too, if it wrongly could
  EXPECT_FALSE(second->held());
  EXPECT_EQ(running.load(), 1);
  first.reset();  // stops its duties and revokes its lease
  ASSERT_TRUE(wait_for([&] { return second->held(); }));
  EXPECT_EQ(running.load(), 1);
  EXPECT_GE(started.load(), 2);  // more if a holder lost the lock and took it again
  second.reset();
  EXPECT_EQ(running.load(), 0);
}

TEST_F(EtcdKvStoreTest, FailedCompareWritesNothing) {
  const int64_t v1 = Put("k", "one");
  Txn absent;  // "k must not exist": it does
  absent.ExpectVersion("k", 0);
  absent.Put("k", "two");
  absent.Put("side", "effect");
  EXPECT_TRUE(IsTxnConflict(store_->Commit(absent).status()));
  Txn stale;
  stale.ExpectVersion("k", v1 - 1);
  stale.Delete("k");
  EXPECT_TRUE(IsTxnConflict(store_->Commit(stale).status()));
  EXPECT_EQ(store_->Get("k").value()->value, "one");
  EXPECT_FALSE(store_->Get("side").value().has_value());

  Txn current;
  current.ExpectVersion("k", v1);
  current.ExpectVersion("missing", 0);
  current.Delete("k");
  ASSERT_TRUE(store_->Commit(current).ok());
  EXPECT_FALSE(store_->Get("k").value().has_value());
  // A read-only txn checks its compares and returns the current revision.
  Txn check;
  check.ExpectVersion("k", 0);
  EXPECT_TRUE(store_->Commit(check).ok());
}

// A checkpoint's commit compares every file: thousands of keys in one Txn.
TEST_F(EtcdKvStoreTest, LargeTransactions) {
  Txn big;
  for (int i = 0; i < 5000; ++i) big.ExpectVersion(absl::StrCat("f/", i), 0);
  for (int i = 0; i < 1000; ++i) big.Put(absl::StrCat("f/", i), std::string(100, 'x'));
  absl::StatusOr<int64_t> revision = store_->Commit(big);
  ASSERT_TRUE(revision.ok()) << revision.status();
  auto scan = store_->Scan("f/", "", 5000);
  ASSERT_TRUE(scan.ok());
  EXPECT_EQ(scan->size(), 1000u);
}

// Read-modify-write increments from several threads: every increment lands
// exactly once, also while the etcd leader is killed and another elected.
void Increment(KvStore& store, const std::string& key, std::atomic<int>* failures) {
  for (int attempt = 0; attempt < 1000; ++attempt) {
    absl::StatusOr<std::optional<VersionedValue>> now = store.Get(key);
    if (!now.ok()) {
      failures->fetch_add(1);
      return;
    }
    int64_t count = 0;
    if (now->has_value()) {
      ASSERT_TRUE(absl::SimpleAtoi((*now)->value, &count));
    }
    Txn txn;
    txn.ExpectVersion(key, now->has_value() ? (*now)->version : 0);
    txn.Put(key, absl::StrCat(count + 1));
    absl::StatusOr<int64_t> revision = store.Commit(txn);
    if (revision.ok()) return;
    if (!IsTxnConflict(revision.status())) {
      ADD_FAILURE() << revision.status();
      failures->fetch_add(1);
      return;
    }
  }
  failures->fetch_add(1);
}

int64_t Count(KvStore& store, const std::string& key) {
  auto value = store.Get(key);
  int64_t count = -1;
  if (value.ok() && value->has_value()) {
    EXPECT_TRUE(absl::SimpleAtoi((*value)->value, &count));
  }
  return count;
}

TEST_F(EtcdKvStoreTest, ConcurrentIncrementsAreAtomic) {
  std::atomic<int> failures{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&] {
      for (int i = 0; i < 25; ++i) Increment(*store_, "counter", &failures);
    });
  }
  for (std::thread& t : threads) t.join();
  EXPECT_EQ(failures.load(), 0);
  EXPECT_EQ(Count(*store_, "counter"), 100);
}

TEST_F(EtcdKvStoreTest, LeaderKilledMidStreamLosesNothing) {
  absl::StatusOr<int> leader = cluster_->Leader();
  ASSERT_TRUE(leader.ok()) << leader.status();
  std::atomic<int> failures{0};
  std::atomic<int> done{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&] {
      for (int i = 0; i < 40; ++i) {
        Increment(*store_, "counter", &failures);
        done.fetch_add(1);
      }
    });
  }
  while (done.load() < 40) absl::SleepFor(absl::Milliseconds(5));
  ASSERT_TRUE(cluster_->Kill(*leader).ok());
  for (std::thread& t : threads) t.join();
  EXPECT_EQ(failures.load(), 0);
  EXPECT_EQ(Count(*store_, "counter"), 160) << cluster_->DescribeLogs();
  absl::StatusOr<int> next = cluster_->Leader();
  ASSERT_TRUE(next.ok()) << next.status();
  EXPECT_NE(*next, *leader);
  ASSERT_TRUE(cluster_->Restart(*leader).ok()) << cluster_->DescribeLogs();
}

// One server per prefix: a second waits as a standby, and takes over as soon
// as the first releases; the holder keeps the lock through a leader change.
TEST_F(EtcdKvStoreTest, ServerLockKeepsASecondServerWaiting) {
  std::atomic<int> lost{0};
  EtcdServerLock::Options options;
  options.key_prefix = "/test/lock/";
  options.holder = "first";
  options.ttl = absl::Seconds(10);
  auto first = EtcdServerLock::Acquire(Client(), options, [&] { lost.fetch_add(1); });
  ASSERT_TRUE(first.ok()) << first.status();

  options.holder = "second";
  options.wait = absl::Seconds(1);
  auto refused = EtcdServerLock::Acquire(Client(), options, [&] { lost.fetch_add(1); });
  ASSERT_FALSE(refused.ok());
  EXPECT_NE(refused.status().message().find("first"), std::string::npos) << refused.status();

  // The holder renews through a leader change (every ttl/3 = 3.3 s; the
  // election takes about a second): after the new leader is in place and two
  // renewal rounds have passed, the lock is still held.
  absl::StatusOr<int> leader = cluster_->Leader();
  ASSERT_TRUE(leader.ok());
  ASSERT_TRUE(cluster_->Kill(*leader).ok());
  absl::StatusOr<int> next = cluster_->Leader(absl::Seconds(30));
  ASSERT_TRUE(next.ok()) << next.status();
  absl::SleepFor(absl::Seconds(7));
  EXPECT_EQ(lost.load(), 0);
  options.wait = absl::Milliseconds(500);
  EXPECT_FALSE(EtcdServerLock::Acquire(Client(), options, [] {}).ok());
  ASSERT_TRUE(cluster_->Restart(*leader).ok()) << cluster_->DescribeLogs();

  // Released: the standby gets it at once.
  first->reset();
  options.wait = absl::Seconds(5);
  auto second = EtcdServerLock::Acquire(Client(), options, [&] { lost.fetch_add(1); });
  EXPECT_TRUE(second.ok()) << second.status();
  EXPECT_EQ(lost.load(), 0);
}

// A store fenced by a server lock writes only while the lock is held: once
// the lease is gone (revoked here; expired for a paused server), a write
// fails with EIO and the lost callback runs, and nothing is written.
TEST_F(EtcdKvStoreTest, FencedWritesStopWhenTheLockIsLost) {
  EtcdServerLock::Options options;
  options.key_prefix = "/test/fence/";
  options.holder = "fenced";
  auto lock = EtcdServerLock::Acquire(Client(), options, [] {});
  ASSERT_TRUE(lock.ok()) << lock.status();
  std::atomic<int> lost{0};
  store_->SetFence(EtcdServerLock::LockKey(options.key_prefix), (*lock)->lease(),
                   [&] { lost.fetch_add(1); });
  EXPECT_GT(Put("k", "held"), 0);
  lock->reset();  // revokes the lease: the lock key is gone
  Txn txn;
  txn.Put("k", "stale");
  absl::StatusOr<int64_t> revision = store_->Commit(txn);
  EXPECT_FALSE(revision.ok());
  EXPECT_FALSE(IsTxnConflict(revision.status())) << revision.status();
  EXPECT_EQ(lost.load(), 1);
  EXPECT_EQ(store_->Get("k").value()->value, "held");
}

}  // namespace
}  // namespace ckptfs::meta
