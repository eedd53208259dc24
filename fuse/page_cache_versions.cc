// See page_cache_versions.h.
#include "fuse/page_cache_versions.h"

namespace ckptfs::fuse {

bool PageCacheVersions::KeepOnOpen(uint64_t ino, const client::FileVersion& version) {
  absl::MutexLock lock(&mu_);
  auto it = versions_.find(ino);
  if (it != versions_.end()) {
    if (it->second == version) return true;
    it->second = version;
    return false;
  }
  if (versions_.size() >= kMaxFiles) versions_.clear();
  versions_.emplace(ino, version);
  return false;
}

size_t PageCacheVersions::size() const {
  absl::MutexLock lock(&mu_);
  return versions_.size();
}

}  // namespace ckptfs::fuse
