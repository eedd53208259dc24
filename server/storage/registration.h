// Registration: makes the metadata service know this storage server and keep
// believing it is alive.
//
// A background thread calls RegisterServer (address, uuid, capacity) until
// the metadata service answers — retrying with exponential backoff, while the
// data path already serves — then Heartbeat every heartbeat_interval with
// the current capacity and use. A NOT_FOUND heartbeat (the service lost or
// expired us) leads to registering again. Every RPC has a deadline. The
// server id is kept in memory only, for logs; the uuid is the identity.
//
// Thread-safety: server_id() from any thread. Stop() (also run by the
// destructor) from one thread.
#ifndef CKPTFS_SERVER_STORAGE_REGISTRATION_H_
#define CKPTFS_SERVER_STORAGE_REGISTRATION_H_

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <thread>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "absl/synchronization/notification.h"
#include "absl/time/time.h"
#include "proto/meta.grpc.pb.h"
#include "server/storage/chunk_store.h"

namespace ckptfs::storage {

class Registration {
 public:
  struct Options {
    // The metadata service: host:port, or every metadata server as
    // "A,B,..." (numeric addresses; see common/meta_channel.h).
    std::string meta_address;
    std::string data_address;  // host:port clients dial for data
    std::string uuid;          // from the data directory
    // The data directory's server.secret (data_dir.h): proves the uuid is
    // this directory's when the server registers again, from any address.
    std::string identity_secret;
    // The cluster credential, sent with every call; empty: none.
    std::string credential;
    absl::Duration heartbeat_interval = absl::Seconds(2);
    absl::Duration rpc_deadline = absl::Seconds(5);
    absl::Duration max_backoff = absl::Seconds(5);
    // Called on the registration thread after each successful
    // (re)registration with the id the service assigned.
    std::function<void(uint32_t server_id)> on_registered;
    // The server's load, sent with each heartbeat for `ckptfs status`
    // (HeartbeatRequest.load_reported and the fields after it). Called on
    // the registration thread; must be cheap (read counters). Unset: no
    // load is reported.
    struct Load {
      uint32_t connections = 0;          // data connections open now
      uint64_t bytes_read_total = 0;     // chunk bytes served since start
      uint64_t bytes_written_total = 0;  // chunk bytes stored since start
    };
    std::function<Load()> load;
    // The scrubber's totals (HeartbeatRequest.scrub), sent with each
    // heartbeat; called on the registration thread, must be cheap. Unset:
    // none is reported.
    std::function<meta::ScrubReport()> scrub;
    // Called on the registration thread after every heartbeat, answered or
    // not (not while unregistered): cheap housekeeping
    // (ChunkStore::SweepIfDue). Unset: nothing.
    std::function<void()> after_heartbeat;
  };

  // Starts the registration thread. `store` (for capacity and use) must
  // outlive the Registration.
  static std::unique_ptr<Registration> Start(Options options, const ChunkStore& store);

  Registration(const Registration&) = delete;
  Registration& operator=(const Registration&) = delete;
  ~Registration() { Stop(); }

  // Stops the thread (an RPC in flight finishes or hits its deadline first).
  // Idempotent.
  void Stop();

  // The id of the latest successful registration, if any.
  std::optional<uint32_t> server_id();

 private:
  Registration(Options options, const ChunkStore& store);
  void Run();
  // One attempt; the assigned id or the RPC's failure.
  absl::StatusOr<uint32_t> Register();
  absl::Status Heartbeat(uint32_t server_id);
  // Runs `call` (an RPC on `context`) so that Stop can cancel it; CANCELLED
  // without running it once Stop was called.
  grpc::Status InFlight(grpc::ClientContext& context, const std::function<grpc::Status()>& call);

  const Options options_;
  const ChunkStore& store_;
  std::unique_ptr<meta::MetaService::Stub> stub_;
  absl::Notification stop_;
  std::thread thread_;
  absl::Mutex mu_;  // leaf lock
  std::optional<uint32_t> server_id_ ABSL_GUARDED_BY(mu_);
  // The call in flight (it waits for a connection up to its deadline):
  // Stop cancels it instead of waiting it out.
  grpc::ClientContext* in_flight_ ABSL_GUARDED_BY(mu_) = nullptr;
};

}  // namespace ckptfs::storage

#endif  // CKPTFS_SERVER_STORAGE_REGISTRATION_H_
