// See unsynced_writes.h.
#include "client/unsynced_writes.h"

#include <algorithm>

namespace ckptfs::client {

void UnsyncedWrites::Hold(uint64_t ino) {
  absl::MutexLock lock(&mu_);
  ++files_[ino].holders;
}

void UnsyncedWrites::Release(uint64_t ino) {
  absl::MutexLock lock(&mu_);
  auto it = files_.find(ino);
  if (it == files_.end()) return;
  if (--it->second.holders <= 0) files_.erase(it);
}

void UnsyncedWrites::Stored(uint64_t ino, uint32_t server_id, uint64_t incarnation) {
  if (incarnation == 0) return;
  absl::MutexLock lock(&mu_);
  files_[ino].servers[server_id][incarnation] = ++sequence_;
}

UnsyncedWrites::Pending UnsyncedWrites::ForSync(uint64_t ino, uint32_t server_id) const {
  absl::MutexLock lock(&mu_);
  Pending pending;
  pending.as_of = sequence_;
  auto file = files_.find(ino);
  if (file == files_.end()) return pending;
  auto server = file->second.servers.find(server_id);
  if (server == file->second.servers.end()) return pending;
  for (const auto& [incarnation, written] : server->second) {
    pending.incarnations.push_back(incarnation);
  }
  std::sort(pending.incarnations.begin(), pending.incarnations.end());
  return pending;
}

void UnsyncedWrites::Synced(uint64_t ino, uint32_t server_id, const Pending& pending) {
  absl::MutexLock lock(&mu_);
  auto file = files_.find(ino);
  if (file == files_.end()) return;
  auto server = file->second.servers.find(server_id);
  if (server == file->second.servers.end()) return;
  for (uint64_t incarnation : pending.incarnations) {
    auto it = server->second.find(incarnation);
    if (it != server->second.end() && it->second <= pending.as_of) server->second.erase(it);
  }
  if (server->second.empty()) file->second.servers.erase(server);
  if (file->second.servers.empty() && file->second.holders <= 0) files_.erase(file);
}

std::vector<meta::StorageIncarnation> UnsyncedWrites::Of(uint64_t ino) const {
  absl::MutexLock lock(&mu_);
  std::vector<meta::StorageIncarnation> out;
  auto file = files_.find(ino);
  if (file == files_.end()) return out;
  for (const auto& [server_id, incarnations] : file->second.servers) {
    for (const auto& [incarnation, written] : incarnations) {
      meta::StorageIncarnation& one = out.emplace_back();
      one.set_server_id(server_id);
      one.set_incarnation(incarnation);
    }
  }
  std::sort(out.begin(), out.end(), [](const auto& a, const auto& b) {
    return std::make_pair(a.server_id(), a.incarnation()) <
           std::make_pair(b.server_id(), b.incarnation());
  });
  return out;
}

}  // namespace ckptfs::client
