// MemoryKvStore: a KvStore held in memory, with the same semantics as the
// persistent backends (global revision, per-key versions, atomic compare-
// and-write). For tests and tools that need a namespace without a data dir;
// it is also the reference the backend contract tests hold RocksDB (and
// later etcd) to. Contents die with the object.
//
// Thread-safety: thread-safe; one mutex serializes everything.
#ifndef CKPTFS_SERVER_META_MEMORY_KV_STORE_H_
#define CKPTFS_SERVER_META_MEMORY_KV_STORE_H_

#include <map>
#include <string>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "server/meta/kv_store.h"

namespace ckptfs::meta {

class MemoryKvStore : public KvStore {
 public:
  MemoryKvStore() = default;
  MemoryKvStore(const MemoryKvStore&) = delete;
  MemoryKvStore& operator=(const MemoryKvStore&) = delete;

  absl::StatusOr<std::optional<VersionedValue>> Get(absl::string_view key) override;
  absl::StatusOr<std::vector<KeyValue>> Scan(absl::string_view prefix,
                                             absl::string_view start_after, size_t limit) override;
  absl::StatusOr<int64_t> Commit(const Txn& txn) override;

 private:
  absl::Mutex mu_;
  std::map<std::string, VersionedValue, std::less<>> data_ ABSL_GUARDED_BY(mu_);
  int64_t revision_ ABSL_GUARDED_BY(mu_) = 0;
};

}  // namespace ckptfs::meta

#endif  // CKPTFS_SERVER_META_MEMORY_KV_STORE_H_
