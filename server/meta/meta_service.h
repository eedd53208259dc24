// MetaServiceImpl: the gRPC face of the metadata service. A thin adapter:
// each RPC calls the matching Namespace, Membership or CheckpointCoordinator
// operation and finishes its reactor with ToGrpcStatus(status), so the errno
// travels in error_details (common/grpc_status.h).
//
// Uses the callback API: every handler runs on the gRPC thread that received
// the call, blocking on nothing but the local KV store (a transaction that
// keeps conflicting backs off for at most a few ms per retry). All but one
// finish the call's default reactor before returning. CommitCheckpoint, a
// long poll, hands its reactor to the checkpoint's barrier and returns; the
// coordinator finishes it from its own threads when the checkpoint ends or
// the poll runs out (an aborted checkpoint: the abort_errno in
// error_details, abort_reason as the message; the service stopping:
// UNAVAILABLE without an errno, which clients retry). A no_wait commit is
// finished before the handler returns, like the other RPCs. Every call is
// logged at debug level.
//
// ClientHeartbeat and ClusterStatus (`ckptfs status`) use the service's own
// StatusBoard (status_board.h), in memory only: no KV write on either path.
// The storage Heartbeat also records the load and scrub totals a server
// reports there, ReportRepair keeps the repairer's last report, and the
// checkpoint RPCs note the checkpoints they see, so ClusterStatus lists the
// pending ones without a scan.
//
// MoveStripeServer (the repairer's) is Namespace::MoveStripeServer. The
// repair report is kept by the metadata server that received it only: with
// several servers on one store (--etcd_shared) a status answered by another
// one shows none, or an older one. That is enough for a display, and it
// keeps the KV store free of a write every few seconds for one.
//
// Thread-safety: thread-safe (handlers run concurrently). Namespace,
// Membership and the coordinator are borrowed and must outlive the service.
#ifndef CKPTFS_SERVER_META_META_SERVICE_H_
#define CKPTFS_SERVER_META_META_SERVICE_H_

#include <grpcpp/grpcpp.h>

#include "proto/meta.grpc.pb.h"
#include "server/meta/checkpoint/coordinator.h"
#include "server/meta/membership.h"
#include "server/meta/namespace.h"
#include "server/meta/status_board.h"

namespace ckptfs::meta {

class MetaServiceImpl final : public MetaService::CallbackService {
 public:
  // `pending_index` (may be null) lists every pending checkpoint for
  // ClusterStatus, also those declared before a restart and not touched
  // since; without it status shows the checkpoints this process has seen.
  MetaServiceImpl(Namespace* ns, Membership* membership, CheckpointCoordinator* checkpoints,
                  CheckpointStore* pending_index = nullptr)
      : ns_(ns),
        membership_(membership),
        checkpoints_(checkpoints),
        pending_index_(pending_index) {}

  using Context = grpc::CallbackServerContext;
  using Reactor = grpc::ServerUnaryReactor;

  Reactor* Lookup(Context* ctx, const LookupRequest* request, AttrReply* reply) override;
  Reactor* GetAttr(Context* ctx, const InodeRequest* request, AttrReply* reply) override;
  Reactor* SetAttr(Context* ctx, const SetAttrRequest* request, AttrReply* reply) override;
  Reactor* Create(Context* ctx, const CreateRequest* request, CreateReply* reply) override;
  Reactor* Mkdir(Context* ctx, const MkdirRequest* request, AttrReply* reply) override;
  Reactor* Symlink(Context* ctx, const SymlinkRequest* request, AttrReply* reply) override;
  Reactor* Mknod(Context* ctx, const MknodRequest* request, AttrReply* reply) override;
  Reactor* Link(Context* ctx, const LinkRequest* request, AttrReply* reply) override;
  Reactor* ReadLink(Context* ctx, const InodeRequest* request, ReadLinkReply* reply) override;
  Reactor* Unlink(Context* ctx, const LookupRequest* request, Empty* reply) override;
  Reactor* Rmdir(Context* ctx, const LookupRequest* request, Empty* reply) override;
  Reactor* Rename(Context* ctx, const RenameRequest* request, Empty* reply) override;
  Reactor* ReadDir(Context* ctx, const ReadDirRequest* request, ReadDirReply* reply) override;
  Reactor* Open(Context* ctx, const OpenRequest* request, AttrReply* reply) override;
  Reactor* CommitWrite(Context* ctx, const CommitWriteRequest* request, AttrReply* reply) override;
  Reactor* ReleaseReader(Context* ctx, const ReleaseReaderRequest* request, Empty* reply) override;
  Reactor* SetXattr(Context* ctx, const SetXattrRequest* request, Empty* reply) override;
  Reactor* GetXattr(Context* ctx, const XattrRequest* request, XattrValue* reply) override;
  Reactor* ListXattr(Context* ctx, const InodeRequest* request, XattrNames* reply) override;
  Reactor* RemoveXattr(Context* ctx, const XattrRequest* request, Empty* reply) override;
  Reactor* StatFs(Context* ctx, const Empty* request, StatFsReply* reply) override;
  Reactor* DeclareCheckpoint(Context* ctx, const DeclareCheckpointRequest* request,
                             CheckpointInfo* reply) override;
  Reactor* CommitCheckpoint(Context* ctx, const CommitCheckpointRequest* request,
                            CheckpointInfo* reply) override;
  Reactor* GetCheckpoint(Context* ctx, const InodeRequest* request, CheckpointInfo* reply) override;
  Reactor* ListCheckpoints(Context* ctx, const InodeRequest* request,
                           ListCheckpointsReply* reply) override;
  Reactor* RemoveCheckpoint(Context* ctx, const RemoveCheckpointRequest* request,
                            Empty* reply) override;
  Reactor* RegisterServer(Context* ctx, const RegisterServerRequest* request,
                          RegisterServerReply* reply) override;
  Reactor* Heartbeat(Context* ctx, const HeartbeatRequest* request, Empty* reply) override;
  Reactor* ListServers(Context* ctx, const Empty* request, ListServersReply* reply) override;
  Reactor* MoveStripeServer(Context* ctx, const MoveStripeServerRequest* request,
                            AttrReply* reply) override;
  Reactor* ReportRepair(Context* ctx, const ReportRepairRequest* request, Empty* reply) override;
  Reactor* ClientHeartbeat(Context* ctx, const ClientHeartbeatRequest* request,
                           Empty* reply) override;
  Reactor* ClusterStatus(Context* ctx, const ClusterStatusRequest* request,
                         ClusterStatusReply* reply) override;

  // The ClusterStatus reply as of now (also for tests).
  absl::StatusOr<ClusterStatusReply> BuildClusterStatus();

 private:
  Namespace* const ns_;
  Membership* const membership_;
  CheckpointCoordinator* const checkpoints_;
  CheckpointStore* const pending_index_;  // may be null
  StatusBoard board_;
};

}  // namespace ckptfs::meta

#endif  // CKPTFS_SERVER_META_META_SERVICE_H_
