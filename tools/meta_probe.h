// Asks a metadata service which storage servers it knows (ListServers).
//
// Used by `ckptfs up` to wait until the service answers and until every
// storage server has registered, by `ckptfs status` (ClusterStatus) and by
// `ckptfs ckpt show|verify` (GetAttr for a file's layout). The channel uses
// short reconnect backoffs so a service that comes up a moment later is
// seen within a fraction of a second. Every call has a deadline and carries
// the cluster credential given (common/credential.h), if any.
// Thread-safe (gRPC stubs are).
#ifndef CKPTFS_TOOLS_META_PROBE_H_
#define CKPTFS_TOOLS_META_PROBE_H_

#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "proto/meta.grpc.pb.h"

namespace ckptfs::tools {

class MetaProbe {
 public:
  // `address` is host:port of the metadata service, or every metadata
  // server as "A,B,..." (common/meta_channel.h). Connects lazily.
  // `credential`: the cluster's; empty: none sent.
  explicit MetaProbe(const std::string& address, std::string credential = "");

  // ListServers with the given deadline; the service's error (or
  // UNAVAILABLE while nobody listens) otherwise.
  absl::StatusOr<std::vector<meta::ServerInfo>> ListServers(absl::Duration deadline);

  // ClusterStatus with the given deadline. A service of an older build
  // answers UNIMPLEMENTED.
  absl::StatusOr<meta::ClusterStatusReply> ClusterStatus(absl::Duration deadline);

  // GetAttr of inode `ino` (its size and layout), with the chunks writes
  // reached (AttrReply.written; unknown from a service that keeps none).
  absl::StatusOr<meta::AttrReply> GetAttr(uint64_t ino, absl::Duration deadline);

  const std::string& address() const { return address_; }
  // The credential the calls carry (also for the data connections of
  // tools that read chunks, ckpt_check.h).
  const std::string& credential() const { return credential_; }

 private:
  std::string address_;
  std::string credential_;
  std::unique_ptr<meta::MetaService::Stub> stub_;
};

}  // namespace ckptfs::tools

#endif  // CKPTFS_TOOLS_META_PROBE_H_
