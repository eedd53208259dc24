// RocksDbKvStore: the embedded, default KvStore backend, one RocksDB under
// the metadata service's data directory.
//
// Each value is stored as an 8-byte big-endian version followed by the value
// bytes. The global revision lives in its own column family and is written
// in the same WriteBatch as the commit it counts, so a crash never leaves a
// commit without its revision or a revision without its commit.
//
// Durability: the write-ahead log is always on. By default a commit is not
// fsync'ed: RocksDB has write()n the WAL record to the OS before Commit
// returns, so the page cache holds it and it survives kill -9 of the service
// (only a kernel crash or power loss can drop the last commits). Options::sync
// fsyncs the WAL on every commit for that stronger guarantee.
//
// A commit's compares are checked with a lookup each, or, for many keys,
// with one iterator walking them in key order (Next between keys close
// together, as a checkpoint's files' inodes are).
//
// Thread-safety: thread-safe. Commits are serialized by a mutex so that the
// compare step and the write are one atomic step; Get and Scan run
// concurrently with everything (RocksDB reads see whole WriteBatches).
#ifndef CKPTFS_SERVER_META_ROCKSDB_KV_STORE_H_
#define CKPTFS_SERVER_META_ROCKSDB_KV_STORE_H_

#include <memory>
#include <string>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "server/meta/kv_store.h"

namespace rocksdb {
class DB;
class ColumnFamilyHandle;
}  // namespace rocksdb

namespace ckptfs::meta {

class RocksDbKvStore : public KvStore {
 public:
  struct Options {
    // fsync the WAL on every commit (see the file comment).
    bool sync = false;
  };

  // Opens (creating if missing) the store in directory `path`. A directory
  // another process has open fails with EBUSY and a message saying the data
  // dir is in use; other failures carry RocksDB's message.
  static absl::StatusOr<std::unique_ptr<RocksDbKvStore>> Open(const std::string& path,
                                                              const Options& options);

  RocksDbKvStore(const RocksDbKvStore&) = delete;
  RocksDbKvStore& operator=(const RocksDbKvStore&) = delete;
  // Closes the database (flushing nothing extra: the WAL already has it all).
  ~RocksDbKvStore() override;

  absl::StatusOr<std::optional<VersionedValue>> Get(absl::string_view key) override;
  absl::StatusOr<std::vector<KeyValue>> Scan(absl::string_view prefix,
                                             absl::string_view start_after, size_t limit) override;
  absl::StatusOr<int64_t> Commit(const Txn& txn) override;

 private:
  RocksDbKvStore(std::string path, const Options& options);
  // OK if every compare of `txn` holds, else TxnConflictError (or EIO).
  absl::Status CheckCompares(const Txn& txn) ABSL_EXCLUSIVE_LOCKS_REQUIRED(commit_mu_);

  const std::string path_;
  const Options options_;
  std::unique_ptr<rocksdb::DB> db_;
  rocksdb::ColumnFamilyHandle* data_cf_ = nullptr;      // owned by db_
  rocksdb::ColumnFamilyHandle* revision_cf_ = nullptr;  // owned by db_

  absl::Mutex commit_mu_;  // serializes Commit; a leaf lock
  int64_t revision_ ABSL_GUARDED_BY(commit_mu_) = 0;
};

}  // namespace ckptfs::meta

#endif  // CKPTFS_SERVER_META_ROCKSDB_KV_STORE_H_
