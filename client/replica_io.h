// Chunk I/O over the copies of a chunk (placement: client/layout.h,
// ReplicaServers). A write goes to every copy at once and is done when all
// have answered: it succeeds only if every copy stored it, so an
// acknowledged write is on every replica. A read asks one copy and falls
// over to the next when a server fails or lacks the chunk, so a file stays
// readable while any one server of each chunk's copies is up.
//
// When copies differ. Copies are identical while every write and truncate
// succeeded. They can differ after
//   - a write that failed on some copies: the app is told (the write,
//     fsync or close of the file returns the error: OpenFileState keeps it
//     sticky until the last handle closes, and a checkpoint writer's
//     commit is marked failed, so its size is not published). The bytes
//     that write covered are then unspecified until rewritten: a read
//     returns one copy's (old or new), the same copy while the same
//     servers answer;
//   - a truncate that failed on some copies: the truncate returns the
//     error and the service keeps the old size (client.cc), so the longer
//     copies hold what the file still names;
//   - a server that lost chunks (restarted with an empty disk).
// Two rules keep reads and later writes right in those cases:
//   - a read that a copy answers short (its chunk ends before the bytes
//     asked for) asks the other copies too and returns the longest answer
//     (ReadChunkCopy);
//   - a storage server refuses (ENODATA) a merging write past the end of
//     the chunk it holds instead of making up zeros for the bytes before
//     it (server/storage/chunk_store.h). WriteChunkCopies then rebuilds a
//     copy that lacks them from one that stored the write, or, when every
//     copy refused (a hole: sparse writes), evens their lengths and makes
//     the gap explicitly (an empty write up to the offset) before writing.
//
// Erasure-coded layouts (Layout.ec_data > 0) are passed on to
// client/fragment_io.h (fragments instead of copies, a decode on the read
// side); OpenFileState only says "write this chunk" and "read these bytes
// of it".
//
// Thread-safety: every function may be called from any thread,
// ReadChunkCopy also from an IoExecutor task (it never waits for other
// tasks). FailedServers is thread-safe (one mutex). The fallover warnings
// (once a minute per server id) are process-wide, under a mutex.
#ifndef CKPTFS_CLIENT_REPLICA_IO_H_
#define CKPTFS_CLIENT_REPLICA_IO_H_

#include <cstddef>
#include <cstdint>
#include <optional>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/functional/any_invocable.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "client/chunk_transport.h"
#include "client/io_executor.h"
#include "proto/meta.pb.h"

namespace ckptfs::client {

// The storage servers whose last answer to a read was a failure (down,
// unreachable, timed out), and when: for kSuspectFor afterwards their
// copies are tried last, so that a server that vanished without refusing
// connections costs one timeout, not one per chunk read. One per Client
// (ClientServices::failed_servers), so that clients sharing a process do
// not steer each other's reads.
class FailedServers {
 public:
  static constexpr absl::Duration kSuspectFor = absl::Seconds(15);

  FailedServers() = default;
  FailedServers(const FailedServers&) = delete;
  FailedServers& operator=(const FailedServers&) = delete;

  void NoteFailed(uint32_t server_id) ABSL_LOCKS_EXCLUDED(mu_);
  // The server answered (data or ENOENT): no longer suspect.
  void NoteAnswered(uint32_t server_id) ABSL_LOCKS_EXCLUDED(mu_);
  // Reorders `order` (copy numbers of chunk `chunk_index` under `layout`)
  // so that copies on servers that failed in the last kSuspectFor come
  // last, keeping the order within each group.
  void MoveSuspectsLast(const meta::Layout& layout, uint64_t chunk_index,
                        std::vector<int>& order) const ABSL_LOCKS_EXCLUDED(mu_);

 private:
  mutable absl::Mutex mu_;
  absl::flat_hash_map<uint32_t, absl::Time> failed_at_ ABSL_GUARDED_BY(mu_);
};

// One chunk write, as ChunkTransport::WriteChunk takes it.
struct ChunkWrite {
  uint64_t ino = 0;
  uint64_t chunk_index = 0;
  uint32_t offset = 0;
  const char* data = nullptr;  // borrowed: valid until `done` runs
  size_t length = 0;
  // The chunk becomes exactly these bytes (a whole chunk); otherwise they
  // are merged into what the chunk holds.
  bool replace = false;
  // The write starts at the chunk's start and reaches the end of the file
  // as its writer knows it. An erasure-coded chunk, re-encoded whole by
  // every write, is then encoded from these bytes alone (fragment_io.h).
  bool covers_known_end = false;
  std::optional<uint32_t> crc32c;
};

// Sends `write` to every copy of its chunk under `layout`, each as an
// IoExecutor task of its own, and calls `done` exactly once, on the thread
// of the last copy to answer: OK if every copy stored the bytes, else the
// first failure, naming the copy and its server. Copies that refused a
// merging write for a gap before write.offset (ENODATA, see the top of this
// file) are rebuilt first, on that thread, with a few more requests: from a
// copy that stored the write (whole chunk, replace), or, when all refused,
// by evening their lengths (the longest copy's bytes) and extending each
// with zeros up to write.offset, then writing again. Returns at once.
// REQUIRES: ValidateLayout(layout).ok(); `transport`, `executor` and
// write.data outlive the call of `done` (e.g. `done` owns the buffer); no
// other write of the chunk by this caller is in flight (OpenFileState
// serializes them), as the rebuild reads and rewrites the whole chunk.
void WriteChunkCopies(ChunkTransport& transport, IoExecutor& executor, const meta::Layout& layout,
                      const ChunkWrite& write, absl::AnyInvocable<void(absl::Status) &&> done);

// Reads up to `length` bytes at `offset` of chunk `chunk_index` into `out`
// from its copies and returns how many there were (fewer at the end of the
// stored chunk). Tries the copies in turn, starting with one that depends
// on the index (so that a sequential read spreads over every copy, and
// every copy is read now and then); a server that fails (down, timed out,
// an I/O error) or says ENOENT makes it try the next. A copy that answers
// fewer than `length` bytes makes it ask the remaining copies as well, and
// the longest answer wins (copies that differ are logged): a copy that
// lost bytes never hides the ones another holds. When the longest answer
// is still short and a copy failed, the failure: the missing bytes may be
// on that copy alone (callers ask only for bytes within the file's size,
// so a short answer is a lost tail or a hole, and a hole read while a copy
// is down is an error rather than a guess).
// `failed` (may be null: none kept) records servers that fail reads; their
// copies are tried last for FailedServers::kSuspectFor. ENOENT only if
// every copy said ENOENT (a hole); if some failed and the others said
// ENOENT, the failure (the chunk may be on the failed server alone). Bytes
// of `out` past the returned count are unspecified.
// REQUIRES: ValidateLayout(layout).ok().
absl::StatusOr<size_t> ReadChunkCopy(ChunkTransport& transport, FailedServers* failed,
                                     const meta::Layout& layout, uint64_t ino, uint64_t chunk_index,
                                     uint32_t offset, char* out, size_t length);

}  // namespace ckptfs::client

#endif  // CKPTFS_CLIENT_REPLICA_IO_H_
