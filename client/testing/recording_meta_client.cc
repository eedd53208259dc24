// See recording_meta_client.h.
#include "client/testing/recording_meta_client.h"

#include <algorithm>

namespace ckptfs::client::testing {

absl::Status RecordingMetaClient::Enter(absl::string_view rpc) {
  absl::MutexLock lock(&mu_);
  ++calls_[std::string(rpc)];
  auto it = fail_next_.find(rpc);
  if (it == fail_next_.end()) return absl::OkStatus();
  absl::Status status = it->second.status;
  if (--it->second.times <= 0) fail_next_.erase(it);
  return status;
}

template <typename Reply, typename Request>
absl::StatusOr<Reply> RecordingMetaClient::Forward(
    absl::string_view rpc, absl::StatusOr<Reply> (MetaClient::*method)(const Request&),
    const Request& request) {
  if (absl::Status s = Enter(rpc); !s.ok()) return s;
  return (inner_.get()->*method)(request);
}

int RecordingMetaClient::Calls(absl::string_view rpc) const {
  absl::MutexLock lock(&mu_);
  auto it = calls_.find(rpc);
  return it == calls_.end() ? 0 : it->second;
}

void RecordingMetaClient::FailNext(absl::string_view rpc, absl::Status status, int times) {
  absl::MutexLock lock(&mu_);
  if (times <= 0) {
    fail_next_.erase(std::string(rpc));
    return;
  }
  fail_next_[std::string(rpc)] = Failure{std::move(status), times};
}

std::vector<uint64_t> RecordingMetaClient::Registrations() const {
  absl::MutexLock lock(&mu_);
  return registrations_;
}

std::vector<meta::CommitWriteRequest> RecordingMetaClient::CommitWrites() const {
  absl::MutexLock lock(&mu_);
  return commit_writes_;
}

std::vector<meta::RepairReport> RecordingMetaClient::RepairReports() const {
  absl::MutexLock lock(&mu_);
  return repair_reports_;
}

RecordingMetaClient::CommitCounts RecordingMetaClient::CommitCheckpointCounts() const {
  absl::MutexLock lock(&mu_);
  return commit_counts_;
}

// --- Calls recorded ----------------------------------------------------------

absl::StatusOr<meta::CreateReply> RecordingMetaClient::Create(const meta::CreateRequest& request) {
  if (absl::Status s = Enter("Create"); !s.ok()) return s;
  if (request.writer_handle() != 0) {
    absl::MutexLock lock(&mu_);
    registrations_.push_back(request.writer_handle());
  }
  return inner_->Create(request);
}

absl::StatusOr<meta::AttrReply> RecordingMetaClient::Open(const meta::OpenRequest& request) {
  if (absl::Status s = Enter("Open"); !s.ok()) return s;
  if (request.writer_handle() != 0) {
    absl::MutexLock lock(&mu_);
    registrations_.push_back(request.writer_handle());
  }
  return inner_->Open(request);
}

absl::StatusOr<meta::AttrReply> RecordingMetaClient::CommitWrite(
    const meta::CommitWriteRequest& request) {
  if (absl::Status s = Enter("CommitWrite"); !s.ok()) return s;
  {
    absl::MutexLock lock(&mu_);
    commit_writes_.push_back(request);
  }
  return inner_->CommitWrite(request);
}

absl::Status RecordingMetaClient::ReportRepair(const meta::RepairReport& report) {
  if (absl::Status s = Enter("ReportRepair"); !s.ok()) return s;
  {
    absl::MutexLock lock(&mu_);
    repair_reports_.push_back(report);
  }
  return inner_->ReportRepair(report);
}

absl::StatusOr<meta::CheckpointInfo> RecordingMetaClient::CommitCheckpoint(
    const meta::CommitCheckpointRequest& request, Cancellation* cancel) {
  if (absl::Status s = Enter("CommitCheckpoint"); !s.ok()) return s;
  if (request.no_wait()) {
    absl::StatusOr<meta::CheckpointInfo> result = inner_->CommitCheckpoint(request, cancel);
    absl::MutexLock lock(&mu_);
    ++commit_counts_.no_wait;
    return result;
  }
  {
    absl::MutexLock lock(&mu_);
    ++commit_counts_.long_polls;
    ++long_polls_in_flight_;
    commit_counts_.long_polls_peak =
        std::max(commit_counts_.long_polls_peak, long_polls_in_flight_);
  }
  absl::StatusOr<meta::CheckpointInfo> result = inner_->CommitCheckpoint(request, cancel);
  absl::MutexLock lock(&mu_);
  --long_polls_in_flight_;
  return result;
}

absl::StatusOr<meta::Attr> RecordingMetaClient::MoveStripeServer(uint64_t ino, uint32_t from,
                                                                 uint32_t to) {
  if (absl::Status s = Enter("MoveStripeServer"); !s.ok()) return s;
  return inner_->MoveStripeServer(ino, from, to);
}

// --- Calls only counted ------------------------------------------------------

absl::StatusOr<meta::AttrReply> RecordingMetaClient::Lookup(const meta::LookupRequest& request) {
  return Forward("Lookup", &MetaClient::Lookup, request);
}
absl::StatusOr<meta::AttrReply> RecordingMetaClient::GetAttr(const meta::InodeRequest& request) {
  return Forward("GetAttr", &MetaClient::GetAttr, request);
}
absl::StatusOr<meta::AttrReply> RecordingMetaClient::SetAttr(const meta::SetAttrRequest& request) {
  return Forward("SetAttr", &MetaClient::SetAttr, request);
}
absl::StatusOr<meta::AttrReply> RecordingMetaClient::Mkdir(const meta::MkdirRequest& request) {
  return Forward("Mkdir", &MetaClient::Mkdir, request);
}
absl::StatusOr<meta::AttrReply> RecordingMetaClient::Symlink(const meta::SymlinkRequest& request) {
  return Forward("Symlink", &MetaClient::Symlink, request);
}
absl::StatusOr<meta::AttrReply> RecordingMetaClient::Mknod(const meta::MknodRequest& request) {
  return Forward("Mknod", &MetaClient::Mknod, request);
}
absl::StatusOr<meta::AttrReply> RecordingMetaClient::Link(const meta::LinkRequest& request) {
  return Forward("Link", &MetaClient::Link, request);
}
absl::StatusOr<meta::ReadLinkReply> RecordingMetaClient::ReadLink(
    const meta::InodeRequest& request) {
  return Forward("ReadLink", &MetaClient::ReadLink, request);
}
absl::StatusOr<meta::Empty> RecordingMetaClient::Unlink(const meta::LookupRequest& request) {
  return Forward("Unlink", &MetaClient::Unlink, request);
}
absl::StatusOr<meta::Empty> RecordingMetaClient::Rmdir(const meta::LookupRequest& request) {
  return Forward("Rmdir", &MetaClient::Rmdir, request);
}
absl::StatusOr<meta::Empty> RecordingMetaClient::Rename(const meta::RenameRequest& request) {
  return Forward("Rename", &MetaClient::Rename, request);
}
absl::StatusOr<meta::ReadDirReply> RecordingMetaClient::ReadDir(
    const meta::ReadDirRequest& request) {
  return Forward("ReadDir", &MetaClient::ReadDir, request);
}
absl::StatusOr<meta::Empty> RecordingMetaClient::ReleaseReader(
    const meta::ReleaseReaderRequest& request) {
  return Forward("ReleaseReader", &MetaClient::ReleaseReader, request);
}
absl::StatusOr<meta::Empty> RecordingMetaClient::SetXattr(const meta::SetXattrRequest& request) {
  return Forward("SetXattr", &MetaClient::SetXattr, request);
}
absl::StatusOr<meta::XattrValue> RecordingMetaClient::GetXattr(const meta::XattrRequest& request) {
  return Forward("GetXattr", &MetaClient::GetXattr, request);
}
absl::StatusOr<meta::XattrNames> RecordingMetaClient::ListXattr(const meta::InodeRequest& request) {
  return Forward("ListXattr", &MetaClient::ListXattr, request);
}
absl::StatusOr<meta::Empty> RecordingMetaClient::RemoveXattr(const meta::XattrRequest& request) {
  return Forward("RemoveXattr", &MetaClient::RemoveXattr, request);
}
absl::StatusOr<meta::StatFsReply> RecordingMetaClient::StatFs(const meta::Empty& request) {
  return Forward("StatFs", &MetaClient::StatFs, request);
}
absl::StatusOr<meta::CheckpointInfo> RecordingMetaClient::DeclareCheckpoint(
    const meta::DeclareCheckpointRequest& request) {
  return Forward("DeclareCheckpoint", &MetaClient::DeclareCheckpoint, request);
}
absl::StatusOr<meta::CheckpointInfo> RecordingMetaClient::GetCheckpoint(
    const meta::InodeRequest& request) {
  return Forward("GetCheckpoint", &MetaClient::GetCheckpoint, request);
}
absl::StatusOr<meta::ListCheckpointsReply> RecordingMetaClient::ListCheckpoints(
    const meta::InodeRequest& request) {
  return Forward("ListCheckpoints", &MetaClient::ListCheckpoints, request);
}
absl::StatusOr<meta::Empty> RecordingMetaClient::RemoveCheckpoint(
    const meta::RemoveCheckpointRequest& request) {
  return Forward("RemoveCheckpoint", &MetaClient::RemoveCheckpoint, request);
}
absl::StatusOr<meta::RegisterServerReply> RecordingMetaClient::RegisterServer(
    const meta::RegisterServerRequest& request) {
  return Forward("RegisterServer", &MetaClient::RegisterServer, request);
}
absl::StatusOr<meta::Empty> RecordingMetaClient::Heartbeat(const meta::HeartbeatRequest& request) {
  return Forward("Heartbeat", &MetaClient::Heartbeat, request);
}
absl::StatusOr<meta::ListServersReply> RecordingMetaClient::ListServers(
    const meta::Empty& request) {
  return Forward("ListServers", &MetaClient::ListServers, request);
}
absl::StatusOr<meta::Empty> RecordingMetaClient::ClientHeartbeat(
    const meta::ClientHeartbeatRequest& request) {
  return Forward("ClientHeartbeat", &MetaClient::ClientHeartbeat, request);
}
absl::StatusOr<meta::ClusterStatusReply> RecordingMetaClient::ClusterStatus(
    const meta::ClusterStatusRequest& request) {
  return Forward("ClusterStatus", &MetaClient::ClusterStatus, request);
}

}  // namespace ckptfs::client::testing
