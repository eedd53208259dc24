// MetaClient: the client's view of the metadata service, one method per RPC
// of proto/meta.proto (service MetaService).
//
// The real implementation (grpc_meta_client.h) puts a deadline on every call
// and turns gRPC statuses into absl::Status carrying the service's errno
// (common/grpc_status.h). Unit tests use it too, over an in-process channel
// to the real service (client/testing/in_process_meta.h), often wrapped in a
// decorator that counts, records and fails calls
// (client/testing/recording_meta_client.h). Code above this interface never
// sees gRPC.
//
// Transport errors (the service could not be reached, or did not answer
// before the deadline) are marked (MetaTransportError) so that callers that
// retry — a checkpoint commit waiting out a restart of the service — can
// tell them from the service's own errors, which may carry the same code
// (an aborted checkpoint's ETIMEDOUT).
//
// Thread-safety: implementations must allow concurrent calls from any thread.
#ifndef CKPTFS_CLIENT_META_CLIENT_H_
#define CKPTFS_CLIENT_META_CLIENT_H_

#include <cstdint>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "client/cancellation.h"
#include "proto/meta.pb.h"

namespace ckptfs::client {

class MetaClient {
 public:
  virtual ~MetaClient() = default;

  // Namespace. Each returns the reply of the RPC of the same name, or the
  // service's error (with its errno attached), or a transport error
  // (ETIMEDOUT after the deadline, EIO otherwise).
  virtual absl::StatusOr<meta::AttrReply> Lookup(const meta::LookupRequest& request) = 0;
  virtual absl::StatusOr<meta::AttrReply> GetAttr(const meta::InodeRequest& request) = 0;
  virtual absl::StatusOr<meta::AttrReply> SetAttr(const meta::SetAttrRequest& request) = 0;
  virtual absl::StatusOr<meta::CreateReply> Create(const meta::CreateRequest& request) = 0;
  virtual absl::StatusOr<meta::AttrReply> Mkdir(const meta::MkdirRequest& request) = 0;
  virtual absl::StatusOr<meta::AttrReply> Symlink(const meta::SymlinkRequest& request) = 0;
  virtual absl::StatusOr<meta::AttrReply> Mknod(const meta::MknodRequest& request) = 0;
  virtual absl::StatusOr<meta::AttrReply> Link(const meta::LinkRequest& request) = 0;
  virtual absl::StatusOr<meta::ReadLinkReply> ReadLink(const meta::InodeRequest& request) = 0;
  virtual absl::StatusOr<meta::Empty> Unlink(const meta::LookupRequest& request) = 0;
  virtual absl::StatusOr<meta::Empty> Rmdir(const meta::LookupRequest& request) = 0;
  virtual absl::StatusOr<meta::Empty> Rename(const meta::RenameRequest& request) = 0;
  virtual absl::StatusOr<meta::ReadDirReply> ReadDir(const meta::ReadDirRequest& request) = 0;
  virtual absl::StatusOr<meta::AttrReply> Open(const meta::OpenRequest& request) = 0;
  virtual absl::StatusOr<meta::AttrReply> CommitWrite(const meta::CommitWriteRequest& request) = 0;
  virtual absl::StatusOr<meta::Empty> ReleaseReader(const meta::ReleaseReaderRequest& request) = 0;
  virtual absl::StatusOr<meta::Empty> SetXattr(const meta::SetXattrRequest& request) = 0;
  virtual absl::StatusOr<meta::XattrValue> GetXattr(const meta::XattrRequest& request) = 0;
  virtual absl::StatusOr<meta::XattrNames> ListXattr(const meta::InodeRequest& request) = 0;
  virtual absl::StatusOr<meta::Empty> RemoveXattr(const meta::XattrRequest& request) = 0;
  virtual absl::StatusOr<meta::StatFsReply> StatFs(const meta::Empty& request) = 0;

  // Checkpoint transactions (docs/checkpoints.md).
  virtual absl::StatusOr<meta::CheckpointInfo> DeclareCheckpoint(
      const meta::DeclareCheckpointRequest& request) = 0;
  // One long poll: returns the checkpoint COMMITTED, or PENDING after about
  // request.wait_ms; an aborted checkpoint is the service's error (its
  // abort_errno, message = abort_reason). `cancel` (may be null) ends the
  // wait early with an error; the caller checks cancel->cancelled().
  virtual absl::StatusOr<meta::CheckpointInfo> CommitCheckpoint(
      const meta::CommitCheckpointRequest& request, Cancellation* cancel) = 0;
  virtual absl::StatusOr<meta::CheckpointInfo> GetCheckpoint(const meta::InodeRequest& request) = 0;
  virtual absl::StatusOr<meta::ListCheckpointsReply> ListCheckpoints(
      const meta::InodeRequest& request) = 0;
  virtual absl::StatusOr<meta::Empty> RemoveCheckpoint(
      const meta::RemoveCheckpointRequest& request) = 0;

  // Storage-server membership.
  virtual absl::StatusOr<meta::RegisterServerReply> RegisterServer(
      const meta::RegisterServerRequest& request) = 0;
  virtual absl::StatusOr<meta::Empty> Heartbeat(const meta::HeartbeatRequest& request) = 0;
  virtual absl::StatusOr<meta::ListServersReply> ListServers(const meta::Empty& request) = 0;

  // Repair (`ckptfs repair`). Moves file `ino`'s copies off storage server
  // `from`: every `from` in its stripe becomes `to`; returns the new
  // attributes. ESTALE when the stripe no longer holds `from` (moved
  // already), EINVAL when `to` is unknown, already in the stripe, or `from`
  // itself; ENOENT / EISDIR as usual.
  virtual absl::StatusOr<meta::Attr> MoveStripeServer(uint64_t ino, uint32_t from, uint32_t to) = 0;
  // Hands the service the repairer's progress for `ckptfs status` (it keeps
  // the last one). Not pure: the default answers UNIMPLEMENTED.
  virtual absl::Status ReportRepair(const meta::RepairReport& report);

  // Status (`ckptfs status`). Not pure, so implementations need not have
  // them: the defaults answer UNIMPLEMENTED.
  // Announces this client; one short try, no retry (the next heartbeat is
  // the retry).
  virtual absl::StatusOr<meta::Empty> ClientHeartbeat(const meta::ClientHeartbeatRequest& request);
  virtual absl::StatusOr<meta::ClusterStatusReply> ClusterStatus(
      const meta::ClusterStatusRequest& request);
};

// A failure to reach the metadata service or to get its answer in time:
// `code` is kUnavailable or kDeadlineExceeded (errno EIO / ETIMEDOUT).
absl::Status MetaTransportError(absl::StatusCode code, absl::string_view message);
// Marks an existing status as a transport error (keeps code, errno, message).
absl::Status MarkMetaTransportError(absl::Status status);
// True for the statuses made by the two functions above.
bool IsMetaTransportError(const absl::Status& status);

}  // namespace ckptfs::client

#endif  // CKPTFS_CLIENT_META_CLIENT_H_
