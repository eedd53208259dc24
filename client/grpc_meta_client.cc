// See grpc_meta_client.h.
//
// Which calls are retried on UNAVAILABLE: UNAVAILABLE may also come back
// after the service applied a request (the reply was lost), so only calls
// whose repetition leaves the same outcome are retried:
//   - every read (Lookup, GetAttr, ReadLink, ReadDir, GetXattr, ListXattr,
//     StatFs, ListServers, ClusterStatus); ClientHeartbeat is never retried
//     (the next heartbeat is the retry);
//   - Open (truncate to 0 twice is truncate once; the caller trimmed storage
//     first; registering a writer or a reader twice is harmless),
//     CommitWrite (size = max(current, size) is idempotent; releasing a
//     writer twice is harmless), ReleaseReader (releasing twice is
//     harmless), SetAttr (sets absolute values), Heartbeat, and
//     ReportRepair (the service keeps the last report: twice is once);
//   - DeclareCheckpoint (re-declaring with the same N changes nothing),
//     CommitCheckpoint (a rank's second commit waits for the same outcome),
//     GetCheckpoint and ListCheckpoints;
//   - Create when it carries a writer id: the service recognises a resent
//     exclusive Create by that id (registered on the file by the first
//     attempt) and answers it as the first attempt was (created, the same
//     inode); a resent non-exclusive one opens the file the first attempt
//     created (reported as not created: trimming it trims nothing, no
//     handle has written to it) and registering the same id twice is
//     harmless;
//   - MoveStripeServer, whose resend after a lost reply finds the stripe
//     moved and answers ESTALE: an ESTALE that answers a resend is taken
//     for the first attempt's success when the file's stripe now holds
//     `to` and no `from` (GetAttr), and returned as is otherwise.
// Not retried, because a repeat after a lost reply reports a wrong error or
// does something twice: Create without a writer id (EEXIST for the file we
// created, with O_EXCL), Mkdir, Symlink, Mknod and Link (EEXIST), Unlink and Rmdir
// (ENOENT after success), Rename (ENOENT, or a second rename), SetXattr and
// RemoveXattr (EEXIST / ENODATA with the create/replace flags),
// RemoveCheckpoint (ENOENT after success), RegisterServer (could hand out a
// second id).
//
// Every call waits for a connection (wait_for_ready) until its deadline
// instead of failing at once while the channel has none. A call that never
// reached a server cannot have been applied, so this holds for the calls
// that are not retried too, and it is what makes a failover work: gRPC's
// synchronous API makes progress on a connection attempt only while some
// thread polls the channel, which a waiting call does. With fail-fast calls
// and pauses between them, the attempts to reach the server that took over
// were cut off by their connect timeout for want of polling (only gRPC's
// 5 s backup poller looked at them), and a mount's calls failed for up to
// its whole 30 s deadline after a standby took over.
#include "client/grpc_meta_client.h"

#include <grpcpp/grpcpp.h>

#include <algorithm>
#include <cerrno>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "common/credential.h"
#include "common/errno_status.h"
#include "common/grpc_status.h"
#include "common/meta_channel.h"

