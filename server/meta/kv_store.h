// KvStore: the narrow transactional key-value interface every piece of
// metadata-service state lives behind.
//
// It is shaped after etcd v3 so that an etcd backend maps onto it 1:1:
//   Get    -> Range(key)                       (value + mod_revision)
//   Scan   -> Range(prefix+start_after+"\0", prefix_end, limit)
//   Commit -> Txn(compares on mod_revision, then puts and deletes)
// Every successful Commit advances one global revision counter; each key it
// writes gets that revision as its version (etcd's mod_revision). Version 0
// means "absent", so a compare against 0 asserts that a key does not exist.
//
// Optimistic concurrency: a caller reads what it needs, then commits its
// writes together with compares on the versions it read; a Commit whose
// compares fail changes nothing and returns an Aborted status (see
// IsTxnConflict), and the caller re-reads and retries (server/meta/meta_txn.h).
//
// Thread-safety: implementations are thread-safe; Get, Scan and Commit may be
// called concurrently from any thread.
#ifndef CKPTFS_SERVER_META_KV_STORE_H_
#define CKPTFS_SERVER_META_KV_STORE_H_

#include <cstddef>
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace ckptfs::meta {

// A stored value and the revision of the commit that last wrote it (> 0).
struct VersionedValue {
  std::string value;
  int64_t version = 0;
};

struct KeyValue {
  std::string key;
  std::string value;
  int64_t version = 0;
};

// One compare of a Txn: `key` must have version `version` (0: absent).
struct Compare {
  absl::string_view key;  // borrowed from the Txn
  int64_t version = 0;
};

// A set of compares and writes applied atomically, or not at all.
// A key is written at most once per transaction: a later Put or Delete of the
// same key replaces the earlier one (etcd rejects duplicate keys in a txn, so
// the builder collapses them here). Not thread-safe; build on one thread.
class Txn {
 public:
  // The commit succeeds only if `key` currently has version `version`
  // (0: the key must be absent). Comparing one key twice keeps the first.
  void ExpectVersion(absl::string_view key, int64_t version);
  // As ExpectVersion, for a caller that compares each key once (MetaTxn
  // compares what it reads, once per key): appended as given, without the
  // bookkeeping that collapses repeats, so that a transaction over thousands
  // of keys costs no per-key tree insert. REQUIRES: `key` is compared by
  // neither form already (if it is, the commit checks both compares).
  void ExpectVersionOnce(absl::string_view key, int64_t version);
  void Put(absl::string_view key, absl::string_view value);
  void Delete(absl::string_view key);
  // The commit must reach stable storage before Commit returns (fsync of the
  // backend's log), whatever the backend does by default. Backends that are
  // always durable (etcd) have nothing more to do.
  void RequireDurable() { durable_ = true; }
  bool durable() const { return durable_; }

  bool empty() const { return compares_.empty() && once_.empty() && writes_.empty(); }
  size_t compare_count() const { return compares_.size() + once_.size(); }
  // Every compare of both forms, sorted by key (a key compared by both forms
  // appears twice). The keys are views into this Txn: valid while it is
  // unchanged.
  std::vector<Compare> SortedCompares() const;
  // key -> new value, or nullopt for a delete.
  const std::map<std::string, std::optional<std::string>>& writes() const { return writes_; }

 private:
  struct OnceCompare {
    std::string key;
    int64_t version;
  };
  std::map<std::string, int64_t> compares_;
  std::vector<OnceCompare> once_;  // in the order given
  std::map<std::string, std::optional<std::string>> writes_;
  bool durable_ = false;
};

// The status a Commit returns when a compare failed; nothing was written.
absl::Status TxnConflictError(absl::string_view key);
// True for TxnConflictError statuses (code kAborted).
bool IsTxnConflict(const absl::Status& status);

class KvStore {
 public:
  virtual ~KvStore() = default;

  // The value and version of `key`, or nullopt if absent. Errors are I/O
  // failures of the backend.
  virtual absl::StatusOr<std::optional<VersionedValue>> Get(absl::string_view key) = 0;

  // Up to `limit` entries whose keys start with `prefix` and sort (bytewise)
  // strictly after prefix + start_after, in key order. start_after "" starts
  // at the first key of the prefix. REQUIRES: limit > 0. The result is a
  // consistent snapshot.
  virtual absl::StatusOr<std::vector<KeyValue>> Scan(absl::string_view prefix,
                                                     absl::string_view start_after,
                                                     size_t limit) = 0;

  // Applies `txn` atomically if every compare holds and returns the new
  // revision (every written key gets it as its version). A failed compare
  // returns TxnConflictError and writes nothing. A txn without writes only
  // checks its compares and returns the current revision.
  virtual absl::StatusOr<int64_t> Commit(const Txn& txn) = 0;
};

}  // namespace ckptfs::meta

#endif  // CKPTFS_SERVER_META_KV_STORE_H_
