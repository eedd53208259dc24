// See meta_server.h.
#include "server/meta/meta_server.h"

#include <cerrno>
#include <memory>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/clock.h"
#include "common/credential.h"
#include "common/errno_status.h"
#include "common/metrics/grpc_server_metrics.h"
#include "common/tcp.h"

namespace ckptfs::meta {

namespace {

// ParseHostPort, but also accepting port 0 ("pick a free port"), which
// common/tcp.h refuses because no peer can be dialed there.
absl::StatusOr<HostPort> ParseListenAddress(absl::string_view text) {
  if (absl::EndsWith(text, ":0")) {
    absl::StatusOr<HostPort> parsed =
        ParseHostPort(absl::StrCat(text.substr(0, text.size() - 2), ":1"));
    if (parsed.ok()) parsed->port = 0;
    return parsed;
  }
  return ParseHostPort(text);
}

// The storage servers as one scrape sees them: the four membership gauges
// are computed one after another, and share one ListServers (a scan of the
// store; on etcd a round trip) taken at most a second earlier.
class ServerSnapshot {
 public:
  explicit ServerSnapshot(Membership* membership) : membership_(membership) {}
  std::vector<ServerInfo> Get() {
    absl::MutexLock lock(&mu_);
    const absl::Time now = absl::Now();
    if (now - taken_ > absl::Seconds(1)) {
      absl::StatusOr<std::vector<ServerInfo>> list = membership_->ListServers();
      servers_ = list.ok() ? *std::move(list) : std::vector<ServerInfo>();
      taken_ = now;
    }
    return servers_;
  }

