// AuthenticatedMetaService: the metadata service behind the cluster's
// credentials. It is what the gRPC server registers when the service has a
// credential: every RPC first checks the call's metadata
// (kCredentialMetadataKey, common/credential.h) and only then forwards to the
// real service; a call without a credential, or with another one, is
// finished with UNAUTHENTICATED (errno EACCES in error_details) and a message
// naming the flag to give, and no handler runs.
//
// Two credentials: the client credential (mounts and programs) and the
// server credential (storage servers and the repairer). The RPCs that
// administer the cluster — RegisterServer, Heartbeat, MoveStripeServer,
// ReportRepair — take only the server credential: a client credential gets
// PERMISSION_DENIED (EACCES), so a training node cannot pose as a storage
// server or move stripes. Every other RPC takes either. Without a server
// credential of its own the service takes the client credential for all.
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
  // REQUIRES: `credential` is not empty. An empty `server_credential`:
  // `credential` serves for the cluster's administration too.
  AuthenticatedMetaService(MetaService::CallbackService* service, std::string credential,
                           std::string server_credential = "")
      : service_(service),
        credential_(std::move(credential)),
        server_credential_(server_credential.empty() ? credential_ : std::move(server_credential)) {
  }

  using Context = grpc::CallbackServerContext;
  using Reactor = grpc::ServerUnaryReactor;

#define CKPTFS_AUTHENTICATED_RPC(Rpc, Request, Reply)                                \
  Reactor* Rpc(Context* ctx, const Request* request, Reply* reply) override {        \
    if (Reactor* refused = Refuse(ctx, #Rpc, /*server_only=*/false)) return refused; \
    return service_->Rpc(ctx, request, reply);                                       \
  }
#define CKPTFS_SERVER_RPC(Rpc, Request, Reply)                                      \
  Reactor* Rpc(Context* ctx, const Request* request, Reply* reply) override {       \
    if (Reactor* refused = Refuse(ctx, #Rpc, /*server_only=*/true)) return refused; \
    return service_->Rpc(ctx, request, reply);                                      \
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
  CKPTFS_SERVER_RPC(RegisterServer, RegisterServerRequest, RegisterServerReply)
  CKPTFS_SERVER_RPC(Heartbeat, HeartbeatRequest, Empty)
  CKPTFS_AUTHENTICATED_RPC(ListServers, Empty, ListServersReply)
  CKPTFS_SERVER_RPC(MoveStripeServer, MoveStripeServerRequest, AttrReply)
  CKPTFS_SERVER_RPC(ReportRepair, ReportRepairRequest, Empty)
  CKPTFS_AUTHENTICATED_RPC(ClientHeartbeat, ClientHeartbeatRequest, Empty)
  CKPTFS_AUTHENTICATED_RPC(ClusterStatus, ClusterStatusRequest, ClusterStatusReply)
#undef CKPTFS_AUTHENTICATED_RPC
#undef CKPTFS_SERVER_RPC

 private:
  // Null when the call carries a credential RPC `rpc` takes (the server
  // credential only, when `server_only`); otherwise the call's reactor,
  // already finished with UNAUTHENTICATED or PERMISSION_DENIED.
  Reactor* Refuse(Context* ctx, const char* rpc, bool server_only);
  // Finishes a call of server RPC `rpc` that carried the client credential.
  Reactor* RefuseClient(Context* ctx, const char* rpc);

  MetaService::CallbackService* const service_;
  const std::string credential_;
  const std::string server_credential_;
  absl::Mutex mu_;
  // Hosts whose refusal was logged (bounded: forgotten all at once when full).
  absl::flat_hash_set<std::string> logged_peers_ ABSL_GUARDED_BY(mu_);
  LogLimiter log_limiter_{absl::Seconds(1)};  // and at most a line a second
};

}  // namespace ckptfs::meta

#endif  // CKPTFS_SERVER_META_CREDENTIAL_CHECK_H_
