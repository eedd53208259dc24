// See in_process_meta.h.
#include "client/testing/in_process_meta.h"

#include <cerrno>
#include <chrono>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "client/grpc_meta_client.h"
#include "common/errno_status.h"
#include "server/meta/clock.h"
#include "server/meta/keys.h"

namespace ckptfs::client::testing {
namespace {

constexpr char kAddress[] = "the in-process metadata service";
constexpr uint64_t kServerCapacity = uint64_t{1} << 40;
// ReaderHandles reads at most this many holds of one file (tests make a
// few).
constexpr size_t kMaxHolds = 100000;

meta::Namespace::Options NamespaceOptions(const InProcessMetaService::Options& options) {
  meta::Namespace::Options ns;
  ns.default_chunk_size = options.default_chunk_size;
  ns.default_replicas = options.default_replicas;
  return ns;
}

meta::Committer::Options CommitterOptions() {
  meta::Committer::Options committer;
  committer.sync_timeout = absl::Seconds(10);
  return committer;
}

}  // namespace

InProcessMetaService::InProcessMetaService(const Options& options,
                                           std::unique_ptr<StorageStandIn> storage)
    : storage_(std::move(storage)),
      // Registered servers stay alive without heartbeats.
      membership_(&store_, meta::Clock::Real(), meta::Membership::Options{absl::Hours(24 * 365)}),
      ns_(&store_, &membership_, meta::Clock::Real(), NamespaceOptions(options)),
      checkpoint_store_(&store_, &ns_.inodes(), meta::Clock::Real(),
                        meta::CheckpointStore::Options{options.commit_timeout_s}),
      committer_(&checkpoint_store_, &membership_, CommitterOptions()),
      coordinator_(&checkpoint_store_, &committer_, meta::Clock::Real(),
                   meta::CheckpointCoordinator::Options{}),
      service_(&ns_, &membership_, &coordinator_, &checkpoint_store_) {}

absl::StatusOr<std::unique_ptr<InProcessMetaService>> InProcessMetaService::Start(
    const Options& options) {
  absl::StatusOr<std::unique_ptr<StorageStandIn>> storage = StorageStandIn::Start();
  if (!storage.ok()) return storage.status();
  std::unique_ptr<InProcessMetaService> service(
      new InProcessMetaService(options, *std::move(storage)));
  if (absl::Status init = service->ns_.Init(); !init.ok()) return init;
  for (uint32_t i = 1; i <= options.storage_servers; ++i) {
    meta::RegisterServerRequest request;
    request.set_address(service->storage_->address());
    request.set_uuid(absl::StrCat("stand-in-", i));
    request.set_capacity_bytes(kServerCapacity);
    absl::StatusOr<uint32_t> id = service->RegisterServer(request);
    if (!id.ok()) return id.status();
  }
  if (absl::Status started = service->coordinator_.Start(); !started.ok()) return started;
  grpc::ServerBuilder builder;
  builder.RegisterService(&service->service_);
  service->server_ = builder.BuildAndStart();
  if (service->server_ == nullptr) {
    return ErrnoStatus(EIO, "the in-process metadata service did not start");
  }
  return service;
}

InProcessMetaService::~InProcessMetaService() {
  // First, so that no long poll is left for the server's shutdown to wait on.
  coordinator_.Stop();
  if (server_ != nullptr) {
    server_->Shutdown(std::chrono::system_clock::now() + std::chrono::milliseconds(500));
    server_->Wait();
  }
}

std::unique_ptr<MetaClient> InProcessMetaService::NewClient() {
  return std::make_unique<GrpcMetaClient>(server_->InProcessChannel(grpc::ChannelArguments()),
                                          kAddress, absl::Minutes(1), /*credential=*/"");
}

absl::StatusOr<uint32_t> InProcessMetaService::RegisterServer(
    const meta::RegisterServerRequest& request) {
  return membership_.Register(request);
}

absl::StatusOr<meta::InodeRecord> InProcessMetaService::Inode(uint64_t ino) {
  absl::StatusOr<std::optional<meta::VersionedValue>> stored = store_.Get(meta::InodeKey(ino));
  if (!stored.ok()) return stored.status();
  if (!stored->has_value()) return ErrnoStatus(ENOENT, absl::StrCat("no inode ", ino));
  meta::InodeRecord record;
  if (!record.ParseFromString((*stored)->value)) {
    return ErrnoStatus(EIO, absl::StrCat("inode ", ino, ": unreadable record"));
  }
  return record;
}

uint64_t InProcessMetaService::RecordedSize(uint64_t ino) {
  absl::StatusOr<meta::InodeRecord> record = Inode(ino);
  return record.ok() ? record->attr().size() : 0;
}

std::set<uint64_t> InProcessMetaService::WriterHandles(uint64_t ino) {
  absl::StatusOr<meta::InodeRecord> record = Inode(ino);
  if (!record.ok()) return {};
  return std::set<uint64_t>(record->writer_handles().begin(), record->writer_handles().end());
}

bool InProcessMetaService::Damaged(uint64_t ino) {
  absl::StatusOr<meta::InodeRecord> record = Inode(ino);
  return record.ok() && record->damaged();
}

std::set<uint64_t> InProcessMetaService::ReaderHandles(uint64_t ino) {
  const std::string prefix = meta::ReaderHoldPrefix(ino);
  absl::StatusOr<std::vector<meta::KeyValue>> holds = store_.Scan(prefix, "", kMaxHolds);
  std::set<uint64_t> handles;
  if (!holds.ok()) return handles;
  for (const meta::KeyValue& hold : *holds) {
    std::optional<uint64_t> handle =
        meta::DecodeU64(absl::string_view(hold.key).substr(prefix.size()));
    if (handle.has_value()) handles.insert(*handle);
  }
  return handles;
}

absl::StatusOr<meta::CheckpointInfo> InProcessMetaService::Checkpoint(uint64_t ino) {
  return coordinator_.Get(ino);
}

}  // namespace ckptfs::client::testing
