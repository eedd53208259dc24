// See setid_clearing.h.
#include "fuse/setid_clearing.h"

namespace ckptfs::fuse {

void SetIdClearing::Arm(uint64_t fh) {
  absl::MutexLock lock(&mu_);
  if (armed_.insert(fh).second) armed_count_.fetch_add(1);
}

bool SetIdClearing::Disarm(uint64_t fh) {
  if (armed_count_.load() == 0) return false;
  absl::MutexLock lock(&mu_);
  if (armed_.erase(fh) == 0) return false;
  armed_count_.fetch_sub(1);
  return true;
}

}  // namespace ckptfs::fuse
