// ChunkTransport: the client's view of the storage servers — write, read,
// trim and sync the chunks of one inode on one server, named by its id.
//
// The real implementations speak the framed data protocol over TCP:
// uring_chunk_transport.h (the default: one io_uring event loop, many
// requests in flight per connection) and blocking_chunk_transport.h (a blocking
// connection per request in flight, kept for comparison); the fake
// (client/testing/fake_chunk_transport.h) keeps chunks in memory and can
// inject failures. Each call blocks until the server answers; callers run
// several at once on the IoExecutor.
//
// Unsynced writes: given an UnsyncedWrites (TrackWrites), a transport that
// speaks to real servers records there the server incarnation of every
// WRITE, fill and ADOPT it had acknowledged, and SyncChunks sends them with
// the SYNC, which a server that restarted since refuses (EIO).
//
// Thread-safety: implementations must allow concurrent calls from any
// thread; TrackWrites is called once, before any other call.
#ifndef CKPTFS_CLIENT_CHUNK_TRANSPORT_H_
#define CKPTFS_CLIENT_CHUNK_TRANSPORT_H_

#include <cerrno>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "client/unsynced_writes.h"
#include "common/errno_status.h"

namespace ckptfs::client {

class ChunkTransport {
 public:
  virtual ~ChunkTransport() = default;

  // Stores data[0, length) at `offset` within the chunk. With `replace` the
  // chunk becomes exactly those bytes (REQUIRES offset == 0); without, they
  // are merged into the chunk's existing bytes. A merge whose offset is past
  // the bytes the chunk holds (or into a chunk the server does not have) is
  // refused with ENODATA and changes nothing; an empty merge at `offset`
  // extends the chunk with zeros up to it (how a hole is made on purpose;
  // client/replica_io.h).
  // `crc32c` is the CRC32C of data[0, length) when the caller already has
  // it; nullopt: the transport computes it.
  virtual absl::Status WriteChunk(uint32_t server_id, uint64_t ino, uint64_t chunk_index,
                                  uint32_t offset, const void* data, size_t length, bool replace,
                                  std::optional<uint32_t> crc32c) = 0;
  // The same without a CRC32C (the transport computes it). Implementations
  // add `using ChunkTransport::WriteChunk;` so that it stays callable on them.
  absl::Status WriteChunk(uint32_t server_id, uint64_t ino, uint64_t chunk_index, uint32_t offset,
                          const void* data, size_t length, bool replace) {
    return WriteChunk(server_id, ino, chunk_index, offset, data, length, replace, std::nullopt);
  }

  // Stores data[0, length) as the whole chunk (a replace WRITE), but only if
  // the server holds no such chunk: fails with EEXIST, and changes nothing,
  // when it holds one. How a repair (client/repair.h) restores a missing
  // copy without ever overwriting bytes a writer stored meanwhile. A server
  // of an older build ignores the condition and replaces. The default fails
  // with ENOTSUP (test transports that never repair need not implement it).
  virtual absl::Status FillChunk(uint32_t server_id, uint64_t ino, uint64_t chunk_index,
                                 const void* data, size_t length) {
    return ErrnoStatus(ENOTSUP, "this chunk transport cannot fill a missing chunk");
  }

  // Asks the server to take, as the whole chunk (like a replacing WRITE),
  // the complete chunk file a client on its host wrote under its tmp/ as
  // `tmp_name` (the ADOPT request, proto/data.proto;
  // client/local_chunk_transport.h): `data_length` and `data_crc32c` must
  // be what the file's header says. ENOENT when the server has no such
  // file, EINVAL when it is not that chunk's, EEXIST when the chunk it
  // holds is longer (it never shrinks one: send the bytes as a WRITE); in
  // every case the file stays for the caller to remove. The default fails
  // with ENOTSUP (a transport that cannot send it; an old server answers
  // EOPNOTSUPP, the same errno).
  virtual absl::Status AdoptChunk(uint32_t server_id, uint64_t ino, uint64_t chunk_index,
                                  const std::string& tmp_name, uint32_t data_length,
                                  uint32_t data_crc32c) {
    return ErrnoStatus(ENOTSUP, "this chunk transport cannot ask a server to adopt a chunk file");
  }

  // Reads up to `length` bytes at `offset` within the chunk into buf.
  // Returns the bytes received: fewer than `length` when the chunk's stored
  // length ends earlier. A chunk never written fails with ENOENT. Bytes of
  // buf past the returned count (and all of buf, on failure) may have been
  // written: a transport may fill buf from a whole padded chunk file.
  virtual absl::StatusOr<size_t> ReadChunk(uint32_t server_id, uint64_t ino, uint64_t chunk_index,
                                           uint32_t offset, void* buf, size_t length) = 0;

  // Cuts the inode's chunks on the server to a file of `trim_size` bytes:
  // chunks wholly at or past it are deleted, the one straddling it is cut.
  virtual absl::Status TrimChunks(uint32_t server_id, uint64_t ino, uint64_t trim_size,
                                  uint32_t chunk_size) = 0;

  // Makes every chunk of the inode on the server durable. With TrackWrites,
  // EIO when the server restarted since it acknowledged a write of the
  // inode recorded there (those bytes may be lost), and this stays so: the
  // record keeps them until a SYNC confirms them.
  virtual absl::Status SyncChunks(uint32_t server_id, uint64_t ino) = 0;

  // Records acknowledged writes in `writes` (borrowed, outlives this) and
  // holds SYNCs to them (above); null: none recorded, none checked. A
  // transport that wraps another passes it on.
  virtual void TrackWrites(UnsyncedWrites* writes) { unsynced_writes_ = writes; }

 protected:
  // For implementations: `server_id`, run `incarnation` (the reply's),
  // acknowledged a WRITE, fill or ADOPT of `ino`.
  void NoteStored(uint32_t server_id, uint64_t ino, uint64_t incarnation) {
    if (unsynced_writes_ != nullptr) unsynced_writes_->Stored(ino, server_id, incarnation);
  }
  // What a SYNC of `ino` on `server_id` must confirm (its written_by), and,
  // once it succeeded, that it did.
  UnsyncedWrites::Pending PendingSync(uint32_t server_id, uint64_t ino) const {
    if (unsynced_writes_ == nullptr) return {};
    return unsynced_writes_->ForSync(ino, server_id);
  }
  void ConfirmSync(uint32_t server_id, uint64_t ino, const UnsyncedWrites::Pending& pending) {
    if (unsynced_writes_ != nullptr) unsynced_writes_->Synced(ino, server_id, pending);
  }

 private:
  UnsyncedWrites* unsynced_writes_ = nullptr;
};

}  // namespace ckptfs::client

#endif  // CKPTFS_CLIENT_CHUNK_TRANSPORT_H_
