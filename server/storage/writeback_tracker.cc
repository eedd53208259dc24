// See writeback_tracker.h.
#include "server/storage/writeback_tracker.h"

#include <cerrno>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "common/errno_status.h"
#include "common/log.h"

namespace ckptfs::storage {

uint64_t WritebackTracker::Writing() {
  absl::MutexLock lock(&mu_);
  return ++sequence_;
}

void WritebackTracker::Published(ChunkKey key, uint64_t token,
                                 std::optional<absl::Time> written_at) {
  absl::MutexLock lock(&mu_);
  const uint64_t now = ++sequence_;
  const bool lost = (failed_at_ != 0 && token <= failed_at_) ||
                    (written_at.has_value() && *written_at <= failed_time_);
  InodeChunks& chunks = chunks_[key.ino];
  auto it = chunks.find(key.index);
  if (it == chunks.end()) {
    if (tracked_ >= max_tracked_) {
      untracked_until_ = now;
      if (lost) all_lost_ = true;
      if (chunks.empty()) chunks_.erase(key.ino);
      return;
    }
    it = chunks.emplace(key.index, Entry()).first;
    ++tracked_;
  } else if (it->second.lost) {
    --lost_;
  }
  it->second.published = now;
  it->second.lost = lost;
  if (lost) ++lost_;
}

void WritebackTracker::Removed(ChunkKey key) {
  absl::MutexLock lock(&mu_);
  auto inode = chunks_.find(key.ino);
  if (inode == chunks_.end()) return;
  auto it = inode->second.find(key.index);
  if (it != inode->second.end()) EraseLocked(key.ino, inode->second, it);
}

void WritebackTracker::EraseLocked(uint64_t ino, InodeChunks& chunks, InodeChunks::iterator at) {
  if (at->second.lost) --lost_;
  --tracked_;
  chunks.erase(at);
  if (chunks.empty()) chunks_.erase(ino);
}

uint64_t WritebackTracker::BeginSync() {
  absl::MutexLock lock(&mu_);
  return sequence_;
}

void WritebackTracker::Synced(std::optional<uint64_t> ino, uint64_t begun) {
  absl::MutexLock lock(&mu_);
  // Erasing from an absl::flat_hash_map leaves the other iterators valid.
  auto sweep = [&](InodeChunks& chunks) {
    mu_.AssertHeld();  // called within this function's lock
    for (auto it = chunks.begin(); it != chunks.end();) {
      if (!it->second.lost && it->second.published <= begun) {
        --tracked_;
        chunks.erase(it++);
      } else {
        ++it;
      }
    }
  };
  for (auto inode = ino.has_value() ? chunks_.find(*ino) : chunks_.begin();
       inode != chunks_.end();) {
    sweep(inode->second);
    if (inode->second.empty()) {
      chunks_.erase(inode++);
    } else {
      ++inode;
    }
    if (ino.has_value()) break;
  }
  if (!ino.has_value() && untracked_until_ != 0 && untracked_until_ <= begun && !all_lost_) {
    untracked_until_ = 0;
  }
}

void WritebackTracker::Failed(const absl::Status& error) {
  switch (ErrnoFromStatus(error)) {
    case EIO:
    case ENOSPC:
    case EDQUOT:
    case EROFS:    // remounted read-only after an error: its writes never land
    case EUCLEAN:  // the file system found itself corrupt
      break;
    default:
      return;  // the sync never ran (no such directory, out of descriptors, ...)
  }
  absl::MutexLock lock(&mu_);
  failed_at_ = sequence_;
  failed_time_ = absl::Now();
  failure_ = std::string(error.message());
  for (auto& [ino, chunks] : chunks_) {
    for (auto& [index, entry] : chunks) {
      if (!entry.lost) ++lost_;
      entry.lost = true;
    }
  }
  if (untracked_until_ != 0) all_lost_ = true;
  CKPTFS_LOG(kError) << "a sync failed (" << failure_ << "): " << tracked_
                     << " chunks not yet durable may have lost their bytes"
                     << (all_lost_ ? ", and more that were not tracked one by one" : "")
                     << "; every sync covering them fails until they are written again";
}

absl::Status WritebackTracker::LostError(ChunkKey key) const {
  return ErrnoStatus(
      EIO, absl::StrCat("chunk ", key.index, " of inode ", key.ino,
                        " may have lost its unsynced bytes to a failed sync (", failure_,
                        "): no sync covering it succeeds until it is written again (rewrite "
                        "the file), or this server restarts and scrubs"));
}

absl::Status WritebackTracker::CheckNoneLost(std::optional<uint64_t> ino) const {
  absl::MutexLock lock(&mu_);
  if (all_lost_) {
    return ErrnoStatus(
        EIO, absl::StrCat("a sync failed (", failure_,
                          ") while more chunks were unsynced than "
                          "this server tracks one by one, so it cannot tell which lost their "
                          "bytes: no sync succeeds until it restarts (its scrubber then "
                          "rereads every chunk)"));
  }
  if (lost_ == 0) return absl::OkStatus();
  for (auto inode = ino.has_value() ? chunks_.find(*ino) : chunks_.begin(); inode != chunks_.end();
       ++inode) {
    for (const auto& [index, entry] : inode->second) {
      if (entry.lost) return LostError({inode->first, index});
    }
    if (ino.has_value()) break;
  }
  return absl::OkStatus();
}

}  // namespace ckptfs::storage
