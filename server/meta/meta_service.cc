// See meta_service.h.
#include "server/meta/meta_service.h"

#include <utility>

#include "absl/time/clock.h"
#include "common/grpc_status.h"
#include "common/log.h"

namespace ckptfs::meta {
namespace {

using Context = MetaServiceImpl::Context;
using Reactor = MetaServiceImpl::Reactor;

Reactor* Finish(Context* ctx, const char* rpc, const absl::Status& status) {
  CKPTFS_LOG(kDebug) << rpc << " from " << ctx->peer() << ": "
                     << (status.ok() ? "OK" : status.ToString());
  Reactor* reactor = ctx->DefaultReactor();
  reactor->Finish(ToGrpcStatus(status));
  return reactor;
}

// Finishes with `result`'s status, storing its value through `store` on
// success.
template <typename T, typename Store>
Reactor* FinishWith(Context* ctx, const char* rpc, absl::StatusOr<T> result, Store store) {
  if (result.ok()) store(*std::move(result));
  return Finish(ctx, rpc, result.status());
}

}  // namespace

Reactor* MetaServiceImpl::Lookup(Context* ctx, const LookupRequest* request, AttrReply* reply) {
  return FinishWith(ctx, "Lookup", ns_->Lookup(request->parent(), request->name()),
                    [&](Attr attr) { *reply->mutable_attr() = std::move(attr); });
}

Reactor* MetaServiceImpl::GetAttr(Context* ctx, const InodeRequest* request, AttrReply* reply) {
  return FinishWith(ctx, "GetAttr", ns_->GetAttr(*request),
                    [&](AttrReply got) { *reply = std::move(got); });
}

Reactor* MetaServiceImpl::SetAttr(Context* ctx, const SetAttrRequest* request, AttrReply* reply) {
  return FinishWith(ctx, "SetAttr", ns_->SetAttr(*request),
                    [&](Attr attr) { *reply->mutable_attr() = std::move(attr); });
}

Reactor* MetaServiceImpl::Create(Context* ctx, const CreateRequest* request, CreateReply* reply) {
  return FinishWith(ctx, "Create", ns_->Create(*request),
                    [&](CreateReply created) { *reply = std::move(created); });
}

Reactor* MetaServiceImpl::Mkdir(Context* ctx, const MkdirRequest* request, AttrReply* reply) {
  return FinishWith(ctx, "Mkdir", ns_->Mkdir(*request),
                    [&](Attr attr) { *reply->mutable_attr() = std::move(attr); });
}

Reactor* MetaServiceImpl::Symlink(Context* ctx, const SymlinkRequest* request, AttrReply* reply) {
  return FinishWith(ctx, "Symlink", ns_->Symlink(*request),
                    [&](Attr attr) { *reply->mutable_attr() = std::move(attr); });
}

Reactor* MetaServiceImpl::Mknod(Context* ctx, const MknodRequest* request, AttrReply* reply) {
  return FinishWith(ctx, "Mknod", ns_->Mknod(*request),
                    [&](Attr attr) { *reply->mutable_attr() = std::move(attr); });
}

Reactor* MetaServiceImpl::Link(Context* ctx, const LinkRequest* request, AttrReply* reply) {
  return FinishWith(ctx, "Link", ns_->Link(*request),
                    [&](Attr attr) { *reply->mutable_attr() = std::move(attr); });
}

Reactor* MetaServiceImpl::ReadLink(Context* ctx, const InodeRequest* request,
                                   ReadLinkReply* reply) {
  return FinishWith(ctx, "ReadLink", ns_->ReadLink(request->ino()),
                    [&](std::string target) { reply->set_target(std::move(target)); });
}

Reactor* MetaServiceImpl::Unlink(Context* ctx, const LookupRequest* request, Empty*) {
  return Finish(ctx, "Unlink", ns_->Unlink(request->parent(), request->name()));
}

Reactor* MetaServiceImpl::Rmdir(Context* ctx, const LookupRequest* request, Empty*) {
  return Finish(ctx, "Rmdir", ns_->Rmdir(request->parent(), request->name()));
}

Reactor* MetaServiceImpl::Rename(Context* ctx, const RenameRequest* request, Empty*) {
  return Finish(ctx, "Rename", ns_->Rename(*request));
}

Reactor* MetaServiceImpl::ReadDir(Context* ctx, const ReadDirRequest* request,
                                  ReadDirReply* reply) {
  return FinishWith(ctx, "ReadDir",
                    ns_->ReadDir(request->ino(), request->start_after(), request->limit()),
                    [&](ReadDirReply page) { *reply = std::move(page); });
}

Reactor* MetaServiceImpl::Open(Context* ctx, const OpenRequest* request, AttrReply* reply) {
  if (request->reader_handle() != 0 && request->writer_handle() == 0 && !request->truncate()) {
    return FinishWith(ctx, "Open", ns_->OpenToRead(request->ino(), request->reader_handle()),
                      [&](Namespace::ReadOpen opened) {
                        *reply->mutable_attr() = std::move(opened.attr);
                        reply->set_reader_held(opened.held);
                      });
  }
  return FinishWith(ctx, "Open", ns_->Open(*request),
                    [&](Attr attr) { *reply->mutable_attr() = std::move(attr); });
}

Reactor* MetaServiceImpl::ReleaseReader(Context* ctx, const ReleaseReaderRequest* request, Empty*) {
  return Finish(ctx, "ReleaseReader", ns_->ReleaseReader(request->ino(), request->reader_handle()));
}

Reactor* MetaServiceImpl::CommitWrite(Context* ctx, const CommitWriteRequest* request,
                                      AttrReply* reply) {
  absl::StatusOr<Attr> attr = ns_->CommitWrite(*request);
  if (attr.ok() && request->failed()) {
    // The file is marked damaged; a PENDING checkpoint holding it can never
    // commit, so it aborts now rather than at its barrier.
    if (absl::Status aborted = checkpoints_->WriteFailed(request->ino()); !aborted.ok()) {
      CKPTFS_LOG(kWarning) << "CommitWrite: cannot abort the checkpoint of inode " << request->ino()
                           << ": " << aborted.message();
    }
  }
  return FinishWith(ctx, "CommitWrite", std::move(attr),
                    [&](Attr committed) { *reply->mutable_attr() = std::move(committed); });
}

Reactor* MetaServiceImpl::SetXattr(Context* ctx, const SetXattrRequest* request, Empty*) {
  return Finish(ctx, "SetXattr", ns_->SetXattr(*request));
}

Reactor* MetaServiceImpl::GetXattr(Context* ctx, const XattrRequest* request, XattrValue* reply) {
  return FinishWith(ctx, "GetXattr", ns_->GetXattr(request->ino(), request->name()),
                    [&](std::string value) { reply->set_value(std::move(value)); });
}

Reactor* MetaServiceImpl::ListXattr(Context* ctx, const InodeRequest* request, XattrNames* reply) {
  return FinishWith(ctx, "ListXattr", ns_->ListXattr(request->ino()),
                    [&](std::vector<std::string> names) {
                      for (std::string& name : names) reply->add_names(std::move(name));
                    });
}

Reactor* MetaServiceImpl::RemoveXattr(Context* ctx, const XattrRequest* request, Empty*) {
  return Finish(ctx, "RemoveXattr", ns_->RemoveXattr(request->ino(), request->name()));
}

Reactor* MetaServiceImpl::StatFs(Context* ctx, const Empty*, StatFsReply* reply) {
  return FinishWith(ctx, "StatFs", ns_->StatFs(),
                    [&](StatFsReply stats) { *reply = std::move(stats); });
}

Reactor* MetaServiceImpl::DeclareCheckpoint(Context* ctx, const DeclareCheckpointRequest* request,
                                            CheckpointInfo* reply) {
  return FinishWith(ctx, "DeclareCheckpoint", checkpoints_->Declare(*request),
                    [&](CheckpointInfo info) {
                      if (info.state() == PENDING) board_.SeeCheckpoint(info.ino());
                      *reply = std::move(info);
                    });
}

Reactor* MetaServiceImpl::CommitCheckpoint(Context* ctx, const CommitCheckpointRequest* request,
                                           CheckpointInfo* reply) {
  Reactor* reactor = ctx->DefaultReactor();
  board_.SeeCheckpoint(request->ino());
  // Runs once, on whichever thread ends the wait (on this one before
  // Commit returns for a no_wait arrival); `reply` and `reactor` live until
  // Finish.
  auto finish = [reactor, reply, ino = request->ino(),
                 rank = request->rank()](absl::StatusOr<CheckpointInfo> result) {
    if (result.ok()) *reply = *std::move(result);
    const absl::Status& status = result.status();
    CKPTFS_LOG(kDebug) << "CommitCheckpoint of rank " << rank << " of inode " << ino << ": "
                       << (status.ok() ? CheckpointState_Name(reply->state()) : status.ToString());
    if (IsServiceStoppingError(status)) {
      reactor->Finish(grpc::Status(grpc::StatusCode::UNAVAILABLE, std::string(status.message())));
      return;
    }
    reactor->Finish(ToGrpcStatus(status));
  };
  if (request->no_wait()) {
    checkpoints_->CommitNoWait(request->ino(), request->rank(), std::move(finish));
  } else {
    checkpoints_->Commit(request->ino(), request->rank(), request->wait_ms(), std::move(finish));
  }
  return reactor;
}

Reactor* MetaServiceImpl::GetCheckpoint(Context* ctx, const InodeRequest* request,
                                        CheckpointInfo* reply) {
  return FinishWith(ctx, "GetCheckpoint", checkpoints_->Get(request->ino()),
                    [&](CheckpointInfo info) {
                      if (info.state() == PENDING) board_.SeeCheckpoint(info.ino());
                      *reply = std::move(info);
                    });
}

Reactor* MetaServiceImpl::ListCheckpoints(Context* ctx, const InodeRequest* request,
                                          ListCheckpointsReply* reply) {
  return FinishWith(ctx, "ListCheckpoints", checkpoints_->List(request->ino()),
                    [&](ListCheckpointsReply list) {
                      for (const CheckpointInfo& c : list.checkpoints()) {
                        if (c.state() == PENDING) board_.SeeCheckpoint(c.ino());
                      }
                      *reply = std::move(list);
                    });
}

Reactor* MetaServiceImpl::RemoveCheckpoint(Context* ctx, const RemoveCheckpointRequest* request,
                                           Empty*) {
  const CheckpointStore::RemoveOnly only{request->expected_ino(), request->expected_state()};
  return Finish(ctx, "RemoveCheckpoint",
                checkpoints_->Remove(request->parent(), request->name(),
                                     request->expected_ino() != 0 ? &only : nullptr));
}

Reactor* MetaServiceImpl::RegisterServer(Context* ctx, const RegisterServerRequest* request,
                                         RegisterServerReply* reply) {
  absl::StatusOr<uint32_t> id = membership_->Register(*request);
  if (id.ok()) {
    CKPTFS_LOG(kInfo) << "storage server " << *id << " registered at " << request->address();
  }
  return FinishWith(ctx, "RegisterServer", std::move(id),
                    [&](uint32_t server_id) { reply->set_server_id(server_id); });
}

Reactor* MetaServiceImpl::Heartbeat(Context* ctx, const HeartbeatRequest* request, Empty*) {
  absl::Status status = membership_->Heartbeat(*request);
  if (status.ok()) board_.ServerHeartbeat(*request, absl::ToUnixMillis(absl::Now()));
  return Finish(ctx, "Heartbeat", status);
}

Reactor* MetaServiceImpl::ListServers(Context* ctx, const Empty*, ListServersReply* reply) {
  return FinishWith(ctx, "ListServers", membership_->ListServers(),
                    [&](std::vector<ServerInfo> servers) {
                      for (ServerInfo& server : servers) *reply->add_servers() = std::move(server);
                    });
}

Reactor* MetaServiceImpl::MoveStripeServer(Context* ctx, const MoveStripeServerRequest* request,
                                           AttrReply* reply) {
  absl::StatusOr<Attr> attr =
      ns_->MoveStripeServer(request->ino(), request->from_server_id(), request->to_server_id());
  if (attr.ok()) {
    CKPTFS_LOG(kInfo) << "the copies of inode " << request->ino() << " moved from storage server "
                      << request->from_server_id() << " to " << request->to_server_id();
  }
  return FinishWith(ctx, "MoveStripeServer", std::move(attr),
                    [&](Attr moved) { *reply->mutable_attr() = std::move(moved); });
}

Reactor* MetaServiceImpl::ReportRepair(Context* ctx, const ReportRepairRequest* request, Empty*) {
  board_.RepairReported(request->report(), absl::ToUnixMillis(absl::Now()));
  return Finish(ctx, "ReportRepair", absl::OkStatus());
}

Reactor* MetaServiceImpl::ClientHeartbeat(Context* ctx, const ClientHeartbeatRequest* request,
                                          Empty*) {
  if (request->client().client_id().empty()) {
    return Finish(ctx, "ClientHeartbeat",
                  absl::InvalidArgumentError("ClientHeartbeat without a client_id"));
  }
  board_.ClientHeartbeat(*request, ctx->peer(), absl::ToUnixMillis(absl::Now()));
  return Finish(ctx, "ClientHeartbeat", absl::OkStatus());
}

Reactor* MetaServiceImpl::ClusterStatus(Context* ctx, const ClusterStatusRequest*,
                                        ClusterStatusReply* reply) {
  return FinishWith(ctx, "ClusterStatus", BuildClusterStatus(),
                    [&](ClusterStatusReply status) { *reply = std::move(status); });
}

}  // namespace ckptfs::meta
