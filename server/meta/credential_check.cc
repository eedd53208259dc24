// See credential_check.h.
#include "server/meta/credential_check.h"

#include <cerrno>

#include "absl/strings/str_cat.h"
#include "common/credential.h"
#include "common/errno_status.h"
#include "common/grpc_status.h"
#include "common/log.h"
#include "common/metrics/metrics.h"

namespace ckptfs::meta {
namespace {

// Peers remembered as already logged; past this many the memory restarts.
constexpr size_t kMaxLoggedPeers = 1024;

metrics::Counter& Refusals() {
  static metrics::Counter& counter =
      metrics::Registry::Default()
          .Counter("ckptfs_meta_auth_refusals_total",
                   "Metadata RPCs refused for a missing or wrong cluster credential.", {})
          .WithLabels({});
  return counter;
}

}  // namespace

grpc::ServerUnaryReactor* AuthenticatedMetaService::Refuse(Context* ctx, const char* rpc,
                                                           bool server_only) {
  const auto& metadata = ctx->client_metadata();
  const auto found = metadata.find(kCredentialMetadataKey);
  std::string why;
  if (found == metadata.end()) {
    why = "no credential presented";
  } else {
    const absl::string_view presented(found->second.data(), found->second.size());
    if (CredentialMatches(presented, server_credential_)) return nullptr;
    if (CredentialMatches(presented, credential_)) {
      if (!server_only) return nullptr;
      return RefuseClient(ctx, rpc);
    }
    why = "the credential presented is not this cluster's";
  }
  Refusals().Increment();
  const std::string peer = ctx->peer();
  // Once per host ("ipv4:10.0.0.7:41234" -> "ipv4:10.0.0.7": every
  // connection has its own port), and at most one line a second overall.
  const std::string host = peer.substr(0, peer.rfind(':'));
  bool first_of_host = false;
  {
    absl::MutexLock lock(&mu_);
    if (logged_peers_.size() >= kMaxLoggedPeers) logged_peers_.clear();
    first_of_host = logged_peers_.insert(host).second;
  }
  if (std::string held_back; first_of_host && log_limiter_.Allow(&held_back)) {
    CKPTFS_LOG(kWarning) << "refused metadata calls from " << peer << ": " << why
                         << " (further refusals of this host are counted in "
                            "ckptfs_meta_auth_refusals_total, not logged)"
                         << held_back;
  }
  Reactor* reactor = ctx->DefaultReactor();
  reactor->Finish(ToGrpcStatus(ErrnoStatusWithCode(
      absl::StatusCode::kUnauthenticated, EACCES,
      absl::StrCat("this metadata service wants the cluster's credential: ", why,
                   "; give --credential_file=PATH of the cluster's credential file (`ckptfs "
                   "up` makes <state dir>/credential)"))));
  return reactor;
}

grpc::ServerUnaryReactor* AuthenticatedMetaService::RefuseClient(Context* ctx, const char* rpc) {
  Refusals().Increment();
  if (std::string held_back; log_limiter_.Allow(&held_back)) {
    CKPTFS_LOG(kWarning) << "refused " << rpc << " from " << ctx->peer()
                         << ": it carried the client credential, and administering the cluster "
                            "takes the server credential"
                         << held_back;
  }
  Reactor* reactor = ctx->DefaultReactor();
  reactor->Finish(ToGrpcStatus(ErrnoStatusWithCode(
      absl::StatusCode::kPermissionDenied, EACCES,
      absl::StrCat(rpc,
                   " is for storage servers and the repairer: it wants the cluster's server "
                   "credential, not the client credential that mounts and programs hold; "
                   "give its file (`ckptfs up` makes <state dir>/server-credential) to the "
                   "daemon as --server_credential_file, to `ckptfs repair` as "
                   "--credential-file"))));
  return reactor;
}

}  // namespace ckptfs::meta
