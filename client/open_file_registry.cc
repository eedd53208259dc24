// See open_file_registry.h.
#include "client/open_file_registry.h"

namespace ckptfs::client {

std::shared_ptr<OpenFileState> OpenFileRegistry::Find(uint64_t ino) {
  absl::MutexLock lock(&mu_);
  auto it = states_.find(ino);
  return it == states_.end() ? nullptr : it->second.lock();
}

std::shared_ptr<OpenFileState> OpenFileRegistry::FindOrAdd(
    uint64_t ino, const std::function<std::shared_ptr<OpenFileState>()>& make) {
  absl::MutexLock lock(&mu_);
  std::weak_ptr<OpenFileState>& slot = states_[ino];
  if (std::shared_ptr<OpenFileState> live = slot.lock()) return live;
  std::shared_ptr<OpenFileState> state = make();
  slot = state;
  return state;
}

void OpenFileRegistry::RemoveExpired(uint64_t ino) {
  absl::MutexLock lock(&mu_);
  auto it = states_.find(ino);
  if (it != states_.end() && it->second.expired()) states_.erase(it);
}

size_t OpenFileRegistry::size() {
  absl::MutexLock lock(&mu_);
  return states_.size();
}

}  // namespace ckptfs::client
