// See status_board.h.
#include "server/meta/status_board.h"

#include <algorithm>
#include <utility>

namespace ckptfs::meta {
namespace {

// Field caps, so one client cannot make the table large.
constexpr size_t kMaxFieldBytes = 4096;

void Cap(std::string* s) {
  if (s->size() > kMaxFieldBytes) s->resize(kMaxFieldBytes);
}

}  // namespace

void StatusBoard::ClientHeartbeat(const ClientHeartbeatRequest& request, const std::string& peer,
                                  int64_t now_ms) {
  ClientInfo info = request.client();
  if (info.client_id().empty()) return;
  for (std::string* s :
       {info.mutable_client_id(), info.mutable_hostname(), info.mutable_mountpoint(),
        info.mutable_version(), info.mutable_program()}) {
    Cap(s);
  }
  info.set_last_heartbeat_ms(now_ms);
  info.set_peer(peer.substr(0, kMaxFieldBytes));
  // Interval in [1 s, 1 min]; an unset one counts as 5 s.
  const int64_t interval_ms =
      request.interval_ms() == 0 ? 5000 : std::clamp<int64_t>(request.interval_ms(), 1000, 60000);
  absl::MutexLock lock(&mu_);
  ClientEntry& entry = clients_[info.client_id()];
  entry.info = std::move(info);
  entry.expires_ms = now_ms + kMissedHeartbeats * interval_ms;
  while (clients_.size() > kMaxClients) {
    auto oldest = std::min_element(
        clients_.begin(), clients_.end(),
        [](const auto& a, const auto& b) { return a.second.expires_ms < b.second.expires_ms; });
    clients_.erase(oldest);
  }
}

std::vector<ClientInfo> StatusBoard::Clients(int64_t now_ms) {
  std::vector<ClientInfo> out;
  {
    absl::MutexLock lock(&mu_);
    for (auto it = clients_.begin(); it != clients_.end();) {
      if (it->second.expires_ms < now_ms) {
        it = clients_.erase(it);
      } else {
        out.push_back(it->second.info);
        ++it;
      }
    }
  }
  std::sort(out.begin(), out.end(), [](const ClientInfo& a, const ClientInfo& b) {
    return a.last_heartbeat_ms() > b.last_heartbeat_ms();
  });
  return out;
}

void StatusBoard::ServerHeartbeat(const HeartbeatRequest& request, int64_t now_ms) {
  absl::MutexLock lock(&mu_);
  // The last heartbeat's: a server restarted with scrubbing off reports none.
  if (request.has_scrub()) {
    scrubs_[request.server_id()] = request.scrub();
  } else {
    scrubs_.erase(request.server_id());
  }
  if (!request.load_reported()) return;
  auto [it, fresh] = loads_.try_emplace(request.server_id());
  LoadEntry& load = it->second;
  const int64_t elapsed_ms = now_ms - load.at_ms;
  // A total that went down is a restarted server: no rate this time.
  if (!fresh && elapsed_ms > 0 && request.bytes_read_total() >= load.read_total &&
      request.bytes_written_total() >= load.written_total) {
    load.read_per_s =
        (request.bytes_read_total() - load.read_total) * 1000 / static_cast<uint64_t>(elapsed_ms);
    load.write_per_s = (request.bytes_written_total() - load.written_total) * 1000 /
                       static_cast<uint64_t>(elapsed_ms);
  } else {
    load.read_per_s = load.write_per_s = 0;
  }
  load.at_ms = now_ms;
  load.connections = request.connections();
  load.read_total = request.bytes_read_total();
  load.written_total = request.bytes_written_total();
}

ServerStatus StatusBoard::ServerStatusOf(const ServerInfo& info) {
  ServerStatus status;
  *status.mutable_info() = info;
  absl::MutexLock lock(&mu_);
  if (auto scrub = scrubs_.find(info.id()); scrub != scrubs_.end()) {
    *status.mutable_scrub() = scrub->second;
  }
  auto it = loads_.find(info.id());
  if (it == loads_.end()) return status;
  status.set_load_reported(true);
  status.set_connections(it->second.connections);
  status.set_read_bytes_per_s(it->second.read_per_s);
  status.set_write_bytes_per_s(it->second.write_per_s);
  return status;
}

void StatusBoard::RepairReported(const RepairReport& report, int64_t now_ms) {
  RepairEntry entry{report, now_ms};
  Cap(entry.report.mutable_repairer());
  Cap(entry.report.mutable_last_problem());
  absl::MutexLock lock(&mu_);
  repair_ = std::move(entry);
}

std::optional<StatusBoard::RepairEntry> StatusBoard::LastRepair() {
  absl::MutexLock lock(&mu_);
  return repair_;
}

void StatusBoard::SeeCheckpoint(uint64_t ino) {
  if (ino == 0) return;
  absl::MutexLock lock(&mu_);
  checkpoints_.insert(ino);
  // Inode numbers grow: the smallest is the oldest.
  while (checkpoints_.size() > kMaxCheckpoints) checkpoints_.erase(checkpoints_.begin());
}

void StatusBoard::ForgetCheckpoint(uint64_t ino) {
  absl::MutexLock lock(&mu_);
  checkpoints_.erase(ino);
}

std::vector<uint64_t> StatusBoard::Checkpoints() {
  absl::MutexLock lock(&mu_);
  return std::vector<uint64_t>(checkpoints_.begin(), checkpoints_.end());
}

}  // namespace ckptfs::meta
