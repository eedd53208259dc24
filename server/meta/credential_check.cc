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

grpc::ServerUnaryReactor* AuthenticatedMetaService::Refuse(Context* ctx) {
  const auto& metadata = ctx->client_metadata();
  const auto found = metadata.find(kCredentialMetadataKey);
  std::string why;
  if (found == metadata.end()) {
    why = "no credential presented";
  } else if (CredentialMatches(absl::string_view(found->second.data(), found->second.size()),
                               credential_)) {
    return nullptr;
  } else {
    why = "the credential presented is not this cluster's";
  }
  Refusals().Increment();
  const std::string peer = ctx->peer();
  {
    absl::MutexLock lock(&mu_);
    if (logged_peers_.size() >= kMaxLoggedPeers) logged_peers_.clear();
    if (logged_peers_.insert(peer).second) {
      CKPTFS_LOG(kWarning) << "refused metadata calls from " << peer << ": " << why
                           << " (further refusals of this peer are counted in "
                              "ckptfs_meta_auth_refusals_total, not logged)";
    }
  }
  Reactor* reactor = ctx->DefaultReactor();
  reactor->Finish(ToGrpcStatus(ErrnoStatusWithCode(
      absl::StatusCode::kUnauthenticated, EACCES,
      absl::StrCat("this metadata service wants the cluster's credential: ", why,
                   "; give --credential_file=PATH of the cluster's credential file (`ckptfs "
                   "up` makes <state dir>/credential)"))));
  return reactor;
}

}  // namespace ckptfs::meta
