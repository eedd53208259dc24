// See orphan_reclaimer.h.
#include "server/meta/orphan_reclaimer.h"

#include <cerrno>
#include <map>
#include <memory>
#include <set>

#include "common/data_connection.h"
#include "common/errno_status.h"
#include "common/log.h"
#include "common/net.h"

namespace ckptfs::meta {

void OrphanReclaimer::Start() {
  thread_ = std::thread([this] { Loop(); });
}

void OrphanReclaimer::Stop() {
  {
    absl::MutexLock lock(&mu_);
    stop_ = true;
  }
  if (thread_.joinable()) thread_.join();
}

void OrphanReclaimer::Loop() {
  while (true) {
    {
      absl::MutexLock lock(&mu_);
      auto stopping = [this]() ABSL_SHARED_LOCKS_REQUIRED(mu_) { return stop_; };
      mu_.AwaitWithTimeout(absl::Condition(&stopping), options_.interval);
      if (stop_) return;
    }
    absl::StatusOr<size_t> reclaimed = RunOnce();
    if (!reclaimed.ok()) {
      CKPTFS_LOG(kWarning) << "orphan reclaimer pass failed: " << reclaimed.status().message();
    }
  }
}

absl::StatusOr<size_t> OrphanReclaimer::RunOnce() {
  absl::StatusOr<std::vector<Namespace::DueOrphan>> due = ns_->DueOrphans(0, options_.batch);
  if (!due.ok()) return due.status();
  // Connections opened this pass, and servers that failed this pass (not
  // retried until the next one).
  std::map<uint32_t, std::unique_ptr<DataConnection>> connections;
  std::set<uint32_t> failed;
  size_t reclaimed = 0;

  for (const Namespace::DueOrphan& orphan : *due) {
    bool all_trimmed = true;
    std::set<uint32_t> stripe(orphan.record.layout().stripe().begin(),
                              orphan.record.layout().stripe().end());
    for (uint32_t server_id : stripe) {
      if (failed.count(server_id) > 0) {
        all_trimmed = false;
        break;
      }
      auto& connection = connections[server_id];
      if (connection == nullptr || connection->broken()) {
        connection.reset();
        absl::StatusOr<std::optional<ServerInfo>> server = membership_->GetServer(server_id);
        if (!server.ok()) return server.status();
        if (!server->has_value()) continue;  // never registered: nothing stored there
        absl::StatusOr<HostPort> address = ParseHostPort((*server)->address());
        absl::StatusOr<std::unique_ptr<DataConnection>> dialed =
            address.ok() ? DataConnection::Connect(*address, options_.io_timeout)
                         : absl::StatusOr<std::unique_ptr<DataConnection>>(address.status());
        if (!dialed.ok()) {
          CKPTFS_LOG(kWarning) << "orphan reclaimer: storage server " << server_id
                               << " unreachable, retrying later: " << dialed.status().message();
          failed.insert(server_id);
          all_trimmed = false;
          break;
        }
        connection = *std::move(dialed);
      }
      data::RequestHeader trim;
      trim.set_op(data::TRIM);
      trim.set_ino(orphan.ino);
      trim.set_trim_size(0);
      trim.set_chunk_size(orphan.record.layout().chunk_size());
      absl::StatusOr<DataConnection::Response> response =
          connection->Call(trim, nullptr, 0, nullptr, 0);
      if (!response.ok() && ErrnoFromStatus(response.status()) != ENOENT) {
        CKPTFS_LOG(kWarning) << "orphan reclaimer: trim of inode " << orphan.ino
                             << " on storage server " << server_id
                             << " failed, retrying later: " << response.status().message();
        failed.insert(server_id);
        all_trimmed = false;
        break;
      }
    }
    if (!all_trimmed) continue;
    if (absl::Status dropped = ns_->DropOrphan(orphan.ino); !dropped.ok()) return dropped;
    ++reclaimed;
    CKPTFS_LOG(kDebug) << "reclaimed the chunks of unlinked inode " << orphan.ino;
  }
  return reclaimed;
}

}  // namespace ckptfs::meta
