// See meta_probe.h.
#include "tools/meta_probe.h"

#include <grpcpp/grpcpp.h>

#include <utility>

#include "common/credential.h"
#include "common/grpc_status.h"
#include "common/meta_channel.h"

namespace ckptfs::tools {

MetaProbe::MetaProbe(const std::string& address, std::string credential)
    : address_(address), credential_(std::move(credential)) {
  grpc::ChannelArguments args;
  args.SetInt(GRPC_ARG_INITIAL_RECONNECT_BACKOFF_MS, 100);
  args.SetInt(GRPC_ARG_MIN_RECONNECT_BACKOFF_MS, 100);
  args.SetInt(GRPC_ARG_MAX_RECONNECT_BACKOFF_MS, 500);
  // Several metadata servers ("A,B"): one channel that reaches whichever
  // serves. A list MetaChannelTarget rejects is dialled as written (calls
  // fail with UNAVAILABLE); the commands check their --meta first.
  absl::StatusOr<std::string> target = MetaChannelTarget(address);
  stub_ = meta::MetaService::NewStub(grpc::CreateCustomChannel(
      target.ok() ? *target : address, grpc::InsecureChannelCredentials(), args));
}

absl::StatusOr<std::vector<meta::ServerInfo>> MetaProbe::ListServers(absl::Duration deadline) {
  grpc::ClientContext context;
  context.set_deadline(absl::ToChronoTime(absl::Now() + deadline));
  AttachCredential(context, credential_);
  meta::Empty request;
  meta::ListServersReply reply;
  grpc::Status status = stub_->ListServers(&context, request, &reply);
  if (!status.ok()) return FromGrpcStatus(status, "ListServers to " + address_);
  return std::vector<meta::ServerInfo>(reply.servers().begin(), reply.servers().end());
}

absl::StatusOr<meta::ClusterStatusReply> MetaProbe::ClusterStatus(absl::Duration deadline) {
  grpc::ClientContext context;
  context.set_deadline(absl::ToChronoTime(absl::Now() + deadline));
  AttachCredential(context, credential_);
  meta::ClusterStatusRequest request;
  meta::ClusterStatusReply reply;
  grpc::Status status = stub_->ClusterStatus(&context, request, &reply);
  if (!status.ok()) return FromGrpcStatus(status, "ClusterStatus to " + address_);
  return reply;
}

absl::StatusOr<meta::AttrReply> MetaProbe::GetAttr(uint64_t ino, absl::Duration deadline) {
  grpc::ClientContext context;
  context.set_deadline(absl::ToChronoTime(absl::Now() + deadline));
  AttachCredential(context, credential_);
  meta::InodeRequest request;
  request.set_ino(ino);
  request.set_with_written(true);
  meta::AttrReply reply;
  grpc::Status status = stub_->GetAttr(&context, request, &reply);
  if (!status.ok()) return FromGrpcStatus(status, "GetAttr to " + address_);
  return reply;
}

}  // namespace ckptfs::tools
