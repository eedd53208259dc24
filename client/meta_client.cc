// See meta_client.h: the transport-error mark, a status payload.
#include "client/meta_client.h"

#include <cerrno>

#include "absl/strings/cord.h"
#include "common/errno_status.h"

namespace ckptfs::client {
namespace {

constexpr char kTransportPayloadUrl[] = "ckptfs/meta-transport";

}  // namespace

absl::Status MetaClient::ReportRepair(const meta::RepairReport&) {
  return absl::UnimplementedError("ReportRepair is not implemented by this MetaClient");
}

absl::StatusOr<meta::Empty> MetaClient::ClientHeartbeat(const meta::ClientHeartbeatRequest&) {
  return absl::UnimplementedError("ClientHeartbeat is not implemented by this MetaClient");
}

absl::StatusOr<meta::ClusterStatusReply> MetaClient::ClusterStatus(
    const meta::ClusterStatusRequest&) {
  return absl::UnimplementedError("ClusterStatus is not implemented by this MetaClient");
}

absl::Status MetaTransportError(absl::StatusCode code, absl::string_view message) {
  const int err = code == absl::StatusCode::kDeadlineExceeded ? ETIMEDOUT : EIO;
  return MarkMetaTransportError(ErrnoStatusWithCode(code, err, message));
}

absl::Status MarkMetaTransportError(absl::Status status) {
  if (!status.ok()) status.SetPayload(kTransportPayloadUrl, absl::Cord("1"));
  return status;
}

bool IsMetaTransportError(const absl::Status& status) {
  return !status.ok() && status.GetPayload(kTransportPayloadUrl).has_value();
}

}  // namespace ckptfs::client
