// Helpers for the metadata-service tests: a temporary directory removed on
// destruction, errno assertions, and a fixture that assembles a RocksDB
// store, membership and namespace on a manual clock.
//
// Thread-safety: test-only; the fixture's members are thread-safe as the
// classes they wrap.
#ifndef CKPTFS_TESTS_META_META_TEST_UTIL_H_
#define CKPTFS_TESTS_META_META_TEST_UTIL_H_

#include <stdlib.h>

#include <cstdlib>

#include <filesystem>
#include <memory>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "common/errno_status.h"
#include "gtest/gtest.h"
#include "server/meta/clock.h"
#include "server/meta/etcd/etcd_client.h"
#include "server/meta/etcd/etcd_kv_store.h"
#include "server/meta/membership.h"
#include "server/meta/namespace.h"
#include "server/meta/rocksdb_kv_store.h"

namespace ckptfs::meta {

class TempDir {
 public:
  TempDir() {
    std::string pattern = (std::filesystem::temp_directory_path() / "ckptfs-meta-test-XXXXXX");
    char* made = ::mkdtemp(pattern.data());
    if (made != nullptr) path_ = made;
  }
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;
  ~TempDir() {
    std::error_code ignored;
    if (!path_.empty()) std::filesystem::remove_all(path_, ignored);
  }
  const std::string& path() const { return path_; }

 private:
  std::string path_;
};

inline int ErrnoOf(const absl::Status& status) { return ErrnoFromStatus(status); }
template <typename T>
int ErrnoOf(const absl::StatusOr<T>& result) {
  return ErrnoFromStatus(result.status());
}

// EXPECT_ERRNO(ns.Lookup(1, "x"), ENOENT)
#define EXPECT_ERRNO(expr, err) EXPECT_EQ(::ckptfs::meta::ErrnoOf(expr), (err)) << #expr
#define ASSERT_OK(expr)                            \
  do {                                             \
    const auto& _st = (expr);                      \
    ASSERT_TRUE(_st.ok()) << #expr << ": " << _st; \
  } while (0)
#define EXPECT_OK(expr)                            \
  do {                                             \
    const auto& _st = (expr);                      \
    EXPECT_TRUE(_st.ok()) << #expr << ": " << _st; \
  } while (0)

inline std::ostream& operator<<(std::ostream& os, const absl::Status& status) {
  return os << status.ToString();
}
template <typename T>
std::ostream& operator<<(std::ostream& os, const absl::StatusOr<T>& result) {
  return os << result.status().ToString();
}

// A store, membership and namespace over a temporary directory, with a
// manual clock. Reopen() closes and reopens everything on the same data.
// The store is RocksDB, or, when CKPTFS_TEST_ETCD_ENDPOINTS names etcd
// members (tests/etcd runs these suites so), an EtcdKvStore under a key
// prefix of its own per test.
class NamespaceFixture : public ::testing::Test {
 protected:
  void SetUp() override { Open(); }

  void Open() {
    const char* etcd = std::getenv("CKPTFS_TEST_ETCD_ENDPOINTS");
    if (etcd != nullptr && *etcd != '\0') {
      OpenEtcd(etcd);
    } else {
      auto store = RocksDbKvStore::Open(dir_.path() + "/db", RocksDbKvStore::Options{});
      ASSERT_TRUE(store.ok()) << store.status();
      store_ = *std::move(store);
    }
    membership_ =
        std::make_unique<Membership>(store_.get(), &clock_, Membership::Options{absl::Seconds(10)});
    ns_ = std::make_unique<Namespace>(store_.get(), membership_.get(), &clock_, options_);
    ASSERT_OK(ns_->Init());
  }

  void Reopen() {
    ns_.reset();
    membership_.reset();
    store_.reset();
    Open();
  }

  void OpenEtcd(const char* endpoints) {
    if (etcd_prefix_.empty()) {
      const auto* test = ::testing::UnitTest::GetInstance()->current_test_info();
      etcd_prefix_ = absl::StrCat("/meta-test/", absl::ToUnixNanos(absl::Now()), "/",
                                  test->test_suite_name(), ".", test->name(), "/");
    }
    EtcdClient::Options client_options;
    auto parsed = EtcdClient::ParseEndpoints(endpoints);
    ASSERT_TRUE(parsed.ok()) << parsed.status();
    client_options.endpoints = *parsed;
    auto store = EtcdKvStore::Open(std::make_shared<EtcdClient>(client_options),
                                   EtcdKvStore::Options{etcd_prefix_});
    ASSERT_TRUE(store.ok()) << store.status();
    store_ = *std::move(store);
  }

  // Registers a storage server and returns its id.
  uint32_t AddServer(const std::string& uuid, uint64_t capacity = 1000, uint64_t used = 100,
                     const std::string& address = "127.0.0.1:1") {
    RegisterServerRequest request;
    request.set_address(address);
    request.set_uuid(uuid);
    request.set_capacity_bytes(capacity);
    request.set_used_bytes(used);
    auto id = membership_->Register(request);
    EXPECT_TRUE(id.ok()) << id.status();
    return id.ok() ? *id : 0;
  }

  absl::StatusOr<Attr> CreateFile(uint64_t parent, const std::string& name, uint32_t mode = 0644) {
    CreateRequest request;
    request.set_parent(parent);
    request.set_name(name);
    request.set_mode(mode);
    request.set_uid(1000);
    request.set_gid(1000);
    auto reply = ns_->Create(request);
    if (!reply.ok()) return reply.status();
    return reply->attr();
  }

  absl::StatusOr<Attr> MakeDir(uint64_t parent, const std::string& name, uint32_t mode = 0755) {
    MkdirRequest request;
    request.set_parent(parent);
    request.set_name(name);
    request.set_mode(mode);
    return ns_->Mkdir(request);
  }

  absl::Status Rename(uint64_t parent, const std::string& name, uint64_t new_parent,
                      const std::string& new_name, bool no_replace = false) {
    RenameRequest request;
    request.set_parent(parent);
    request.set_name(name);
    request.set_new_parent(new_parent);
    request.set_new_name(new_name);
    request.set_no_replace(no_replace);
    return ns_->Rename(request);
  }

  TempDir dir_;
  ManualClock clock_;
  Namespace::Options options_;
  std::string etcd_prefix_;  // with etcd: this test's keys, kept across Reopen
  std::unique_ptr<KvStore> store_;
  std::unique_ptr<Membership> membership_;
  std::unique_ptr<Namespace> ns_;
};

}  // namespace ckptfs::meta

#endif  // CKPTFS_TESTS_META_META_TEST_UTIL_H_
