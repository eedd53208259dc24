// Membership: the storage servers of the cluster — registration, heartbeats,
// and which of them are alive. Everything lives in the KvStore (s/<id>,
// u/<uuid>, c/next_server); nothing is kept only in memory, so a restarted or
// second metadata server sees the same membership.
//
// A server is identified by the uuid of its data directory: registering the
// same uuid again returns the same id (its address and capacity updated); a
// new uuid gets the next id. A server is alive while its last heartbeat (or
// registration) is at most `server_timeout` old on the service's clock —
// counting from this Membership's creation at the earliest: a metadata
// server that starts (or takes over from a dead one, whose heartbeats the
// store still holds) gives the storage servers one timeout to find it
// before calling them down.
//
// Thread-safety: thread-safe. `kv` and `clock` are borrowed and must outlive
// the Membership.
#ifndef CKPTFS_SERVER_META_MEMBERSHIP_H_
#define CKPTFS_SERVER_META_MEMBERSHIP_H_

#include <cstdint>
#include <optional>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "proto/meta.pb.h"
#include "server/meta/clock.h"
#include "server/meta/kv_store.h"

namespace ckptfs::meta {

class Membership {
 public:
  struct Options {
    absl::Duration server_timeout = absl::Seconds(10);
  };

  Membership(KvStore* kv, Clock* clock, const Options& options)
      : kv_(kv), clock_(clock), options_(options), started_ms_(clock->NowMs()) {}

  // Registers (or re-registers) a server; returns its id (>= 1). EPERM when
  // the uuid was registered with another identity secret.
  // EINVAL for an address that is not host:port or an empty/oversized uuid.
  absl::StatusOr<uint32_t> Register(const RegisterServerRequest& request);

  // Records a heartbeat and the server's capacity. ENOENT (NOT_FOUND) for an
  // unknown id, telling the server to register again.
  absl::Status Heartbeat(const HeartbeatRequest& request);

  // Every registered server in id order, with `alive` computed now.
  absl::StatusOr<std::vector<ServerInfo>> ListServers();
  // Only the alive ones, in id order.
  absl::StatusOr<std::vector<ServerInfo>> AliveServers();
  // One server (alive computed), nullopt if the id was never registered.
  absl::StatusOr<std::optional<ServerInfo>> GetServer(uint32_t id);

 private:
  bool IsAlive(const ServerInfo& info);

  KvStore* const kv_;
  Clock* const clock_;
  const Options options_;
  const int64_t started_ms_;  // the grace: heartbeats count from here at least
};

}  // namespace ckptfs::meta

#endif  // CKPTFS_SERVER_META_MEMBERSHIP_H_