namespace ckptfs::client {
namespace {

// `address` may list several metadata servers ("A,B"): one pick_first
// channel over all of them, starting at an entry drawn once per process so
// that the clients of servers that all serve (--etcd_shared) spread over them
// (common/meta_channel.h). A list MetaChannelTarget rejects is passed to gRPC
// as written, so every call waits out its deadline and fails naming it.
std::shared_ptr<grpc::Channel> MakeChannel(const std::string& address) {
  absl::StatusOr<std::string> target = SpreadMetaChannelTarget(address);
  grpc::ChannelArguments args;
  // Notice a dead service within seconds instead of waiting on TCP.
  args.SetInt(GRPC_ARG_KEEPALIVE_TIME_MS, 10000);
  args.SetInt(GRPC_ARG_KEEPALIVE_TIMEOUT_MS, 5000);
  // Reconnect quickly after a restart of the service. The minimum backoff
  // is also gRPC's connect timeout: 1 s lets a connect to a busy server
  // finish.
  args.SetInt(GRPC_ARG_INITIAL_RECONNECT_BACKOFF_MS, 100);
  args.SetInt(GRPC_ARG_MAX_RECONNECT_BACKOFF_MS, 1000);
  args.SetInt(GRPC_ARG_MIN_RECONNECT_BACKOFF_MS, 1000);
  return grpc::CreateCustomChannel(target.ok() ? *target : address,
                                   grpc::InsecureChannelCredentials(), args);
}

}  // namespace

GrpcMetaClient::GrpcMetaClient(std::string address, absl::Duration rpc_timeout,
                               std::string credential)
    : address_(std::move(address)),
      rpc_timeout_(rpc_timeout),
      credential_(std::move(credential)),
      stub_(meta::MetaService::NewStub(MakeChannel(address_))) {}

GrpcMetaClient::GrpcMetaClient(std::shared_ptr<grpc::Channel> channel, std::string address,
                               absl::Duration rpc_timeout, std::string credential)
    : address_(std::move(address)),
      rpc_timeout_(rpc_timeout),
      credential_(std::move(credential)),
      stub_(meta::MetaService::NewStub(std::move(channel))) {}

template <typename Request, typename Reply>
absl::StatusOr<Reply> GrpcMetaClient::Call(const char* rpc, Retry retry,
                                           Method<Request, Reply> method, const Request& request,
                                           absl::Duration timeout, Cancellation* cancel,
                                           bool* resent) {
  if (resent != nullptr) *resent = false;
  const absl::Time deadline =
      absl::Now() + (timeout > absl::ZeroDuration() ? timeout : rpc_timeout_);
  absl::Duration backoff = absl::Milliseconds(50);
  while (true) {
    grpc::ClientContext context;
    context.set_deadline(absl::ToChronoTime(deadline));
    context.set_wait_for_ready(true);  // see the top of this file
    AttachCredential(context, credential_);
    Reply reply;
    grpc::Status status;
    {
      Cancellation::OnCancel on_cancel(cancel, [&context] { context.TryCancel(); });
      status = ((*stub_).*method)(&context, request, &reply);
    }
    if (status.ok()) return reply;
    // error_details carries the service's errno: without it, the status
    // comes from gRPC itself (no connection, deadline, cancelled).
    const bool transport = status.error_details().empty();
    const absl::Duration left = deadline - absl::Now();
    if (retry == Retry::kOnUnavailable && status.error_code() == grpc::StatusCode::UNAVAILABLE &&
        transport && left > absl::ZeroDuration()) {
      const absl::Duration pause = std::min(backoff, left);
      if (cancel != nullptr) {
        if (cancel->WaitFor(pause)) {
          return MarkMetaTransportError(
              FromGrpcStatus(status, absl::StrCat(rpc, " at ", address_)));
        }
      } else {
        absl::SleepFor(pause);
      }
      backoff = std::min(backoff * 2, absl::Seconds(1));
      if (resent != nullptr) *resent = true;
      continue;
    }
    // Calls wait for a connection, so a service that is down shows up as
    // the deadline: say so rather than only "Deadline Exceeded".
    const std::string context_text =
        transport && status.error_code() == grpc::StatusCode::DEADLINE_EXCEEDED
            ? absl::StrCat(
                  rpc, " at ", address_, " (no answer from the metadata service within ",
                  absl::FormatDuration(timeout > absl::ZeroDuration() ? timeout : rpc_timeout_),
                  ")")
            : absl::StrCat(rpc, " at ", address_);
    absl::Status error = FromGrpcStatus(status, context_text);
    return transport ? MarkMetaTransportError(std::move(error)) : error;
  }
}

absl::StatusOr<meta::AttrReply> GrpcMetaClient::Lookup(const meta::LookupRequest& request) {
  return Call("Lookup", Retry::kOnUnavailable, &Stub::Lookup, request);
}
absl::StatusOr<meta::AttrReply> GrpcMetaClient::GetAttr(const meta::InodeRequest& request) {
  return Call("GetAttr", Retry::kOnUnavailable, &Stub::GetAttr, request);
}
absl::StatusOr<meta::AttrReply> GrpcMetaClient::SetAttr(const meta::SetAttrRequest& request) {
  return Call("SetAttr", Retry::kOnUnavailable, &Stub::SetAttr, request);
}
absl::StatusOr<meta::CreateReply> GrpcMetaClient::Create(const meta::CreateRequest& request) {
  return Call("Create", request.writer_handle() != 0 ? Retry::kOnUnavailable : Retry::kNo,
              &Stub::Create, request);
}
absl::StatusOr<meta::AttrReply> GrpcMetaClient::Mkdir(const meta::MkdirRequest& request) {
  return Call("Mkdir", Retry::kNo, &Stub::Mkdir, request);
}
absl::StatusOr<meta::AttrReply> GrpcMetaClient::Symlink(const meta::SymlinkRequest& request) {
  return Call("Symlink", Retry::kNo, &Stub::Symlink, request);
}
absl::StatusOr<meta::AttrReply> GrpcMetaClient::Mknod(const meta::MknodRequest& request) {
  return Call("Mknod", Retry::kNo, &Stub::Mknod, request);
}
absl::StatusOr<meta::AttrReply> GrpcMetaClient::Link(const meta::LinkRequest& request) {
  return Call("Link", Retry::kNo, &Stub::Link, request);
}
absl::StatusOr<meta::ReadLinkReply> GrpcMetaClient::ReadLink(const meta::InodeRequest& request) {
  return Call("ReadLink", Retry::kOnUnavailable, &Stub::ReadLink, request);
}
absl::StatusOr<meta::Empty> GrpcMetaClient::Unlink(const meta::LookupRequest& request) {
  return Call("Unlink", Retry::kNo, &Stub::Unlink, request);
}
absl::StatusOr<meta::Empty> GrpcMetaClient::Rmdir(const meta::LookupRequest& request) {
  return Call("Rmdir", Retry::kNo, &Stub::Rmdir, request);
}
absl::StatusOr<meta::Empty> GrpcMetaClient::Rename(const meta::RenameRequest& request) {
  return Call("Rename", Retry::kNo, &Stub::Rename, request);
}
absl::StatusOr<meta::ReadDirReply> GrpcMetaClient::ReadDir(const meta::ReadDirRequest& request) {
  return Call("ReadDir", Retry::kOnUnavailable, &Stub::ReadDir, request);
}
absl::StatusOr<meta::AttrReply> GrpcMetaClient::Open(const meta::OpenRequest& request) {
  return Call("Open", Retry::kOnUnavailable, &Stub::Open, request);
}
absl::StatusOr<meta::AttrReply> GrpcMetaClient::CommitWrite(
    const meta::CommitWriteRequest& request) {
  return Call("CommitWrite", Retry::kOnUnavailable, &Stub::CommitWrite, request);
}

absl::StatusOr<meta::Empty> GrpcMetaClient::ReleaseReader(
    const meta::ReleaseReaderRequest& request) {
  return Call("ReleaseReader", Retry::kOnUnavailable, &Stub::ReleaseReader, request);
}

absl::StatusOr<meta::Empty> GrpcMetaClient::SetXattr(const meta::SetXattrRequest& request) {
  return Call("SetXattr", Retry::kNo, &Stub::SetXattr, request);
}
absl::StatusOr<meta::XattrValue> GrpcMetaClient::GetXattr(const meta::XattrRequest& request) {
  return Call("GetXattr", Retry::kOnUnavailable, &Stub::GetXattr, request);
}
absl::StatusOr<meta::XattrNames> GrpcMetaClient::ListXattr(const meta::InodeRequest& request) {
  return Call("ListXattr", Retry::kOnUnavailable, &Stub::ListXattr, request);
}
absl::StatusOr<meta::Empty> GrpcMetaClient::RemoveXattr(const meta::XattrRequest& request) {
  return Call("RemoveXattr", Retry::kNo, &Stub::RemoveXattr, request);
}
absl::StatusOr<meta::StatFsReply> GrpcMetaClient::StatFs(const meta::Empty& request) {
  return Call("StatFs", Retry::kOnUnavailable, &Stub::StatFs, request);
}
absl::StatusOr<meta::CheckpointInfo> GrpcMetaClient::DeclareCheckpoint(
    const meta::DeclareCheckpointRequest& request) {
  return Call("DeclareCheckpoint", Retry::kOnUnavailable, &Stub::DeclareCheckpoint, request);
}
absl::StatusOr<meta::CheckpointInfo> GrpcMetaClient::CommitCheckpoint(
    const meta::CommitCheckpointRequest& request, Cancellation* cancel) {
  // The service holds the call up to wait_ms; the deadline leaves it the
  // usual rpc_timeout beyond that to answer (the commit itself, once all
  // ranks arrived, syncs the storage servers).
  return Call("CommitCheckpoint", Retry::kOnUnavailable, &Stub::CommitCheckpoint, request,
              absl::Milliseconds(request.wait_ms()) + rpc_timeout_, cancel);
}
absl::StatusOr<meta::CheckpointInfo> GrpcMetaClient::GetCheckpoint(
    const meta::InodeRequest& request) {
  return Call("GetCheckpoint", Retry::kOnUnavailable, &Stub::GetCheckpoint, request);
}
absl::StatusOr<meta::ListCheckpointsReply> GrpcMetaClient::ListCheckpoints(
    const meta::InodeRequest& request) {
  return Call("ListCheckpoints", Retry::kOnUnavailable, &Stub::ListCheckpoints, request);
}
absl::StatusOr<meta::Empty> GrpcMetaClient::RemoveCheckpoint(
    const meta::RemoveCheckpointRequest& request) {
  return Call("RemoveCheckpoint", Retry::kNo, &Stub::RemoveCheckpoint, request);
}
absl::StatusOr<meta::RegisterServerReply> GrpcMetaClient::RegisterServer(
    const meta::RegisterServerRequest& request) {
  return Call("RegisterServer", Retry::kNo, &Stub::RegisterServer, request);
}
absl::StatusOr<meta::Empty> GrpcMetaClient::Heartbeat(const meta::HeartbeatRequest& request) {
  return Call("Heartbeat", Retry::kOnUnavailable, &Stub::Heartbeat, request);
}
absl::StatusOr<meta::ListServersReply> GrpcMetaClient::ListServers(const meta::Empty& request) {
  return Call("ListServers", Retry::kOnUnavailable, &Stub::ListServers, request);
}

absl::StatusOr<meta::Attr> GrpcMetaClient::MoveStripeServer(uint64_t ino, uint32_t from,
                                                            uint32_t to) {
  meta::MoveStripeServerRequest request;
  request.set_ino(ino);
  request.set_from_server_id(from);
  request.set_to_server_id(to);
  bool resent = false;
  absl::StatusOr<meta::AttrReply> moved =
      Call("MoveStripeServer", Retry::kOnUnavailable, &Stub::MoveStripeServer, request,
           absl::ZeroDuration(), nullptr, &resent);
  if (moved.ok()) return std::move(*moved->mutable_attr());
  if (!resent || IsMetaTransportError(moved.status()) ||
      ErrnoFromStatus(moved.status()) != ESTALE) {
    return moved.status();
  }
  // A resend found the stripe moved: by the first attempt, whose reply was
  // lost, if the stripe now reads as that attempt left it.
  meta::InodeRequest stat;
  stat.set_ino(ino);
  absl::StatusOr<meta::AttrReply> now = GetAttr(stat);
  if (!now.ok()) return moved.status();
  const auto& stripe = now->attr().layout().stripe();
  const bool holds_to = std::find(stripe.begin(), stripe.end(), to) != stripe.end();
  const bool holds_from = std::find(stripe.begin(), stripe.end(), from) != stripe.end();
  if (holds_to && !holds_from) return std::move(*now->mutable_attr());
  return moved.status();
}

absl::Status GrpcMetaClient::ReportRepair(const meta::RepairReport& report) {
  meta::ReportRepairRequest request;
  *request.mutable_report() = report;
  return Call("ReportRepair", Retry::kOnUnavailable, &Stub::ReportRepair, request).status();
}

absl::StatusOr<meta::Empty> GrpcMetaClient::ClientHeartbeat(
    const meta::ClientHeartbeatRequest& request) {
  // Short and never retried: a heartbeat must not queue behind a slow
  // service; the next one is the retry.
  return Call("ClientHeartbeat", Retry::kNo, &Stub::ClientHeartbeat, request,
              std::min(rpc_timeout_, absl::Seconds(2)));
}

absl::StatusOr<meta::ClusterStatusReply> GrpcMetaClient::ClusterStatus(
    const meta::ClusterStatusRequest& request) {
  return Call("ClusterStatus", Retry::kOnUnavailable, &Stub::ClusterStatus, request);
}

}  // namespace ckptfs::client
