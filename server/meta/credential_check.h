// AuthenticatedMetaService: the metadata service behind the cluster
// credential. It is what the gRPC server registers when the service has a
// credential: every RPC first checks the call's metadata
// (kCredentialMetadataKey, common/credential.h) and only then forwards to the
// real service; a call without the credential, or with another one, is
// finished with UNAUTHENTICATED (errno EACCES in error_details) and a message
// naming the flag to give, and no handler runs.
//
// gRPC 1.51 offers no earlier place that can refuse on an insecure server:
// an AuthMetadataProcessor needs secure server credentials, and a server
// interceptor cannot stop a call from reaching its handler. This forwarding
// service is the one place instead: each RPC of MetaService has one line
// here (an RPC added to the proto without one answers UNIMPLEMENTED, which
// tests/auth's check of every method catches).
//
// Refusals are logged once per peer (host:port of the gRPC connection) as
// warnings, and counted (ckptfs_meta_auth_refusals_total).
//
// Thread-safety: thread-safe; the forwarded-to service is borrowed and must
// outlive this one.
#ifndef CKPTFS_SERVER_META_CREDENTIAL_CHECK_H_
#define CKPTFS_SERVER_META_CREDENTIAL_CHECK_H_

#include <grpcpp/grpcpp.h>

#include <string>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_set.h"
#include "absl/synchronization/mutex.h"
#include "common/log_limiter.h"
#include "proto/meta.grpc.pb.h"

namespace ckptfs::meta {

class AuthenticatedMetaService final : public MetaService::CallbackService {
 public:
  // REQUIRES: `credential` is not empty.
  AuthenticatedMetaService(MetaService::CallbackService* service, std::string credential)
      : service_(service), credential_(std::move(credential)) {}

  using Context = grpc::CallbackServerContext;
  using Reactor = grpc::ServerUnaryReactor;

#define CKPTFS_AUTHENTICATED_RPC(Rpc, Request, Reply)                         \
  Reactor* Rpc(Context* ctx, const Request* request, Reply* reply) override { \
    if (Reactor* refused = Refuse(ctx)) return refused;                       \
    return service_->Rpc(ctx, request, reply);                                \
  }
  CKPTFS_AUTHENTICATED_RPC(Lookup, LookupRequest, AttrReply)
  CKPTFS_AUTHENTICATED_RPC(GetAttr, InodeRequest, AttrReply)
  CKPTFS_AUTHENTICATED_RPC(SetAttr, SetAttrRequest, AttrReply)
  CKPTFS_AUTHENTICATED_RPC(Create, CreateRequest, CreateReply)
  CKPTFS_AUTHENTICATED_RPC(Mkdir, MkdirRequest, AttrReply)
  CKPTFS_AUTHENTICATED_RPC(Symlink, SymlinkRequest, AttrReply)
  CKPTFS_AUTHENTICATED_RPC(Mknod, MknodRequest, AttrReply)
  CKPTFS_AUTHENTICATED_RPC(Link, LinkRequest, AttrReply)
  CKPTFS_AUTHENTICATED_RPC(ReadLink, InodeRequest, ReadLinkReply)
  CKPTFS_AUTHENTICATED_RPC(Unlink, LookupRequest, Empty)
  CKPTFS_AUTHENTICATED_RPC(Rmdir, LookupRequest, Empty)
  CKPTFS_AUTHENTICATED_RPC(Rename, RenameRequest, Empty)
  CKPTFS_AUTHENTICATED_RPC(ReadDir, ReadDirRequest, ReadDirReply)
  CKPTFS_AUTHENTICATED_RPC(Open, OpenRequest, AttrReply)
  CKPTFS_AUTHENTICATED_RPC(CommitWrite, CommitWriteRequest, AttrReply)
  CKPTFS_AUTHENTICATED_RPC(ReleaseReader, ReleaseReaderRequest, Empty)
  CKPTFS_AUTHENTICATED_RPC(SetXattr, SetXattrRequest, Empty)
  CKPTFS_AUTHENTICATED_RPC(GetXattr, XattrRequest, XattrValue)
  CKPTFS_AUTHENTICATED_RPC(ListXattr, InodeRequest, XattrNames)
  CKPTFS_AUTHENTICATED_RPC(RemoveXattr, XattrRequest, Empty)
  CKPTFS_AUTHENTICATED_RPC(StatFs, Empty, StatFsReply)
  CKPTFS_AUTHENTICATED_RPC(DeclareCheckpoint, DeclareCheckpointRequest, CheckpointInfo)
  CKPTFS_AUTHENTICATED_RPC(CommitCheckpoint, CommitCheckpointRequest, CheckpointInfo)
  CKPTFS_AUTHENTICATED_RPC(GetCheckpoint, InodeRequest, CheckpointInfo)
  CKPTFS_AUTHENTICATED_RPC(ListCheckpoints, InodeRequest, ListCheckpointsReply)
  CKPTFS_AUTHENTICATED_RPC(RemoveCheckpoint, RemoveCheckpointRequest, Empty)
  CKPTFS_AUTHENTICATED_RPC(RegisterServer, RegisterServerRequest, RegisterServerReply)
  CKPTFS_AUTHENTICATED_RPC(Heartbeat, HeartbeatRequest, Empty)
  CKPTFS_AUTHENTICATED_RPC(ListServers, Empty, ListServersReply)
  CKPTFS_AUTHENTICATED_RPC(MoveStripeServer, MoveStripeServerRequest, AttrReply)
  CKPTFS_AUTHENTICATED_RPC(ReportRepair, ReportRepairRequest, Empty)
  CKPTFS_AUTHENTICATED_RPC(ClientHeartbeat, ClientHeartbeatRequest, Empty)
  CKPTFS_AUTHENTICATED_RPC(ClusterStatus, ClusterStatusRequest, ClusterStatusReply)
#undef CKPTFS_AUTHENTICATED_RPC

 private:
  // Null when the call carries the credential; otherwise the call's reactor,
  // already finished with UNAUTHENTICATED.
  Reactor* Refuse(Context* ctx);

  MetaService::CallbackService* const service_;
  const std::string credential_;
  absl::Mutex mu_;
  // Hosts whose refusal was logged (bounded: forgotten all at once when full).
  absl::flat_hash_set<std::string> logged_peers_ ABSL_GUARDED_BY(mu_);
  LogLimiter log_limiter_{absl::Seconds(1)};  // and at most a line a second
};

}  // namespace ckptfs::meta

#endif  // CKPTFS_SERVER_META_CREDENTIAL_CHECK_H_
