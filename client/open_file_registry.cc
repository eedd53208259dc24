// See open_file_registry.h.
#include "client/open_file_registry.h"

#include <memory>
#include <vector>

#include "client/open_file_state.h"

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

bool OpenFileRegistry::GiveUpReadBuffer(const OpenFileState* except) {
  std::vector<std::shared_ptr<OpenFileState>> live;
  size_t start = 0;
  {
    absl::MutexLock lock(&mu_);
    live.reserve(states_.size());
    for (const auto& [ino, weak] : states_) {
      if (std::shared_ptr<OpenFileState> state = weak.lock()) live.push_back(std::move(state));
    }
    if (live.empty()) return false;
    start = give_up_cursor_++ % live.size();
  }
  // States are asked (and the references dropped, which may destroy one)
  // without mu_, as the class comment requires.
  for (size_t k = 0; k < live.size(); ++k) {
    OpenFileState* state = live[(start + k) % live.size()].get();
    if (state != except && state->TryGiveUpReadBuffer()) return true;
  }
  return false;
}

size_t OpenFileRegistry::size() {
  absl::MutexLock lock(&mu_);
  return states_.size();
}

}  // namespace ckptfs::client