 private:
  Membership* const membership_;
  absl::Mutex mu_;
  absl::Time taken_ ABSL_GUARDED_BY(mu_) = absl::InfinitePast();
  std::vector<ServerInfo> servers_ ABSL_GUARDED_BY(mu_);
};

// Gauges of the storage servers as Membership knows them, computed at
// scrape time.
std::vector<metrics::CallbackHandle> AddMembershipGauges(Membership* membership) {
  metrics::Registry& registry = metrics::Registry::Default();
  metrics::Family<metrics::Gauge>& servers = registry.Gauge(
      "ckptfs_meta_storage_servers",
      "Registered storage servers, by state (alive: heartbeat within --server_timeout_s).",
      {"state"});
  metrics::Gauge& capacity =
      registry
          .Gauge("ckptfs_meta_storage_capacity_bytes",
                 "Disk capacity of the alive storage servers, as last heartbeated.", {})
          .WithLabels({});
  metrics::Gauge& used =
      registry
          .Gauge("ckptfs_meta_storage_used_bytes",
                 "Disk bytes used on the alive storage servers, as last heartbeated.", {})
          .WithLabels({});
  auto snapshot = std::make_shared<ServerSnapshot>(membership);
  auto sum = [snapshot](auto field) {
    return [snapshot, field]() -> double {
      double total = 0;
      for (const ServerInfo& info : snapshot->Get()) total += field(info);
      return total;
    };
  };
  std::vector<metrics::CallbackHandle> handles;
  handles.push_back(registry.AddGaugeCallback(
      servers.WithLabels({"alive"}), sum([](const ServerInfo& s) { return s.alive() ? 1 : 0; })));
  handles.push_back(registry.AddGaugeCallback(
      servers.WithLabels({"down"}), sum([](const ServerInfo& s) { return s.alive() ? 0 : 1; })));
  handles.push_back(registry.AddGaugeCallback(capacity, sum([](const ServerInfo& s) {
                                                return s.alive()
                                                           ? static_cast<double>(s.capacity_bytes())
                                                           : 0.0;
                                              })));
  handles.push_back(registry.AddGaugeCallback(used, sum([](const ServerInfo& s) {
                                                return s.alive()
                                                           ? static_cast<double>(s.used_bytes())
                                                           : 0.0;
                                              })));
  return handles;
}

}  // namespace

absl::StatusOr<std::unique_ptr<MetaServer>> MetaServer::Start(const Options& options,
                                                              std::unique_ptr<KvStore> store) {
  absl::StatusOr<HostPort> listen = ParseListenAddress(options.listen);
  if (!listen.ok()) {
    return ErrnoStatus(EINVAL, absl::StrCat("--listen: ", listen.status().message()));
  }
  if (listen->port != 0) {
    // gRPC binds with SO_REUSEPORT, which would let two services share a
    // port silently; a plain bind first gives a clear "address in use".
    absl::StatusOr<UniqueFd> probe = ListenTcp(*listen, 1);
    if (!probe.ok()) return probe.status();
  }

  std::unique_ptr<MetaServer> server(new MetaServer());
  if (store != nullptr) {
    server->store_ = std::move(store);
  } else {
    absl::StatusOr<std::unique_ptr<RocksDbKvStore>> rocksdb =
        RocksDbKvStore::Open(options.data_dir, RocksDbKvStore::Options{options.sync_commits});
    if (!rocksdb.ok()) return rocksdb.status();
    server->store_ = *std::move(rocksdb);
  }
  server->membership_ = std::make_unique<Membership>(server->store_.get(), options.clock,
                                                     Membership::Options{options.server_timeout});
  Namespace::Options ns_options;
  ns_options.default_chunk_size = options.default_chunk_size;
  ns_options.default_replicas = options.default_replicas;
  ns_options.default_ec = options.default_ec;
  ns_options.orphan_grace = options.orphan_grace;
  server->ns_ = std::make_unique<Namespace>(server->store_.get(), server->membership_.get(),
                                            options.clock, ns_options);
  if (absl::Status init = server->ns_->Init(); !init.ok()) return init;

  server->reclaim_options_.interval = options.reclaim_interval;
  {
    absl::MutexLock lock(&server->duties_mu_);
    server->reclaimer_ = std::make_unique<OrphanReclaimer>(
        server->ns_.get(), server->membership_.get(), server->reclaim_options_);
  }
  server->checkpoint_store_ = std::make_unique<CheckpointStore>(
      server->store_.get(), &server->ns_->inodes(), options.clock,
      CheckpointStore::Options{options.commit_timeout_s, options.orphan_grace});
  if (options.count_keys) server->checkpoint_store_->set_arrival_counter(options.count_keys);
  Committer::Options commit_options;
  commit_options.sync_timeout = options.commit_sync_timeout;
  server->committer_ = std::make_unique<Committer>(server->checkpoint_store_.get(),
                                                   server->membership_.get(), commit_options);
  CheckpointCoordinator::Options coordinator_options;
  coordinator_options.default_poll = options.commit_poll;
  coordinator_options.shared_poll = options.shared_poll;
  coordinator_options.adopt_every = options.reclaim_interval;
  server->checkpoints_ = std::make_unique<CheckpointCoordinator>(
      server->checkpoint_store_.get(), server->committer_.get(), options.clock,
      coordinator_options);
  MetaServer* self = server.get();
  server->checkpoints_->set_on_orphans([self] {
    absl::MutexLock lock(&self->duties_mu_);
    if (self->running_duties_) self->reclaimer_->Wake();
  });
  if (absl::Status resumed = server->checkpoints_->Start(); !resumed.ok()) return resumed;
  server->service_ = std::make_unique<MetaServiceImpl>(server->ns_.get(), server->membership_.get(),
                                                       server->checkpoints_.get(),
                                                       server->checkpoint_store_.get());

  grpc::ServerBuilder builder;
  builder.AddListeningPort(options.listen, grpc::InsecureServerCredentials(), &server->port_);
  builder.AddChannelArgument(GRPC_ARG_ALLOW_REUSEPORT, 0);
  if (options.credential.empty()) {
    builder.RegisterService(server->service_.get());
  } else {
    server->authenticated_ = std::make_unique<AuthenticatedMetaService>(
        server->service_.get(), options.credential, options.server_credential);
    builder.RegisterService(server->authenticated_.get());
  }
  // The SYNC and TRIM connections this process dials present the server
  // credential (the client one when the cluster has one for all).
  SetProcessCredential(options.server_credential.empty() ? options.credential
                                                         : options.server_credential);
  metrics::RpcMetricsFactory::Install(
      builder, &metrics::Registry::Default(), "ckptfs_meta",
      {google::protobuf::DescriptorPool::generated_pool()->FindServiceByName(
          MetaService::service_full_name())});
  server->server_ = builder.BuildAndStart();
  if (server->server_ == nullptr || server->port_ == 0) {
    server->server_.reset();
    return ErrnoStatus(EADDRINUSE, absl::StrCat("cannot listen on ", options.listen,
                                                ": address in use or not available"));
  }
  server->address_ = HostPort{listen->host, static_cast<uint16_t>(server->port_)}.ToString();
  if (options.duties) server->StartDuties();
  server->metric_callbacks_ = AddMembershipGauges(server->membership_.get());
  return server;
}

void MetaServer::Shutdown() {
  {
    absl::MutexLock lock(&duties_mu_);
    if (shut_down_) return;
    shut_down_ = true;
  }
  // First, so that no reactor is left unfinished: gRPC's shutdown waits for
  // every call, long polls included.
  if (checkpoints_ != nullptr) checkpoints_->Stop();
  if (server_ != nullptr) {
    // Handlers only touch the local store and finish within milliseconds, so
    // a short grace suffices; gRPC otherwise tends to sit out the whole
    // deadline while clients (mounts, storage servers) stay connected.
    server_->Shutdown(std::chrono::system_clock::now() + std::chrono::milliseconds(500));
    server_->Wait();
  }
  StopDuties();
}

void MetaServer::StartDuties() {
  absl::MutexLock lock(&duties_mu_);
  if (running_duties_ || shut_down_) return;
  if (reclaimer_started_) {
    // An OrphanReclaimer starts once: a fresh one for this period.
    old_reclaimers_.push_back(std::move(reclaimer_));
    reclaimer_ = std::make_unique<OrphanReclaimer>(ns_.get(), membership_.get(), reclaim_options_);
  }
  reclaimer_->Start();
  reclaimer_started_ = true;
  running_duties_ = true;
  // With other servers on the store: the barriers of checkpoints whose
  // server died are watched here (takes the coordinator's mu_, which is
  // never held while duties_mu_ is taken).
  checkpoints_->set_adopt_pending(true);
}

void MetaServer::StopDuties() {
  OrphanReclaimer* stopping = nullptr;
  {
    absl::MutexLock lock(&duties_mu_);
    if (!running_duties_) return;
    running_duties_ = false;
    stopping = reclaimer_.get();
    checkpoints_->set_adopt_pending(false);
  }
  // Outside duties_mu_: the join may wait for a pass's etcd and TRIM calls
  // (tens of seconds), and the coordinator's on_orphans takes duties_mu_ on
  // its timer and commit threads. `stopping` stays alive: a later
  // StartDuties moves it to old_reclaimers_, which are never destroyed
  // before the server.
  stopping->Stop();
}

OrphanReclaimer& MetaServer::reclaimer() {
  absl::MutexLock lock(&duties_mu_);
  return *reclaimer_;
}

bool MetaServer::runs_duties() {
  absl::MutexLock lock(&duties_mu_);
  return running_duties_;
}

}  // namespace ckptfs::meta
