// Chunk I/O over the copies of a chunk (placement: client/layout.h,
// ReplicaServers). A write goes to every copy at once and is done when all
// have answered: it succeeds only if every copy stored it, so an
// acknowledged write is on every replica. A read asks one copy and falls
// over to the next when a server fails or lacks the chunk, so a file stays
// readable while any one server of each chunk's copies is up.
//
// Erasure coding would slot in here (fragments instead of copies, a decode
// on the read side); OpenFileState only says "write this chunk" and "read
// these bytes of it".
//
// Thread-safety: every function may be called from any thread,
// ReadChunkCopy also from an IoExecutor task (it never waits for other
// tasks). The fallover warnings (once a minute per server id) and the
// servers that failed reads lately are process-wide, each under a mutex of
// its own.
#ifndef CKPTFS_CLIENT_REPLICA_IO_H_
#define CKPTFS_CLIENT_REPLICA_IO_H_

#include <cstddef>
#include <cstdint>
#include <optional>

#include "absl/functional/any_invocable.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "client/chunk_transport.h"
#include "client/io_executor.h"
#include "proto/meta.pb.h"

namespace ckptfs::client {

// One chunk write, as ChunkTransport::WriteChunk takes it.
struct ChunkWrite {
  uint64_t ino = 0;
  uint64_t chunk_index = 0;
  uint32_t offset = 0;
  const char* data = nullptr;  // borrowed: valid until `done` runs
  size_t length = 0;
  bool replace = false;
  std::optional<uint32_t> crc32c;
};

// Sends `write` to every copy of its chunk under `layout`, each as an
// IoExecutor task of its own, and calls `done` exactly once, on the thread
// of the last copy to answer: OK if every copy stored the bytes, else the
// first failure, naming the copy and its server. Returns at once.
// REQUIRES: ValidateLayout(layout).ok(); `transport`, `executor` and
// write.data outlive the call of `done` (e.g. `done` owns the buffer).
void WriteChunkCopies(ChunkTransport& transport, IoExecutor& executor, const meta::Layout& layout,
                      const ChunkWrite& write, absl::AnyInvocable<void(absl::Status) &&> done);

// Reads up to `length` bytes at `offset` of chunk `chunk_index` into `out`
// from one of its copies and returns how many the copy had (fewer at the
// end of its stored length). Tries the copies in turn, starting with one
// that depends on the index (so that a sequential read spreads over every
// copy, and every copy is read now and then); a server that fails (down,
// timed out, an I/O error) or says ENOENT makes it try the next. Copies on
// a server that failed a read in the last 15 s are tried last (one
// timeout per vanished server, not one per chunk). ENOENT
// only if every copy said ENOENT (a hole); if some failed and the others
// said ENOENT, the failure (the chunk may be on the failed server alone).
// Bytes of `out` past the returned count are unspecified.
// REQUIRES: ValidateLayout(layout).ok().
absl::StatusOr<size_t> ReadChunkCopy(ChunkTransport& transport, const meta::Layout& layout,
                                     uint64_t ino, uint64_t chunk_index, uint32_t offset,
                                     char* out, size_t length);

// Forgets which servers failed reads (see ReadChunkCopy): for tests that
// count the reads each server gets.
void ForgetReadFailuresForTesting();

}  // namespace ckptfs::client

#endif  // CKPTFS_CLIENT_REPLICA_IO_H_
