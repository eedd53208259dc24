// MetaServiceImpl::BuildClusterStatus: the answer to ClusterStatus
// (`ckptfs status`). Servers come from Membership (KV reads) with the load
// and scrub reports the StatusBoard holds; clients and the repairer's last
// report from the StatusBoard; the checkpoints to look at are those the
// StatusBoard has seen plus the KV's pending index; each is read
// (GetCheckpoint) to keep the pending ones, and the ones that ended are
// forgotten. Writes nothing.
// Thread-safety: as MetaServiceImpl (any handler thread).
#include <cerrno>

#include <optional>
#include <string>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "common/errno_status.h"
#include "server/meta/meta_service.h"

namespace ckptfs::meta {

absl::StatusOr<ClusterStatusReply> MetaServiceImpl::BuildClusterStatus() {
  ClusterStatusReply reply;
  const int64_t now_ms = absl::ToUnixMillis(absl::Now());
  reply.set_now_ms(now_ms);
  reply.set_version(kServiceVersion);
  absl::StatusOr<std::vector<ServerInfo>> servers = membership_->ListServers();
  if (!servers.ok()) return servers.status();
  for (const ServerInfo& server : *servers) {
    *reply.add_servers() = board_.ServerStatusOf(server);
  }
  // The cluster's default for new files (a directory's
  // user.ckptfs.replicas or user.ckptfs.ec may differ).
  const ErasureCodeSpec ec = ns_->options().default_ec;
  const uint32_t copies = ns_->options().default_replicas;
  if (ec.enabled()) {
    reply.set_copies(1);
    reply.set_ec_data(ec.k);
    reply.set_ec_parity(ec.m);
    reply.set_redundancy(
        absl::StrCat("erasure coding ", ec.k, "+", ec.m, " (survives ", ec.m, " lost servers)"));
  } else {
    reply.set_copies(copies);
    reply.set_redundancy(copies <= 1 ? std::string("none (1 copy)")
                                     : absl::StrCat(copies, " replicas"));
  }
  for (ClientInfo& client : board_.Clients(now_ms)) *reply.add_clients() = std::move(client);
  if (std::optional<StatusBoard::RepairEntry> repair = board_.LastRepair(); repair.has_value()) {
    *reply.mutable_repair() = std::move(repair->report);
    reply.set_repair_reported_ms(repair->reported_ms);
  }
  if (pending_index_ != nullptr) {
    // The KV index of pending checkpoints: those from before a restart too.
    absl::StatusOr<std::vector<uint64_t>> pending = pending_index_->Pending();
    if (!pending.ok()) return pending.status();
    for (uint64_t ino : *pending) board_.SeeCheckpoint(ino);
  }
  for (uint64_t ino : board_.Checkpoints()) {
    absl::StatusOr<CheckpointInfo> info = checkpoints_->Get(ino);
    if (!info.ok()) {
      // Removed or not a checkpoint any more: forget it. Anything else (the
      // store unreachable for a moment) keeps it for the next status.
      const int err = ErrnoFromStatus(info.status());
      if (err == ENOENT || err == EINVAL || err == ENOTDIR) board_.ForgetCheckpoint(ino);
      continue;
    }
    if (info->state() != PENDING) {
      board_.ForgetCheckpoint(ino);  // ended
      continue;
    }
    *reply.add_pending_checkpoints() = *std::move(info);
  }
  return reply;
}

}  // namespace ckptfs::meta
