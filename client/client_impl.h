// ClientImpl: what a Client owns — the metadata client, the commit
// coalescer, the chunk transport, the I/O threads and the registry of open
// files — and the helpers its methods share. Private to client/*.cc.
//
// Member order is destruction order in reverse: the executor goes first,
// running every submitted chunk request (which may still use the transport,
// the metadata client and the registry) before those are destroyed.
//
// A Client made by Connect also announces itself to the metadata service
// (ClientHeartbeat, for `ckptfs status`) from a small thread of its own:
// at start and every kClientHeartbeatInterval, one short RPC whose failure
// is ignored (the next one retries). The thread is the last member, so it
// stops before anything it uses goes.
//
// Thread-safety: everything here is thread-safe.
#ifndef CKPTFS_CLIENT_CLIENT_IMPL_H_
#define CKPTFS_CLIENT_CLIENT_IMPL_H_

#include <memory>
#include <thread>

#include "absl/status/statusor.h"
#include "absl/synchronization/notification.h"
#include "absl/time/time.h"
#include "client/chunk_transport.h"
#include "client/client.h"
#include "client/client_services.h"
#include "client/commit_coalescer.h"
#include "client/io_executor.h"
#include "client/meta_client.h"
#include "client/open_file_registry.h"
#include "client/open_file_state.h"
#include "client/reader_hold.h"
#include "client/replica_io.h"
#include "client/unsynced_writes.h"
#include "proto/meta.pb.h"

namespace ckptfs::client {

inline constexpr absl::Duration kClientHeartbeatInterval = absl::Seconds(5);

// What a Client says of itself in its heartbeats.
meta::ClientInfo DescribeThisClient();

class ClientImpl {
 public:
  ClientImpl(const ClientOptions& options, std::unique_ptr<MetaClient> meta,
             std::unique_ptr<ChunkTransport> transport);
  // Stops the heartbeat thread first.
  ~ClientImpl();

  // Starts the heartbeat thread (Connect does; clients over fakes do not).
  // Call at most once.
  void StartHeartbeat(meta::ClientInfo self);

  MetaClient& meta() { return *meta_; }
  // The checkpoint commits of every rank using this client.
  CommitCoalescer& commits() { return commits_; }
  ChunkTransport& transport() { return *transport_; }
  IoExecutor& executor() { return *executor_; }
  OpenFileRegistry& registry() { return registry_; }
  const ClientServices& services() const { return services_; }

  // `attr` with the size of a file open here (unflushed bytes included).
  meta::Attr WithLocalSize(meta::Attr attr);

  // The storage half of truncating `attr`'s file to `new_size`: through its
  // open state if open here, else TRIM at min(old, new) on its stripe.
  // EISDIR / EINVAL for a directory / non-regular file.
  absl::Status TruncateStorage(const meta::Attr& attr, uint64_t new_size);

  // What MakeFile needs to know about the inode's open state as it was
  // before the RPC that returned the attr (see OpenFileState::Refresh).
  struct StateBefore {
    std::shared_ptr<OpenFileState> state;  // held, so it stays the same one
    uint64_t size_version = 0;
  };
  StateBefore SnapshotState(uint64_t ino);

  // A File for `attr` (a regular file, fresh from the service), sharing the
  // open state of its inode. `truncated`: the service just set its size.
  // `writer_handle`: the id the open registered (0: none); `hold`: a
  // read-only open's hold (client/reader_hold.h). On error both are
  // released.
  absl::StatusOr<std::unique_ptr<File>> MakeFile(const meta::Attr& attr, int flags, bool truncated,
                                                 const StateBefore& before, uint64_t writer_handle,
                                                 ReaderHold hold = ReaderHold());

  // Ends writer registration `writer` of `ino` (a CommitWrite with only
  // release_writer). Errors are logged: the caller is already failing.
  void ReleaseWriter(uint64_t ino, uint64_t writer);

 private:
  std::unique_ptr<MetaClient> meta_;
  CommitCoalescer commits_;
  // The server incarnations holding this client's unsynced writes; the
  // transport records them (declared first: it outlives the transport).
  UnsyncedWrites unsynced_writes_;
  std::unique_ptr<ChunkTransport> transport_;
  // Servers that failed this client's reads lately (replica_io.h).
  FailedServers failed_servers_;
  BufferPool buffers_;
  OpenFileRegistry registry_;
  ClientServices services_;
  std::unique_ptr<IoExecutor> executor_;
  absl::Notification stop_heartbeat_;
  std::thread heartbeat_;  // last: stops first
};

// EISDIR for a directory, EINVAL for anything else but a regular file.
absl::Status RequireRegular(const meta::Attr& attr);

// A random nonzero handle id (OpenRequest.writer_handle, reader_handle).
uint64_t NewWriterHandle();

// Whether open(2) `flags` let the handle write.
bool MayWrite(int flags);

}  // namespace ckptfs::client

#endif  // CKPTFS_CLIENT_CLIENT_IMPL_H_
