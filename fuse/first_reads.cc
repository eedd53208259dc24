// FirstReads: the first open of each version of a file, per mount.
#include "fuse/first_reads.h"

namespace ckptfs::fuse {

bool FirstReads::IsFirst(uint64_t ino, const client::FileVersion& version) {
  absl::MutexLock lock(&mu_);
  auto it = opened_.find(ino);
  if (it != opened_.end()) {
    if (it->second == version) return false;
    it->second = version;
    return true;
  }
  if (opened_.size() >= kMaxFiles) opened_.clear();
  opened_.emplace(ino, version);
  return true;
}

size_t FirstReads::size() const {
  absl::MutexLock lock(&mu_);
  return opened_.size();
}

}  // namespace ckptfs::fuse
