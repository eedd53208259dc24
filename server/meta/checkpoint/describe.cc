// CheckpointStore::Get, RunDirOf, List, Arrivals, Pending and DropArrivals: reading
// checkpoints back, and the bookkeeping of arrival records.
#include <algorithm>
#include <cerrno>

#include "absl/strings/str_cat.h"
#include "common/errno_status.h"
#include "server/meta/checkpoint/checkpoint_store.h"
#include "server/meta/checkpoint/mutation_guard.h"
#include "server/meta/keys.h"
#include "server/meta/ops/ops_util.h"

namespace ckptfs::meta {
namespace {

constexpr size_t kScanPage = 1024;

// Calls `each` on every key-value under `prefix`, a page at a time.
template <typename Each>
absl::Status ScanAll(KvStore* kv, absl::string_view prefix, Each each) {
  std::string start_after;
  while (true) {
    absl::StatusOr<std::vector<KeyValue>> page = kv->Scan(prefix, start_after, kScanPage);
    if (!page.ok()) return page.status();
    for (const KeyValue& entry : *page) {
      if (absl::Status status = each(entry); !status.ok()) return status;
    }
    if (page->size() < kScanPage) return absl::OkStatus();
    start_after = page->back().key.substr(prefix.size());
  }
}

}  // namespace

absl::Status AbortedStatus(const CheckpointInfo& info) {
  return ErrnoStatus(info.abort_errno() > 0 ? info.abort_errno() : EIO,
                     info.abort_reason().empty()
                         ? absl::StrCat("checkpoint ", info.name(), " was aborted")
                         : info.abort_reason());
}

absl::StatusOr<std::vector<uint32_t>> CheckpointStore::Arrivals(uint64_t ino) {
  std::vector<uint32_t> ranks;
  absl::Status status = ScanAll(kv_, ArrivalPrefix(ino), [&](const KeyValue& entry) {
    std::optional<uint32_t> rank = RankFromArrivalKey(entry.key);
    if (!rank.has_value()) return ErrnoStatus(EIO, "corrupt arrival key");
    ranks.push_back(*rank);
    return absl::OkStatus();
  });
  if (!status.ok()) return status;
  return ranks;
}

absl::StatusOr<uint64_t> CheckpointStore::RunDirOf(uint64_t ino) {
  MetaTxn txn(kv_);
  absl::StatusOr<InodeRecord> dir = GetDir(txn, ino);
  if (!dir.ok()) return dir.status();
  return dir->parent();
}

absl::StatusOr<CheckpointInfo> CheckpointStore::Get(uint64_t ino) {
  MetaTxn txn(kv_);
  absl::StatusOr<InodeRecord> dir = GetDir(txn, ino);
  if (!dir.ok()) return dir.status();
  if (!IsCheckpointDir(*dir)) {
    return ErrnoStatus(EINVAL, absl::StrCat("directory ", ino, " is not a checkpoint"));
  }
  CheckpointInfo info = dir->checkpoint().info();
  if (info.state() == PENDING) {
    absl::StatusOr<uint32_t> arrived = CountArrivals(ino);
    if (!arrived.ok()) return arrived.status();
    info.set_arrived(*arrived);
  }
  return info;
}

absl::StatusOr<uint32_t> CheckpointStore::CountArrivals(uint64_t ino) {
  if (count_keys_) {
    absl::StatusOr<uint64_t> count = count_keys_(ArrivalPrefix(ino));
    if (!count.ok()) return count.status();
    return static_cast<uint32_t>(*count);
  }
  absl::StatusOr<std::vector<uint32_t>> arrived = Arrivals(ino);
  if (!arrived.ok()) return arrived.status();
  return static_cast<uint32_t>(arrived->size());
}

absl::StatusOr<ListCheckpointsReply> CheckpointStore::List(uint64_t run_dir) {
  MetaTxn txn(kv_);
  absl::StatusOr<InodeRecord> dir = GetDir(txn, run_dir);
  if (!dir.ok()) return dir.status();
  ListCheckpointsReply reply;
  const std::string prefix = DentryPrefix(run_dir);
  int64_t latest_ended_ms = 0;
  absl::Status status = ScanAll(kv_, prefix, [&](const KeyValue& entry) -> absl::Status {
    DentryRecord dentry;
    if (!dentry.ParseFromString(entry.value)) {
      return ErrnoStatus(EIO, "corrupt directory entry record");
    }
    if (dentry.type() != DIRECTORY) return absl::OkStatus();
    absl::StatusOr<std::optional<InodeRecord>> child =
        txn.GetRecord<InodeRecord>(InodeKey(dentry.ino()));
    if (!child.ok()) return child.status();
    if (!child->has_value() || !IsCheckpointDir(**child)) return absl::OkStatus();
    CheckpointInfo info = (*child)->checkpoint().info();
    info.set_name(entry.key.substr(prefix.size()));  // the entry is the truth
    if (info.state() == PENDING) {
      absl::StatusOr<std::vector<uint32_t>> arrived = Arrivals(dentry.ino());
      if (!arrived.ok()) return arrived.status();
      info.set_arrived(static_cast<uint32_t>(arrived->size()));
    }
    if (info.state() == COMMITTED &&
        (reply.latest().empty() || info.ended_ms() >= latest_ended_ms)) {
      latest_ended_ms = info.ended_ms();
      reply.set_latest(info.name());
    }
    *reply.add_checkpoints() = std::move(info);
    return absl::OkStatus();
  });
  if (!status.ok()) return status;
  return reply;
}

absl::StatusOr<std::optional<uint64_t>> CheckpointStore::PendingCheckpointOf(uint64_t ino) {
  MetaTxn txn(kv_);
  absl::StatusOr<InodeRecord> inode = txn.GetInode(ino);
  if (!inode.ok()) return inode.status();
  absl::StatusOr<CheckpointState> state = GoverningState(txn, *inode);
  if (!state.ok()) return state.status();
  if (*state != PENDING) return std::optional<uint64_t>();
  return std::optional<uint64_t>(CheckpointOf(*inode));
}

absl::StatusOr<std::vector<uint64_t>> CheckpointStore::Pending() {
  std::vector<uint64_t> pending;
  absl::Status status = ScanAll(kv_, kPendingCheckpointPrefix, [&](const KeyValue& entry) {
    std::optional<uint64_t> ino = InoFromKey(entry.key);
    if (!ino.has_value()) return ErrnoStatus(EIO, "corrupt pending-checkpoint key");
    pending.push_back(*ino);
    return absl::OkStatus();
  });
  if (!status.ok()) return status;
  return pending;
}

absl::Status CheckpointStore::DropArrivals(uint64_t ino) {
  const std::string prefix = ArrivalPrefix(ino);
  while (true) {
    absl::StatusOr<std::vector<KeyValue>> page = kv_->Scan(prefix, "", kScanPage);
    if (!page.ok()) return page.status();
    if (page->empty()) return absl::OkStatus();
    Txn txn;
    for (const KeyValue& entry : *page) txn.Delete(entry.key);
    absl::StatusOr<int64_t> committed = kv_->Commit(txn);
    if (!committed.ok()) return committed.status();
    if (page->size() < kScanPage) return absl::OkStatus();
  }
}

}  // namespace ckptfs::meta
