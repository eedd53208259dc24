// See orphan_reclaimer.h.
#include "server/meta/orphan_reclaimer.h"

#include <cerrno>
#include <map>
#include <memory>
#include <set>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "common/credential.h"
#include "common/data_connection.h"
#include "common/errno_status.h"
#include "common/log.h"
#include "common/tcp.h"

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

void OrphanReclaimer::Wake() {
  absl::MutexLock lock(&mu_);
  woken_ = true;
}

void OrphanReclaimer::Loop() {
  while (true) {
    {
      absl::MutexLock lock(&mu_);
      auto due = [this]() ABSL_SHARED_LOCKS_REQUIRED(mu_) { return stop_ || woken_; };
      mu_.AwaitWithTimeout(absl::Condition(&due), options_.interval);
      woken_ = false;
      if (stop_) return;
    }
    absl::StatusOr<size_t> reclaimed = RunOnce();
    if (!reclaimed.ok()) {
      CKPTFS_LOG(kWarning) << "orphan reclaimer pass failed: " << reclaimed.status().message();
    }
  }
}

bool OrphanReclaimer::Stopping() {
  absl::MutexLock lock(&mu_);
  return stop_;
}

void OrphanReclaimer::WarnAboutServer(uint32_t server_id, const std::string& what) {
  const absl::Time now = absl::Now();
  auto [it, first] = last_warning_.emplace(server_id, now);
  if (!first && now - it->second < options_.warn_interval) return;
  it->second = now;
  CKPTFS_LOG(kWarning) << "orphan reclaimer: " << what << "; retrying later";
}

absl::StatusOr<DataConnection*> OrphanReclaimer::ConnectionTo(uint32_t server_id, Pass& pass) {
  std::unique_ptr<DataConnection>& connection = pass.connections[server_id];
  if (connection != nullptr && !connection->broken()) return connection.get();
  connection.reset();
  absl::StatusOr<std::optional<ServerInfo>> server = membership_->GetServer(server_id);
  if (!server.ok()) return server.status();
  if (!server->has_value()) return nullptr;  // never registered: nothing stored there
  absl::StatusOr<HostPort> address = ParseHostPort((*server)->address());
  if (!address.ok()) return address.status();
  absl::StatusOr<std::unique_ptr<DataConnection>> dialed =
      DataConnection::Connect(*address, options_.io_timeout);
  if (!dialed.ok()) return dialed.status();
  if (absl::Status hello = PresentCredential(**dialed, ProcessCredential()); !hello.ok()) {
    return hello;
  }
  connection = *std::move(dialed);
  return connection.get();
}

bool OrphanReclaimer::TrimOnStripe(const Namespace::DueOrphan& orphan, Pass& pass) {
  const Layout& layout = orphan.record.layout();
  const std::set<uint32_t> servers(layout.stripe().begin(), layout.stripe().end());
  for (uint32_t server_id : servers) {
    if (pass.failed.count(server_id) > 0) return false;
    absl::StatusOr<DataConnection*> connection = ConnectionTo(server_id, pass);
    if (!connection.ok()) {
      WarnAboutServer(server_id, absl::StrCat("cannot reach storage server ", server_id, ": ",
                                              connection.status().message()));
      pass.failed.insert(server_id);
      return false;
    }
    if (*connection == nullptr) continue;
    data::RequestHeader trim;
    trim.set_op(data::TRIM);
    trim.set_ino(orphan.ino);
    trim.set_trim_size(0);
    trim.set_chunk_size(layout.chunk_size());
    absl::StatusOr<DataConnection::Response> response =
        (*connection)->Call(trim, nullptr, 0, nullptr, 0);
    // ENOENT: the server holds nothing of this inode, which is the goal.
    if (!response.ok() && ErrnoFromStatus(response.status()) != ENOENT) {
      WarnAboutServer(server_id, absl::StrCat("trim of inode ", orphan.ino, " on storage server ",
                                              server_id, " failed: ", response.status().message()));
      pass.failed.insert(server_id);
      return false;
    }
  }
  return true;
}

absl::StatusOr<size_t> OrphanReclaimer::RunOnce() {
  Pass pass;
  size_t reclaimed = 0;
  uint64_t start_after = 0;
  while (!Stopping()) {
    absl::StatusOr<std::vector<Namespace::DueOrphan>> due =
        ns_->DueOrphans(start_after, options_.batch);
    if (!due.ok()) return due.status();
    if (due->empty()) break;
    start_after = due->back().ino;
    for (const Namespace::DueOrphan& orphan : *due) {
      if (Stopping()) break;
      if (!TrimOnStripe(orphan, pass)) continue;  // retried next pass
      if (absl::Status dropped = ns_->DropOrphan(orphan.ino); !dropped.ok()) return dropped;
      ++reclaimed;
      CKPTFS_LOG(kDebug) << "reclaimed the chunks of unlinked inode " << orphan.ino;
    }
    if (due->size() < options_.batch) break;
  }
  return reclaimed;
}

}  // namespace ckptfs::meta
