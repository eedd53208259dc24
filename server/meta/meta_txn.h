// MetaTxn and RunTxn: optimistic read-modify-write transactions over a
// KvStore, the way every mutating metadata operation runs.
//
// An operation body reads through a MetaTxn (each key read, present or
// absent, becomes a compare on the version it had), stages its writes in the
// same MetaTxn, and RunTxn commits them in one KvStore::Commit. If another
// commit changed anything the body read, the commit aborts and RunTxn runs the
// body again on fresh reads, a bounded number of times with a short
// randomized backoff. The body must therefore be a pure function of what it
// reads (no side effects outside the MetaTxn).
//
// Scans are not compared (a prefix has no version): an operation that
// depends on a directory's entries also reads the directory's inode, whose
// version changes with every entry added or removed (those operations update
// the directory's mtime).
//
// Read-ahead: a body that will read many keys close together (a
// checkpoint's thousands of files' inodes) scans their range and hands the
// scan's result to ReadAhead; Gets of those keys are then answered from it,
// value and version, exactly as if Get had read them at the scan, and only
// the keys actually read are compared. Each key read is compared once
// (Txn::ExpectVersionOnce), without a per-key tree of compares.
//
// Thread-safety: a MetaTxn belongs to one thread; RunTxn is thread-safe.
#ifndef CKPTFS_SERVER_META_META_TXN_H_
#define CKPTFS_SERVER_META_META_TXN_H_

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/functional/function_ref.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "google/protobuf/message_lite.h"
#include "proto/meta_store.pb.h"
#include "server/meta/kv_store.h"

namespace ckptfs::meta {

class MetaTxn {
 public:
  explicit MetaTxn(KvStore* kv) : kv_(kv) {}
  MetaTxn(const MetaTxn&) = delete;
  MetaTxn& operator=(const MetaTxn&) = delete;

  // The value of `key` (nullopt if absent); the version read becomes a
  // compare. Repeated reads of a key return the first read's value. Reads
  // see the store (or what ReadAhead was given of it), never this
  // transaction's own staged writes.
  absl::StatusOr<std::optional<std::string>> Get(absl::string_view key);

  // Get + parse into `Record`; EIO if the stored bytes do not parse.
  template <typename Record>
  absl::StatusOr<std::optional<Record>> GetRecord(absl::string_view key) {
    absl::StatusOr<const std::string*> bytes = Read(key);
    if (!bytes.ok()) return bytes.status();
    if (*bytes == nullptr) return std::optional<Record>();
    Record record;
    if (!record.ParseFromString(**bytes)) return CorruptRecord(key);
    return std::optional<Record>(std::move(record));
  }

  // Makes `run` — what a Scan of kv() returned: sorted by key, each key
  // once — answer this transaction's later Gets of its keys (see the file
  // comment). A key already read keeps its first read; a key of two runs is
  // answered by the earlier one. Keys of `run` never read are not compared.
  void ReadAhead(std::vector<KeyValue> run);

  // The inode `ino`; ENOENT when there is none (including ino 0).
  absl::StatusOr<InodeRecord> GetInode(uint64_t ino);
  // The entry `name` of directory `parent`, nullopt if absent.
  absl::StatusOr<std::optional<DentryRecord>> GetDentry(uint64_t parent, absl::string_view name);
  // Whether directory `dir` has any entry. Not compared (see file comment):
  // REQUIRES: the caller has read `dir`'s inode through this MetaTxn.
  absl::StatusOr<bool> DirHasEntries(uint64_t dir);

  void Put(absl::string_view key, const google::protobuf::MessageLite& record);
  void PutRaw(absl::string_view key, absl::string_view value) { txn_.Put(key, value); }
  void Delete(absl::string_view key) { txn_.Delete(key); }
  void PutInode(const InodeRecord& inode);
  // See Txn::RequireDurable.
  void RequireDurable() { txn_.RequireDurable(); }

  // Adds `delta` to the count of inodes in use (one shard of the counter).
  // Several calls in one transaction add up.
  absl::Status AddInodeCount(int64_t delta);

  const Txn& txn() const { return txn_; }
  KvStore* kv() const { return kv_; }

  // How many keys this transaction has read (each compared once).
  size_t reads() const { return txn_.compare_count(); }

 private:
  // What ReadAhead was given, and which of its keys were read.
  struct AheadRun {
    enum State : uint8_t { kUnread, kRead, kReadBefore };  // kReadBefore: not answered here
    std::vector<KeyValue> entries;
    std::vector<State> state;
  };

  static absl::Status CorruptRecord(absl::string_view key);
  // The first read's value of `key`; nullptr if it was absent. The pointer
  // lives as long as this MetaTxn.
  absl::StatusOr<const std::string*> Read(absl::string_view key);

  KvStore* const kv_;
  Txn txn_;
  // Keys read with a lookup, and their values.
  std::map<std::string, std::optional<std::string>, std::less<>> reads_;
  std::vector<AheadRun> ahead_;
  // What AddInodeCount calls added so far.
  int64_t inode_count_delta_ = 0;
};

// Runs `body` and commits what it staged, retrying on conflicts (at most
// kMaxTxnAttempts times, then EAGAIN naming `what`). A body error is
// returned as is and nothing is committed.
absl::Status RunTxn(KvStore* kv, absl::string_view what,
                    absl::FunctionRef<absl::Status(MetaTxn&)> body);

template <typename T>
absl::StatusOr<T> RunTxn(KvStore* kv, absl::string_view what,
                         absl::FunctionRef<absl::StatusOr<T>(MetaTxn&)> body) {
  std::optional<T> result;
  absl::Status status = RunTxn(kv, what, [&](MetaTxn& txn) -> absl::Status {
    absl::StatusOr<T> value = body(txn);
    if (!value.ok()) return value.status();
    result = *std::move(value);
    return absl::OkStatus();
  });
  if (!status.ok()) return status;
  return *std::move(result);
}

inline constexpr int kMaxTxnAttempts = 200;

// The sum of the inode-count shards: inodes in use.
absl::StatusOr<uint64_t> CountInodes(KvStore* kv);

}  // namespace ckptfs::meta

#endif  // CKPTFS_SERVER_META_META_TXN_H_
