// CheckpointStore::PrepareCommit, FinishCommit and Abort: how a PENDING
// checkpoint ends.
#include <algorithm>
#include <cerrno>

#include "absl/container/flat_hash_set.h"
#include "absl/strings/str_cat.h"
#include "common/errno_status.h"
#include "common/log.h"
#include "common/placement.h"
#include "server/meta/checkpoint/checkpoint_store.h"
#include "server/meta/checkpoint/latest.h"
#include "server/meta/checkpoint/mutation_guard.h"
#include "server/meta/checkpoint/subtree.h"
#include "server/meta/keys.h"
#include "server/meta/ops/ops_util.h"

namespace ckptfs::meta {
namespace {

// The storage servers holding chunks of file `inode`, any copy
// (common/placement.h), with the incarnations of each that acknowledged
// writes of it not known to be synced. An incarnation of a server the file
// no longer uses (its stripe moved off it) is not asked for.
void AddChunkServers(const InodeRecord& inode, std::map<uint32_t, std::set<uint64_t>>& servers) {
  const Attr& attr = inode.attr();
  const Layout& layout = attr.layout();
  if (attr.size() == 0 || layout.chunk_size() == 0 || layout.stripe_size() == 0) return;
  const uint64_t chunks = (attr.size() + layout.chunk_size() - 1) / layout.chunk_size();
  const std::vector<uint32_t> holding = ServersHoldingChunks(layout, chunks);
  for (uint32_t id : holding) servers[id];
  for (const StorageIncarnation& unsynced : inode.unsynced()) {
    if (std::find(holding.begin(), holding.end(), unsynced.server_id()) != holding.end()) {
      servers[unsynced.server_id()].insert(unsynced.incarnation());
    }
  }
}

}  // namespace

absl::StatusOr<CheckpointStore::Prepared> CheckpointStore::PrepareCommit(uint64_t ino) {
  // Nothing staged here; its compares are the versions. The files' inodes
  // are read ahead, a scan instead of thousands of lookups.
  auto owned = std::make_unique<MetaTxn>(kv_);
  MetaTxn& txn = *owned;
  absl::StatusOr<InodeRecord> dir = GetDir(txn, ino);
  if (!dir.ok()) return dir.status();
  if (!IsCheckpointDir(*dir)) {
    return ErrnoStatus(EINVAL, absl::StrCat("directory ", ino, " is not a checkpoint"));
  }
  Prepared prepared;
  prepared.info = dir->checkpoint().info();
  if (prepared.info.state() != PENDING) return prepared;
  const std::string& name = prepared.info.name();
  std::string open_for_writing, damaged;
  absl::flat_hash_set<uint64_t> linked_seen;  // files of several names, counted once
  // Visited, not kept: only the totals and the first offenders matter.
  absl::Status walked =
      VisitSubtree(txn, ino, /*read_ahead=*/true, [&](SubtreeEntry& entry) -> absl::Status {
        const Attr& attr = entry.inode.attr();
        if (attr.type() != REGULAR) return absl::OkStatus();
        if (attr.nlink() > 1 && !linked_seen.insert(attr.ino()).second) return absl::OkStatus();
        if (entry.inode.writer_handles_size() > 0 && open_for_writing.empty()) {
          open_for_writing = absl::StrCat(name, "/", entry.path);
        }
        if (entry.inode.damaged() && damaged.empty()) {
          damaged = absl::StrCat(name, "/", entry.path);
        }
        ++prepared.files;
        prepared.bytes += attr.size();
        AddChunkServers(entry.inode, prepared.servers);
        return absl::OkStatus();
      });
  if (!walked.ok()) return walked;
  if (!open_for_writing.empty()) {
    prepared.abort_errno = EBUSY;
    prepared.abort_reason = absl::StrCat(open_for_writing, " is still open for writing");
  } else if (!damaged.empty()) {
    prepared.abort_errno = EIO;
    prepared.abort_reason = absl::StrCat("a write to ", damaged, " failed");
  }
  prepared.txn = std::move(owned);
  return prepared;
}

absl::Status CheckpointStore::StageCommit(MetaTxn& txn, InodeRecord& dir, const Prepared& prepared,
                                          std::optional<uint64_t>& latest_ino,
                                          CheckpointInfo& committed) {
  const int64_t now_ns = clock_->NowNs();
  CheckpointInfo* info = dir.mutable_checkpoint()->mutable_info();
  info->set_state(COMMITTED);
  info->set_arrived(info->ranks());
  info->set_ended_ms(now_ns / 1'000'000);
  info->set_files(prepared.files);
  info->set_bytes(prepared.bytes);
  txn.PutInode(dir);
  txn.Delete(PendingCheckpointKey(dir.attr().ino()));
  txn.RequireDurable();
  absl::StatusOr<InodeRecord> run_dir = GetDir(txn, dir.parent());
  if (!run_dir.ok()) return run_dir.status();
  int64_t inode_delta = 0;
  if (absl::Status latest =
          PointLatestAt(txn, *inodes_, latest_ino, *run_dir, info->name(), now_ns, inode_delta);
      !latest.ok()) {
    return latest;
  }
  if (inode_delta != 0) {
    if (absl::Status count = txn.AddInodeCount(inode_delta); !count.ok()) return count;
  }
  committed = *info;
  return absl::OkStatus();
}

absl::StatusOr<CheckpointStore::Finished> CheckpointStore::FinishCommit(uint64_t ino,
                                                                        Prepared& prepared) {
  std::optional<uint64_t> latest_ino;  // allocated once, kept across retries
  Finished finished;
  // What the prepare read (before StageCommit reads more), by key; kept
  // for the slow path. Copied: a Compare's key is a view into the txn.
  std::vector<std::pair<std::string, int64_t>> prepared_reads;
  // Fast path: the prepare's own transaction, whose reads are the versions;
  // the KV commit checks them. A conflict may be a change of the checkpoint
  // or of something else (the run directory): the fresh transactions below
  // tell which.
  if (const std::unique_ptr<MetaTxn> txn = std::move(prepared.txn); txn != nullptr) {
    const std::vector<Compare> reads = txn->txn().SortedCompares();
    prepared_reads.reserve(reads.size());
    for (const Compare& read : reads) prepared_reads.emplace_back(read.key, read.version);
    absl::StatusOr<InodeRecord> dir = GetDir(*txn, ino);  // as prepared: no read
    if (!dir.ok()) return dir.status();
    if (dir->checkpoint().info().state() == PENDING) {
      absl::Status staged = StageCommit(*txn, *dir, prepared, latest_ino, finished.info);
      if (!staged.ok()) return staged;
      absl::StatusOr<int64_t> committed = kv_->Commit(txn->txn());
      if (committed.ok()) {
        finished.applied = true;
        return finished;
      }
      if (!IsTxnConflict(committed.status())) return committed.status();
    }
  }
  absl::Status status = RunTxn(kv_, "commit checkpoint", [&](MetaTxn& txn) -> absl::Status {
    finished = Finished();
    // Not an error of the operation: ends the body without committing.
    auto changed = [&finished] {
      finished.changed = true;
      return absl::CancelledError("checkpoint changed since it was prepared");
    };
    absl::StatusOr<InodeRecord> dir = GetDir(txn, ino);
    if (!dir.ok()) return dir.status();
    finished.info = dir->checkpoint().info();
    if (finished.info.state() != PENDING) return absl::OkStatus();  // ended meanwhile
    // Read everything the prepare read again; its versions must not have
    // moved (the keys read here are a superset, sorted alike).
    for (const auto& [key, version] : prepared_reads) {
      absl::StatusOr<std::optional<std::string>> value = txn.Get(key);
      if (!value.ok()) return value.status();
    }
    const std::vector<Compare> now = txn.txn().SortedCompares();
    auto at = now.begin();
    for (const auto& [key, version] : prepared_reads) {
      at = std::lower_bound(at, now.end(), key,
                            [](const Compare& c, absl::string_view k) { return c.key < k; });
      if (at == now.end() || at->key != key || at->version != version) return changed();
    }
    absl::Status staged = StageCommit(txn, *dir, prepared, latest_ino, finished.info);
    // Applied once RunTxn's commit of this body succeeds (checked below).
    finished.applied = staged.ok();
    return staged;
  });
  if (finished.changed) return finished;
  if (!status.ok()) return status;
  return finished;
}

absl::StatusOr<CheckpointInfo> CheckpointStore::Abort(uint64_t ino, int err,
                                                      absl::string_view reason) {
  absl::StatusOr<Ended> ended = AbortIfPending(ino, err, reason);
  if (!ended.ok()) return ended.status();
  return std::move(ended->info);
}

absl::StatusOr<CheckpointStore::Ended> CheckpointStore::AbortIfPending(uint64_t ino, int err,
                                                                       absl::string_view reason) {
  absl::StatusOr<std::vector<uint32_t>> arrived = Arrivals(ino);
  if (!arrived.ok()) return arrived.status();
  // Set by the body that stages the abort; RunTxn returns OK only once the
  // transaction of its last run committed.
  bool applied = false;
  absl::StatusOr<CheckpointInfo> info = RunTxn<CheckpointInfo>(
      kv_, "abort checkpoint", [&](MetaTxn& txn) -> absl::StatusOr<CheckpointInfo> {
        applied = false;
        absl::StatusOr<InodeRecord> dir = GetDir(txn, ino);
        if (!dir.ok()) return dir.status();
        if (!IsCheckpointDir(*dir)) {
          return ErrnoStatus(EINVAL, absl::StrCat("directory ", ino, " is not a checkpoint"));
        }
        if (dir->checkpoint().info().state() != PENDING) return dir->checkpoint().info();
        absl::StatusOr<std::vector<SubtreeEntry>> subtree = ReadSubtree(txn, ino);
        if (!subtree.ok()) return subtree.status();
        uint64_t files = 0, bytes = 0;
        absl::flat_hash_set<uint64_t> linked_seen;  // files of several names, counted once
        for (const SubtreeEntry& entry : *subtree) {
          if (entry.inode.attr().type() != REGULAR) continue;
          if (entry.inode.attr().nlink() > 1 &&
              !linked_seen.insert(entry.inode.attr().ino()).second) {
            continue;
          }
          ++files;
          bytes += entry.inode.attr().size();
        }
        const int64_t now_ns = clock_->NowNs();
        const int64_t deleted =
            StageSubtreeRemoval(txn, *subtree, now_ns / 1'000'000, BusyGraceMs());
        if (deleted != 0) {
          if (absl::Status count = txn.AddInodeCount(-deleted); !count.ok()) return count;
        }
        dir->mutable_attr()->set_nlink(2);
        TouchDir(*dir, now_ns);
        CheckpointInfo* info = dir->mutable_checkpoint()->mutable_info();
        info->set_state(ABORTED);
        info->set_abort_errno(err);
        info->set_abort_reason(std::string(reason));
        info->set_ended_ms(now_ns / 1'000'000);
        info->set_files(files);
        info->set_bytes(bytes);
        info->set_arrived(static_cast<uint32_t>(arrived->size()));
        txn.PutInode(*dir);
        txn.Delete(PendingCheckpointKey(ino));
        txn.RequireDurable();
        applied = true;
        return *info;
      });
  if (!info.ok()) return info.status();
  return Ended{*std::move(info), applied};
}

}  // namespace ckptfs::meta
