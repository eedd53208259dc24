// See registration.h.
#include "server/storage/registration.h"

#include <grpcpp/grpcpp.h>

#include <algorithm>
#include <cerrno>
#include <filesystem>
#include <system_error>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "common/credential.h"
#include "common/errno_status.h"
#include "common/grpc_status.h"
#include "common/log.h"
#include "common/meta_channel.h"

namespace ckptfs::storage {
namespace {

constexpr absl::Duration kInitialBackoff = absl::Milliseconds(100);
// Repeated failures are logged once per this many attempts.
constexpr int kLogEvery = 20;

// The data directory as an absolute path without symlinks, which a client
// on this host can open (client/local_chunk_transport.h); empty when it cannot
// be resolved (clients then read over TCP only).
std::string AbsoluteDataDir(const std::string& data_dir) {
  std::error_code error;
  std::filesystem::path resolved = std::filesystem::canonical(data_dir, error);
  return error ? std::string() : resolved.string();
}

}  // namespace

std::unique_ptr<Registration> Registration::Start(Options options, const ChunkStore& store) {
  std::unique_ptr<Registration> registration(new Registration(std::move(options), store));
  registration->thread_ = std::thread([r = registration.get()] { r->Run(); });
  return registration;
}

Registration::Registration(Options options, const ChunkStore& store)
    : options_(std::move(options)), store_(store) {
  // gRPC's own reconnect backoff grows to minutes by default; a metadata
  // service that starts late or restarts must be found within max_backoff.
  grpc::ChannelArguments args;
  const int max_backoff_ms = static_cast<int>(absl::ToInt64Milliseconds(options_.max_backoff));
  args.SetInt(GRPC_ARG_INITIAL_RECONNECT_BACKOFF_MS, std::min(100, max_backoff_ms));
  // The minimum backoff is also gRPC's connect timeout: 1 s lets a connect to
  // a busy metadata server finish.
  args.SetInt(GRPC_ARG_MIN_RECONNECT_BACKOFF_MS, std::min(1000, max_backoff_ms));
  args.SetInt(GRPC_ARG_MAX_RECONNECT_BACKOFF_MS, max_backoff_ms);
  // Several metadata servers ("A,B"): one channel over all of them, which
  // reaches whichever serves, starting at an entry drawn once per process so
  // that storage servers spread over servers that all serve
  // (common/meta_channel.h); a failed heartbeat or
  // registration is retried and so finds a standby that took over. A list
  // MetaChannelTarget rejects is dialled as written: every attempt fails and
  // the log names it.
  absl::StatusOr<std::string> target = SpreadMetaChannelTarget(options_.meta_address);
  stub_ = meta::MetaService::NewStub(grpc::CreateCustomChannel(
      target.ok() ? *target : options_.meta_address, grpc::InsecureChannelCredentials(), args));
}

void Registration::Stop() {
  if (!stop_.HasBeenNotified()) stop_.Notify();
  {
    absl::MutexLock lock(&mu_);
    if (in_flight_ != nullptr) in_flight_->TryCancel();
  }
  if (thread_.joinable()) thread_.join();
}

// Runs `call` on `context` as the call in flight (see in_flight_): not at
// all once Stop was called.
grpc::Status Registration::InFlight(grpc::ClientContext& context,
                                    const std::function<grpc::Status()>& call) {
  {
    absl::MutexLock lock(&mu_);
    if (stop_.HasBeenNotified()) return grpc::Status(grpc::StatusCode::CANCELLED, "stopping");
    in_flight_ = &context;
  }
  grpc::Status status = call();
  absl::MutexLock lock(&mu_);
  in_flight_ = nullptr;
  return status;
}

std::optional<uint32_t> Registration::server_id() {
  absl::MutexLock lock(&mu_);
  return server_id_;
}

// WaitForReadyNote: calls wait for a connection until their deadline rather
// than failing at once while the channel has none. gRPC's synchronous API
// advances a connection attempt only while a thread polls the channel,
// which a waiting call does; with fail-fast calls and sleeps between them,
// a metadata server that took over was reached only through gRPC's 5 s
// backup poller, if at all (see client/grpc_meta_client.cc). A call that
// never reached a server was not applied, so waiting is safe for
// RegisterServer too.
absl::StatusOr<uint32_t> Registration::Register() {
  meta::RegisterServerRequest request;
  request.set_address(options_.data_address);
  request.set_uuid(options_.uuid);
  request.set_identity_secret(options_.identity_secret);
  request.set_data_dir(AbsoluteDataDir(store_.data_dir()));
  if (auto space = store_.Space(); space.ok()) {
    request.set_capacity_bytes(space->capacity_bytes);
    request.set_used_bytes(space->used_bytes);
  }
  meta::RegisterServerReply reply;
  grpc::ClientContext context;
  context.set_deadline(absl::ToChronoTime(absl::Now() + options_.rpc_deadline));
  context.set_wait_for_ready(true);  // see WaitForReadyNote
  AttachCredential(context, options_.credential);
  const grpc::Status status =
      InFlight(context, [&] { return stub_->RegisterServer(&context, request, &reply); });
  if (!status.ok()) return FromGrpcStatus(status, "RegisterServer");
  return reply.server_id();
}

absl::Status Registration::Heartbeat(uint32_t server_id) {
  meta::HeartbeatRequest request;
  request.set_server_id(server_id);
  if (auto space = store_.Space(); space.ok()) {
    request.set_capacity_bytes(space->capacity_bytes);
    request.set_used_bytes(space->used_bytes);
  }
  if (options_.load) {
    const Options::Load load = options_.load();
    request.set_load_reported(true);
    request.set_connections(load.connections);
    request.set_bytes_read_total(load.bytes_read_total);
    request.set_bytes_written_total(load.bytes_written_total);
  }
  if (options_.scrub) *request.mutable_scrub() = options_.scrub();
  meta::Empty reply;
  grpc::ClientContext context;
  context.set_deadline(absl::ToChronoTime(absl::Now() + options_.rpc_deadline));
  context.set_wait_for_ready(true);  // see WaitForReadyNote
  AttachCredential(context, options_.credential);
  return FromGrpcStatus(
      InFlight(context, [&] { return stub_->Heartbeat(&context, request, &reply); }), "Heartbeat");
}

void Registration::Run() {
  std::optional<uint32_t> id;
  absl::Duration backoff = kInitialBackoff;
  int failures = 0;
  for (;;) {
    absl::Duration wait;
    if (!id.has_value()) {
      auto registered = Register();
      if (registered.ok()) {
        id = *registered;
        {
          absl::MutexLock lock(&mu_);
          server_id_ = id;
        }
        failures = 0;
        backoff = kInitialBackoff;
        CKPTFS_LOG(kInfo) << "registered with the metadata service " << options_.meta_address
                          << " as server " << *id;
        if (options_.on_registered) options_.on_registered(*id);
        wait = options_.heartbeat_interval;
      } else {
        if (failures++ % kLogEvery == 0) {
          CKPTFS_LOG(kWarning) << "cannot register with the metadata service "
                               << options_.meta_address << " (attempt " << failures
                               << "), retrying: " << registered.status().message();
        }
        wait = backoff;
        backoff = std::min(backoff * 2, options_.max_backoff);
      }
    } else {
      absl::Status status = Heartbeat(*id);
      if (status.ok()) {
        failures = 0;
        wait = options_.heartbeat_interval;
      } else if (status.code() == absl::StatusCode::kNotFound ||
                 ErrnoFromStatus(status) == ENOENT) {
        CKPTFS_LOG(kWarning) << "the metadata service does not know server " << *id
                             << " any more; registering again";
        id.reset();
        wait = absl::ZeroDuration();
      } else {
        if (failures++ % kLogEvery == 0) {
          CKPTFS_LOG(kWarning) << "heartbeat to " << options_.meta_address
                               << " failed: " << status.message();
        }
        wait = options_.heartbeat_interval;
      }
      if (options_.after_heartbeat) options_.after_heartbeat();
    }
    if (stop_.WaitForNotificationWithTimeout(wait)) return;
  }
}

}  // namespace ckptfs::storage
