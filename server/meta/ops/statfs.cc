// Namespace::StatFs: capacity of the alive storage servers and inodes in use.
#include <algorithm>

#include "server/meta/meta_txn.h"
#include "server/meta/namespace.h"

namespace ckptfs::meta {

absl::StatusOr<StatFsReply> Namespace::StatFs() {
  absl::StatusOr<std::vector<ServerInfo>> servers = membership_->ListServers();
  if (!servers.ok()) return servers.status();
  absl::StatusOr<uint64_t> inodes = CountInodes(kv_);
  if (!inodes.ok()) return inodes.status();
  StatFsReply reply;
  for (const ServerInfo& server : *servers) {
    if (!server.alive()) continue;
    reply.set_total_bytes(reply.total_bytes() + server.capacity_bytes());
    const uint64_t used = std::min(server.used_bytes(), server.capacity_bytes());
    reply.set_free_bytes(reply.free_bytes() + server.capacity_bytes() - used);
    reply.set_servers_up(reply.servers_up() + 1);
  }
  reply.set_servers_total(static_cast<uint32_t>(servers->size()));
  reply.set_files(*inodes);
  return reply;
}

}  // namespace ckptfs::meta
