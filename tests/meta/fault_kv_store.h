// FaultKvStore: a KvStore wrapper for tests that injects conflicts and I/O
// errors into commits and runs a hook just before a commit — a sync point
// that lets a test make another operation land between an operation's reads
// and its commit.
//
// Thread-safety: thread-safe; configure before concurrent use or from the
// hook's own thread.
#ifndef CKPTFS_TESTS_META_FAULT_KV_STORE_H_
#define CKPTFS_TESTS_META_FAULT_KV_STORE_H_

#include <functional>
#include <utility>

#include "absl/synchronization/mutex.h"
#include "server/meta/kv_store.h"

namespace ckptfs::meta {

class FaultKvStore : public KvStore {
 public:
  explicit FaultKvStore(KvStore* base) : base_(base) {}

  // The next `n` commits fail with a conflict without touching the store.
  void InjectConflicts(int n) {
    absl::MutexLock lock(&mu_);
    conflicts_ = n;
  }
  // The next commit fails with `status` without touching the store.
  void InjectError(absl::Status status) {
    absl::MutexLock lock(&mu_);
    error_ = std::move(status);
  }
  // The next `n` commits fail with `status` without touching the store.
  void InjectErrors(int n, absl::Status status) {
    absl::MutexLock lock(&mu_);
    errors_left_ = n;
    repeated_error_ = std::move(status);
  }
  // Runs `hook` once, just before the next commit is applied.
  void BeforeNextCommit(std::function<void()> hook) {
    absl::MutexLock lock(&mu_);
    hook_ = std::move(hook);
  }
  int commits() {
    absl::MutexLock lock(&mu_);
    return commits_;
  }

  absl::StatusOr<std::optional<VersionedValue>> Get(absl::string_view key) override {
    return base_->Get(key);
  }
  absl::StatusOr<std::vector<KeyValue>> Scan(absl::string_view prefix,
                                             absl::string_view start_after, size_t limit) override {
    return base_->Scan(prefix, start_after, limit);
  }
  absl::StatusOr<int64_t> Commit(const Txn& txn) override {
    std::function<void()> hook;
    {
      absl::MutexLock lock(&mu_);
      ++commits_;
      if (conflicts_ > 0) {
        --conflicts_;
        return TxnConflictError("injected");
      }
      if (!error_.ok()) return std::exchange(error_, absl::OkStatus());
      if (errors_left_ > 0) {
        --errors_left_;
        return repeated_error_;
      }
      hook = std::exchange(hook_, nullptr);
    }
    if (hook) hook();
    return base_->Commit(txn);
  }

 private:
  KvStore* const base_;
  absl::Mutex mu_;
  int conflicts_ ABSL_GUARDED_BY(mu_) = 0;
  absl::Status error_ ABSL_GUARDED_BY(mu_);
  int errors_left_ ABSL_GUARDED_BY(mu_) = 0;
  absl::Status repeated_error_ ABSL_GUARDED_BY(mu_);
  std::function<void()> hook_ ABSL_GUARDED_BY(mu_);
  int commits_ ABSL_GUARDED_BY(mu_) = 0;
};

}  // namespace ckptfs::meta

#endif  // CKPTFS_TESTS_META_FAULT_KV_STORE_H_
