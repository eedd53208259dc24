// EtcdClient: connections to every member of an etcd cluster and the one
// retry loop every etcd call of the metadata service goes through.
//
// A call runs on the current member; after a connection-level failure
// (UNAVAILABLE: the member is down, has no leader or lost the request;
// DEADLINE_EXCEEDED) it moves to the next member and tries again, with a
// short growing pause, until `call_timeout` runs out. Other failures are
// final and come back as EIO naming the member and etcd's message (with the
// etcd flag to raise when etcd refused a Txn for its size).
//
// Thread-safety: thread-safe (gRPC stubs are; the current member is an
// atomic index).
#ifndef CKPTFS_SERVER_META_ETCD_ETCD_CLIENT_H_
#define CKPTFS_SERVER_META_ETCD_ETCD_CLIENT_H_

#include <grpcpp/grpcpp.h>

#include <atomic>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "proto/etcd/rpc.grpc.pb.h"

namespace ckptfs::meta {

class EtcdClient {
 public:
  // TLS to the members: their certificates are checked against the CA,
  // and the client presents its own (members started with
  // --client-cert-auth refuse a client without one).
  struct Tls {
    std::string ca_pem;
    std::string cert_pem;  // with key_pem, or both empty
    std::string key_pem;
  };

  struct Options {
    // host:port of each member's client URL, tried in order.
    std::vector<std::string> endpoints;
    // Unset: plain-text gRPC.
    std::optional<Tls> tls;
    // Deadline of one call over all its attempts.
    absl::Duration call_timeout = absl::Seconds(30);
    // Deadline of one attempt on one member.
    absl::Duration attempt_timeout = absl::Seconds(5);
  };

  struct Member {
    std::string address;
    std::shared_ptr<grpc::Channel> channel;
    std::unique_ptr<etcdserverpb::KV::Stub> kv;
    std::unique_ptr<etcdserverpb::Lease::Stub> lease;
  };

  // "a:1, http://b:2" -> {"a:1", "b:2"}; InvalidArgument for an empty list or
  // an entry that is not host:port.
  static absl::StatusOr<std::vector<std::string>> ParseEndpoints(absl::string_view list);

  // The TLS settings of the --etcd_ca_file, --etcd_cert_file and
  // --etcd_key_file flags: nullopt when all are empty; the files' contents
  // otherwise. A certificate without its key (or the other way round), a
  // certificate without a CA, or a file that cannot be read fails naming
  // the flag.
  static absl::StatusOr<std::optional<Tls>> LoadTls(const std::string& ca_file,
                                                    const std::string& cert_file,
                                                    const std::string& key_file);

  // Channels connect lazily. REQUIRES: options.endpoints is not empty.
  explicit EtcdClient(Options options);
  EtcdClient(const EtcdClient&) = delete;
  EtcdClient& operator=(const EtcdClient&) = delete;

  const Options& options() const { return options_; }

  // Runs `attempt` (see the file comment). Before each retry, `applied` (may
  // be empty) is asked whether the failed attempt took effect after all;
  // true ends the call with OK, an error ends it with that error.
  absl::Status Call(absl::string_view what,
                    const std::function<grpc::Status(Member&, grpc::ClientContext&)>& attempt,
                    const std::function<absl::StatusOr<bool>()>& applied = nullptr);

  // KV.Range over [key, range_end) (range_end empty: just `key`), at most
  // `limit` keys (0: all), linearizable.
  absl::StatusOr<etcdserverpb::RangeResponse> Range(const std::string& key,
                                                    const std::string& range_end, int64_t limit);
  // Lease.LeaseGrant of `ttl` (whole seconds); the lease id.
  absl::StatusOr<int64_t> GrantLease(absl::Duration ttl);
  // Lease.LeaseRevoke (best effort, one attempt per member).
  void RevokeLease(int64_t id);

  // The member calls go to now (for keep-alive streams, which are not
  // retried through Call).
  Member& current_member();
  // Moves calls to the member after `member`.
  void SkipMember(const Member& member);

 private:
  const Options options_;
  std::vector<std::unique_ptr<Member>> members_;
  std::atomic<size_t> current_{0};
};

// The smallest key greater than every key starting with `prefix` (etcd's
// range_end for a prefix); "\0" (to the end) when there is none.
std::string EtcdPrefixEnd(std::string prefix);

}  // namespace ckptfs::meta

#endif  // CKPTFS_SERVER_META_ETCD_ETCD_CLIENT_H_
