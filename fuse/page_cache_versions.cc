// See page_cache_versions.h.
#include "fuse/page_cache_versions.h"

namespace ckptfs::fuse {

bool PageCacheVersions::KeepOnOpen(uint64_t ino, const client::FileVersion& version, uint64_t fh) {
  absl::MutexLock lock(&mu_);
  auto it = versions_.find(ino);
  if (it != versions_.end() && it->second.version == version && it->second.clean) return true;
  if (it == versions_.end()) {
    if (versions_.size() >= kMaxFiles) versions_.clear();
    versions_.emplace(ino, Entry{version, /*clean=*/false});
  } else {
    it->second = Entry{version, /*clean=*/false};
  }
  dropping_.insert_or_assign(fh, Dropping{ino, version});
  dropping_count_.store(dropping_.size(), std::memory_order_release);
  return false;
}

void PageCacheVersions::OnHandleUsed(uint64_t fh) {
  if (dropping_count_.load(std::memory_order_acquire) == 0) return;
  {
    // Most READs come on handles that are not dropping, while other
    // handles are (one opened and not yet read): a shared lock for them.
    absl::ReaderMutexLock shared(&mu_);
    if (!dropping_.contains(fh)) return;
  }
  absl::MutexLock lock(&mu_);
  auto it = dropping_.find(fh);
  if (it == dropping_.end()) return;
  auto entry = versions_.find(it->second.ino);
  if (entry != versions_.end() && entry->second.version == it->second.version) {
    entry->second.clean = true;
  }
  dropping_.erase(it);
  dropping_count_.store(dropping_.size(), std::memory_order_release);
}

void PageCacheVersions::Abandon(uint64_t fh) {
  absl::MutexLock lock(&mu_);
  dropping_.erase(fh);
  dropping_count_.store(dropping_.size(), std::memory_order_release);
}

size_t PageCacheVersions::size() const {
  absl::MutexLock lock(&mu_);
  return versions_.size();
}

size_t PageCacheVersions::dropping() const {
  absl::MutexLock lock(&mu_);
  return dropping_.size();
}

}  // namespace ckptfs::fuse
