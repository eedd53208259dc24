// InProcessMetaService: the real metadata service (server/meta:
// MetaServiceImpl over Namespace, Membership and the CheckpointCoordinator)
// on an in-memory KV store (server/meta/memory_kv_store.h), served by a gRPC
// server in this process that has no port: clients reach it through
// grpc::Server::InProcessChannel. For unit tests of libckptfs and of what is
// built on it (fuse/, bench/), so that they run against the service's own
// rules rather than a copy of them.
//
// Storage servers: Options::storage_servers are registered with Membership
// at the start (ids 1..n, in order, capacity 1 TiB each), all at the
// address of one StorageStandIn (storage_stand_in.h), which answers the
// SYNC a checkpoint commit sends each server holding chunks of the
// checkpoint; the chunks themselves live wherever the test keeps them
// (FakeChunkTransport). RegisterServer adds or moves servers later. Servers
// never time out (no heartbeats are needed).
//
// Nothing runs in the background but the coordinator's threads: no orphan
// reclaimer (unlinked files stay orphans, reachable by inode), no metrics
// scrape.
//
// The accessors read what the service stores (server/meta/keys.h records in
// the KV store) or ask its parts, never a copy: tests check the service's
// state with them.
//
// Thread-safety: thread-safe once started. Clients made by NewClient must be
// destroyed before the service.
#ifndef CKPTFS_CLIENT_TESTING_IN_PROCESS_META_H_
#define CKPTFS_CLIENT_TESTING_IN_PROCESS_META_H_

#include <grpcpp/grpcpp.h>

#include <cstdint>
#include <memory>
#include <set>
#include <string>

#include "absl/status/statusor.h"
#include "client/meta_client.h"
#include "client/testing/storage_stand_in.h"
#include "proto/meta.pb.h"
#include "proto/meta_store.pb.h"
#include "server/meta/checkpoint/checkpoint_store.h"
#include "server/meta/checkpoint/committer.h"
#include "server/meta/checkpoint/coordinator.h"
#include "server/meta/membership.h"
#include "server/meta/memory_kv_store.h"
#include "server/meta/meta_service.h"
#include "server/meta/namespace.h"

namespace ckptfs::client::testing {

class InProcessMetaService {
 public:
  struct Options {
    uint32_t storage_servers = 4;
    uint32_t default_chunk_size = 4u << 20;
    uint32_t default_replicas = 1;
    // A checkpoint's barrier timeout when neither the request nor an xattr
    // sets it.
    uint32_t commit_timeout_s = 600;
  };

  static absl::StatusOr<std::unique_ptr<InProcessMetaService>> Start(const Options& options);
  InProcessMetaService(const InProcessMetaService&) = delete;
  InProcessMetaService& operator=(const InProcessMetaService&) = delete;
  // Answers waiting commits (UNAVAILABLE), then stops serving.
  ~InProcessMetaService();

  // A MetaClient (GrpcMetaClient) over an in-process channel to the
  // service, with a deadline of a minute per call.
  std::unique_ptr<MetaClient> NewClient();

  // Registers (or, for a known uuid, moves) a storage server; its id.
  absl::StatusOr<uint32_t> RegisterServer(const meta::RegisterServerRequest& request);
  // Where the servers registered at the start are (they all share it).
  const std::string& storage_address() const { return storage_->address(); }
  // SYNCs the service sent those servers so far.
  int storage_syncs() const { return storage_->syncs(); }

  // --- The service's state -------------------------------------------------
  // Inode `ino`'s record as stored; ENOENT if there is none.
  absl::StatusOr<meta::InodeRecord> Inode(uint64_t ino);
  // The size the service has recorded for `ino` (0 if there is no inode).
  uint64_t RecordedSize(uint64_t ino);
  // The writer handles registered on `ino` (none if there is no inode).
  std::set<uint64_t> WriterHandles(uint64_t ino);
  // Whether a failed write marked `ino` damaged.
  bool Damaged(uint64_t ino);
  // The reader handles holding `ino` (h/ keys): only files inside
  // checkpoints are held.
  std::set<uint64_t> ReaderHandles(uint64_t ino);
  // Checkpoint `ino` as GetCheckpoint serves it (arrived: the ranks whose
  // commit the service has recorded).
  absl::StatusOr<meta::CheckpointInfo> Checkpoint(uint64_t ino);

 private:
  InProcessMetaService(const Options& options, std::unique_ptr<StorageStandIn> storage);

  // Declared in the order they are built: each uses only those above it.
  const std::unique_ptr<StorageStandIn> storage_;
  meta::MemoryKvStore store_;
  meta::Membership membership_;
  meta::Namespace ns_;
  meta::CheckpointStore checkpoint_store_;
  meta::Committer committer_;
  meta::CheckpointCoordinator coordinator_;
  meta::MetaServiceImpl service_;
  std::unique_ptr<grpc::Server> server_;
};

}  // namespace ckptfs::client::testing

#endif  // CKPTFS_CLIENT_TESTING_IN_PROCESS_META_H_
