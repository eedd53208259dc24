// GrpcMetaClient: MetaClient over gRPC to a ckptfs-meta process.
//
// Every call carries a deadline of `rpc_timeout` from its start (a
// CommitCheckpoint long poll: its wait_ms plus rpc_timeout). A status of
// UNAVAILABLE (service restarting, connection refused) is retried with
// backoff until that deadline for calls that are safe to repeat; the rest
// fail at once (see the comment in grpc_meta_client.cc for which and why).
// Errors come back with the service's errno (common/grpc_status.h); a
// transport failure names the RPC and the address and is marked
// (IsMetaTransportError). Every call carries the cluster credential given
// (common/credential.h); a service that wants another refuses with EACCES
// saying so, which is not retried.
//
// Thread-safety: thread-safe; one channel is shared by all calls.
#ifndef CKPTFS_CLIENT_GRPC_META_CLIENT_H_
#define CKPTFS_CLIENT_GRPC_META_CLIENT_H_

#include <grpcpp/channel.h>

#include <cstdint>
#include <memory>
#include <string>

#include "absl/time/time.h"
#include "client/meta_client.h"
#include "common/credential.h"
#include "proto/meta.grpc.pb.h"

namespace ckptfs::client {

class GrpcMetaClient : public MetaClient {
 public:
  // Does not connect yet: the first call does (gRPC channels are lazy).
  // `credential`: the cluster's (common/credential.h); empty: none sent.
  // Defaults to the one in $CKPTFS_CREDENTIAL_FILE, as ClientOptions does.
  GrpcMetaClient(std::string address, absl::Duration rpc_timeout,
                 std::string credential = CredentialFromEnvironment());
  // Over `channel` as given (e.g. one into a server in this process:
  // client/testing/in_process_meta.h); `address` only names it in errors.
  GrpcMetaClient(std::shared_ptr<grpc::Channel> channel, std::string address,
                 absl::Duration rpc_timeout, std::string credential);

  absl::StatusOr<meta::AttrReply> Lookup(const meta::LookupRequest& request) override;
  absl::StatusOr<meta::AttrReply> GetAttr(const meta::InodeRequest& request) override;
  absl::StatusOr<meta::AttrReply> SetAttr(const meta::SetAttrRequest& request) override;
  absl::StatusOr<meta::CreateReply> Create(const meta::CreateRequest& request) override;
  absl::StatusOr<meta::AttrReply> Mkdir(const meta::MkdirRequest& request) override;
  absl::StatusOr<meta::AttrReply> Symlink(const meta::SymlinkRequest& request) override;
  absl::StatusOr<meta::AttrReply> Mknod(const meta::MknodRequest& request) override;
  absl::StatusOr<meta::AttrReply> Link(const meta::LinkRequest& request) override;
  absl::StatusOr<meta::ReadLinkReply> ReadLink(const meta::InodeRequest& request) override;
  absl::StatusOr<meta::Empty> Unlink(const meta::LookupRequest& request) override;
  absl::StatusOr<meta::Empty> Rmdir(const meta::LookupRequest& request) override;
  absl::StatusOr<meta::Empty> Rename(const meta::RenameRequest& request) override;
  absl::StatusOr<meta::ReadDirReply> ReadDir(const meta::ReadDirRequest& request) override;
  absl::StatusOr<meta::AttrReply> Open(const meta::OpenRequest& request) override;
  absl::StatusOr<meta::AttrReply> CommitWrite(const meta::CommitWriteRequest& request) override;
  absl::StatusOr<meta::Empty> ReleaseReader(const meta::ReleaseReaderRequest& request) override;
  absl::StatusOr<meta::Empty> SetXattr(const meta::SetXattrRequest& request) override;
  absl::StatusOr<meta::XattrValue> GetXattr(const meta::XattrRequest& request) override;
  absl::StatusOr<meta::XattrNames> ListXattr(const meta::InodeRequest& request) override;
  absl::StatusOr<meta::Empty> RemoveXattr(const meta::XattrRequest& request) override;
  absl::StatusOr<meta::StatFsReply> StatFs(const meta::Empty& request) override;
  absl::StatusOr<meta::CheckpointInfo> DeclareCheckpoint(
      const meta::DeclareCheckpointRequest& request) override;
  absl::StatusOr<meta::CheckpointInfo> CommitCheckpoint(
      const meta::CommitCheckpointRequest& request, Cancellation* cancel) override;
  absl::StatusOr<meta::CheckpointInfo> GetCheckpoint(const meta::InodeRequest& request) override;
  absl::StatusOr<meta::ListCheckpointsReply> ListCheckpoints(
      const meta::InodeRequest& request) override;
  absl::StatusOr<meta::Empty> RemoveCheckpoint(
      const meta::RemoveCheckpointRequest& request) override;
  absl::StatusOr<meta::RegisterServerReply> RegisterServer(
      const meta::RegisterServerRequest& request) override;
  absl::StatusOr<meta::Empty> Heartbeat(const meta::HeartbeatRequest& request) override;
  absl::StatusOr<meta::ListServersReply> ListServers(const meta::Empty& request) override;
  absl::StatusOr<meta::Attr> MoveStripeServer(uint64_t ino, uint32_t from, uint32_t to) override;
  absl::Status ReportRepair(const meta::RepairReport& report) override;
  absl::StatusOr<meta::Empty> ClientHeartbeat(const meta::ClientHeartbeatRequest& request) override;
  absl::StatusOr<meta::ClusterStatusReply> ClusterStatus(
      const meta::ClusterStatusRequest& request) override;

  const std::string& address() const { return address_; }

 private:
  using Stub = meta::MetaService::Stub;
  template <typename Request, typename Reply>
  using Method = grpc::Status (Stub::*)(grpc::ClientContext*, const Request&, Reply*);

  enum class Retry { kNo, kOnUnavailable };

  // `timeout`: the deadline from now (rpc_timeout_ when zero). `cancel`
  // (may be null) cancels the call in flight and the backoff sleeps.
  // `resent` (may be null) is set to whether the request was sent more than
  // once (a retry on UNAVAILABLE), for a caller that reads a resend's
  // answer differently.
  template <typename Request, typename Reply>
  absl::StatusOr<Reply> Call(const char* rpc, Retry retry, Method<Request, Reply> method,
                             const Request& request, absl::Duration timeout = absl::ZeroDuration(),
                             Cancellation* cancel = nullptr, bool* resent = nullptr);

  const std::string address_;
  const absl::Duration rpc_timeout_;
  const std::string credential_;
  std::unique_ptr<Stub> stub_;
};

}  // namespace ckptfs::client

#endif  // CKPTFS_CLIENT_GRPC_META_CLIENT_H_
