// See meta_txn.h.
#include "server/meta/meta_txn.h"

#include <algorithm>
#include <cerrno>
#include <functional>
#include <thread>

#include "absl/random/random.h"
#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "common/errno_status.h"
#include "server/meta/keys.h"

namespace ckptfs::meta {

absl::Status MetaTxn::CorruptRecord(absl::string_view key) {
  return ErrnoStatus(
      EIO, absl::StrCat("corrupt metadata record at key \"", absl::CHexEscape(key), "\""));
}

absl::StatusOr<const std::string*> MetaTxn::Read(absl::string_view key) {
  for (AheadRun& run : ahead_) {
    // Runs are usually disjoint pages of one scan: most hold no such key.
    if (key < run.entries.front().key || run.entries.back().key < key) continue;
    auto it =
        std::lower_bound(run.entries.begin(), run.entries.end(), key,
                         [](const KeyValue& entry, absl::string_view k) { return entry.key < k; });
    if (it == run.entries.end() || it->key != key) continue;
    AheadRun::State& state = run.state[static_cast<size_t>(it - run.entries.begin())];
    if (state == AheadRun::kReadBefore) break;  // in reads_
    if (state == AheadRun::kUnread) {
      state = AheadRun::kRead;
      txn_.ExpectVersionOnce(key, it->version);
    }
    return &it->value;
  }
  auto cached = reads_.find(key);
  if (cached != reads_.end()) return cached->second ? &*cached->second : nullptr;
  absl::StatusOr<std::optional<VersionedValue>> value = kv_->Get(key);
  if (!value.ok()) return value.status();
  std::optional<std::string> result;
  int64_t version = 0;
  if (value->has_value()) {
    version = (*value)->version;
    result = std::move((*value)->value);
  }
  // Not read before (neither here nor in a run), so compared once.
  txn_.ExpectVersionOnce(key, version);
  auto inserted = reads_.emplace(std::string(key), std::move(result)).first;
  return inserted->second ? &*inserted->second : nullptr;
}

absl::StatusOr<std::optional<std::string>> MetaTxn::Get(absl::string_view key) {
  absl::StatusOr<const std::string*> value = Read(key);
  if (!value.ok()) return value.status();
  if (*value == nullptr) return std::optional<std::string>();
  return std::optional<std::string>(**value);
}

void MetaTxn::ReadAhead(std::vector<KeyValue> run) {
  if (run.empty()) return;
  AheadRun& added = ahead_.emplace_back();
  added.state.assign(run.size(), AheadRun::kUnread);
  // Keys read with a lookup before keep that read (usually none or a few:
  // the directory being read, say).
  for (auto read = reads_.lower_bound(run.front().key);
       read != reads_.end() && read->first <= run.back().key; ++read) {
    auto it =
        std::lower_bound(run.begin(), run.end(), read->first,
                         [](const KeyValue& entry, const std::string& k) { return entry.key < k; });
    if (it != run.end() && it->key == read->first) {
      added.state[static_cast<size_t>(it - run.begin())] = AheadRun::kReadBefore;
    }
  }
  added.entries = std::move(run);
}

absl::StatusOr<InodeRecord> MetaTxn::GetInode(uint64_t ino) {
  if (ino == 0) return ErrnoStatus(ENOENT, "inode 0 does not exist");
  absl::StatusOr<std::optional<InodeRecord>> inode = GetRecord<InodeRecord>(InodeKey(ino));
  if (!inode.ok()) return inode.status();
  if (!inode->has_value()) return ErrnoStatus(ENOENT, absl::StrCat("no inode ", ino));
  return **std::move(inode);
}

absl::StatusOr<std::optional<DentryRecord>> MetaTxn::GetDentry(uint64_t parent,
                                                               absl::string_view name) {
  return GetRecord<DentryRecord>(DentryKey(parent, name));
}

absl::StatusOr<bool> MetaTxn::DirHasEntries(uint64_t dir) {
  absl::StatusOr<std::vector<KeyValue>> entries = kv_->Scan(DentryPrefix(dir), "", 1);
  if (!entries.ok()) return entries.status();
  return !entries->empty();
}

void MetaTxn::Put(absl::string_view key, const google::protobuf::MessageLite& record) {
  txn_.Put(key, record.SerializeAsString());
}

void MetaTxn::PutInode(const InodeRecord& inode) { Put(InodeKey(inode.attr().ino()), inode); }

absl::Status MetaTxn::AddInodeCount(int64_t delta) {
  // One shard per thread: concurrent operations on different threads touch
  // different counter keys and do not conflict on the count.
  const int shard = static_cast<int>(std::hash<std::thread::id>()(std::this_thread::get_id()) %
                                     kInodeCountShards);
  const std::string key = InodeCountKey(shard);
  absl::StatusOr<std::optional<std::string>> current = Get(key);
  if (!current.ok()) return current.status();
  uint64_t count = 0;
  if (current->has_value()) {
    std::optional<uint64_t> decoded = DecodeU64(**current);
    if (!decoded.has_value()) return CorruptRecord(key);
    count = *decoded;
  }
  inode_count_delta_ += delta;
  PutRaw(key, EncodeU64(count + static_cast<uint64_t>(inode_count_delta_)));
  return absl::OkStatus();
}

absl::Status RunTxn(KvStore* kv, absl::string_view what,
                    absl::FunctionRef<absl::Status(MetaTxn&)> body) {
  thread_local absl::BitGen bitgen;
  absl::Status last;
  for (int attempt = 0; attempt < kMaxTxnAttempts; ++attempt) {
    if (attempt >= 2) {
      // Randomized, growing backoff so that contending operations spread out.
      const int64_t max_us = std::min<int64_t>(5000, int64_t{20} << std::min(attempt, 10));
      absl::SleepFor(absl::Microseconds(absl::Uniform<int64_t>(bitgen, 0, max_us)));
    }
    MetaTxn txn(kv);
    absl::Status status = body(txn);
    if (!status.ok()) return status;
    absl::StatusOr<int64_t> revision = kv->Commit(txn.txn());
    if (revision.ok()) return absl::OkStatus();
    if (!IsTxnConflict(revision.status())) return revision.status();
    last = revision.status();
  }
  return ErrnoStatus(EAGAIN, absl::StrCat(what, ": metadata transaction kept conflicting after ",
                                          kMaxTxnAttempts, " attempts (", last.message(), ")"));
}

absl::StatusOr<uint64_t> CountInodes(KvStore* kv) {
  absl::StatusOr<std::vector<KeyValue>> shards =
      kv->Scan(kInodeCountPrefix, "", kInodeCountShards + 1);
  if (!shards.ok()) return shards.status();
  uint64_t total = 0;
  for (const KeyValue& shard : *shards) {
    std::optional<uint64_t> value = DecodeU64(shard.value);
    if (!value.has_value()) return ErrnoStatus(EIO, "corrupt inode count shard");
    total += *value;  // shards are deltas; unsigned wraparound sums correctly
  }
  return total;
}

}  // namespace ckptfs::meta
