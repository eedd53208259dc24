// ChunkStore: the chunks of one storage server on its local file system.
//
// Layout under the data directory:
//   chunks/<ino>/<index>   one file per chunk (format in chunk_format.h); one
//                          directory per inode so TRIM and SYNC can list an
//                          inode's chunks without scanning everything
//   tmp/                   chunk files being written; emptied at Open.
//                          Also where a client on this host writes a whole
//                          chunk file itself for Adopt (names "local.*")
//   quarantine/            chunk files a scrub found corrupt, moved aside
//                          (<ino>.<index>.<unix ms>) for people to look at;
//                          never read again
//
// Every write builds the complete new chunk file (header block + data) under
// tmp/, written as one io_uring batch, then rename()s it over
// chunks/<ino>/<index>. What a `kill -9` (or any crash of the process) at any
// step leaves:
//   - before the rename: the old chunk (or none) is intact at its name; the
//     partial tmp file is deleted at the next Open. The write was never
//     acknowledged, so the client retries it.
//   - after the rename: the new chunk, complete (the kernel finished the
//     writes before rename() ran; the page cache survives a process crash).
// A chunk is therefore never torn by a process crash. A power loss can still
// tear an unsynced chunk (rename durable, data not); that is why the header
// carries a CRC32C of the data and a CRC32C of itself, and every read checks
// both: a torn or bit-rotted chunk reads as EIO naming the chunk, never as
// good data. Durability is what Sync() promises, nothing earlier; and a sync
// that fails makes every later sync of the chunks it may have lost fail
// too, until they are written again (writeback_tracker.h): the kernel
// reports a write-back error to one sync only.
//
// Because a chunk only ever changes by an atomic rename or unlink, a reader
// that opens a chunk file sees one complete version of it: reads take no
// lock. Writers (Write, Trim) of the same chunk are serialized by a fixed
// array of striped mutexes keyed by (ino, index), so memory does not grow
// with the number of chunks stored.
//
// Disk I/O goes through the caller's io_uring Ring (one per thread), with
// O_DIRECT and 4096-aligned buffers when the file system allows it, buffered
// I/O otherwise. Every other file call (open, rename, unlink, mkdir, the
// syncs, ...) goes through a FileSystem (file_system.h): the real one, or in
// tests one that models what a power loss keeps
// (testing/fault_injection_file_system.h).
//
// Thread-safety: all methods may be called concurrently from any threads,
// each thread passing its own Ring and buffers.
#ifndef CKPTFS_SERVER_STORAGE_CHUNK_STORE_H_
#define CKPTFS_SERVER_STORAGE_CHUNK_STORE_H_

#include <array>
#include <atomic>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>

#include "absl/base/thread_annotations.h"
#include "absl/functional/function_ref.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "common/chunk_format.h"
#include "common/frame.h"
#include "common/unique_fd.h"
#include "common/uring.h"
#include "server/storage/aligned_buffer.h"
#include "server/storage/file_system.h"
#include "server/storage/writeback_tracker.h"

namespace ckptfs::storage {

// The largest chunk a store holds: the largest frame payload.
inline constexpr uint32_t kMaxChunkLength = kMaxFramePayload;

// A read's result: `data` points into the caller's buffer and stays valid
// until that buffer is next used.
struct ChunkSlice {
  absl::string_view data;
  uint32_t data_crc32c = 0;   // CRC32C of `data`
  uint32_t chunk_length = 0;  // the chunk's stored length
};

// What Scrub() found.
enum class ScrubVerdict {
  kGood,         // the chunk passed its CRC checks
  kGone,         // not stored (any more): removed since it was listed
  kQuarantined,  // failed its CRC checks and was moved to quarantine/
};

struct ScrubResult {
  ScrubVerdict verdict = ScrubVerdict::kGood;
  uint64_t bytes_read = 0;  // chunk file bytes read to check it
};

struct SpaceUsage {
  uint64_t capacity_bytes = 0;
  uint64_t used_bytes = 0;  // capacity minus what is still available to us
};

class ChunkStore {
 public:
  // Opens (creating if needed) the store under `data_dir`, empties tmp/ and
  // probes whether O_DIRECT works there. Every file call goes through `fs`
  // (borrowed; must outlive the store), or the real file system when null.
  // REQUIRES: `data_dir` exists and no other process uses it (the caller
  // holds its lock).
  static absl::StatusOr<std::unique_ptr<ChunkStore>> Open(const std::string& data_dir,
                                                          FileSystem* fs = nullptr);

  ChunkStore(const ChunkStore&) = delete;
  ChunkStore& operator=(const ChunkStore&) = delete;

  // Stores payload.view() at `offset` of the chunk. With `replace` the chunk
  // becomes exactly the payload (REQUIRES offset == 0, else EINVAL);
  // otherwise the payload is merged into the existing bytes and the chunk
  // grows to max(old length, offset + size). A merge of a non-empty payload
  // at `offset` > 0 needs the chunk stored with at least `offset` bytes:
  // else ENODATA, nothing changed (a copy that lost its chunk must not take
  // zeros for the bytes the other copies hold; see client/replica_io.h). An
  // empty merge is the explicit way to make such a gap: it extends the
  // chunk (or creates it) with zeros up to `offset`. EINVAL when offset +
  // size exceeds kMaxChunkLength; EIO if a chunk to merge into fails its
  // CRC.
  // `payload_crc32c`, when given, is the payload's CRC32C the caller already
  // computed (and verified); it saves a pass over the data.
  // REQUIRES: payload.capacity() >= RoundUpToBlock(payload.size()); the
  // bytes between size() and that are overwritten (zero padding).
  absl::Status Write(Ring& ring, ChunkKey key, uint32_t offset, AlignedBuffer& payload,
                     bool replace, std::optional<uint32_t> payload_crc32c = std::nullopt);
  // The same for bytes in ordinary memory (one extra copy; tests, tools).
  absl::Status Write(Ring& ring, ChunkKey key, uint32_t offset, absl::string_view data,
                     bool replace);

  // Stores the chunk as exactly payload.view(), like a replacing Write, but
  // only if no chunk `key` is stored here (a torn one counts as stored):
  // else EEXIST and nothing changes. The check and the store happen under
  // the chunk's stripe lock, so a repair filling a missing copy never
  // overwrites bytes a writer stored meanwhile. Same REQUIRES as Write.
  absl::Status Fill(Ring& ring, ChunkKey key, AlignedBuffer& payload,
                    std::optional<uint32_t> payload_crc32c = std::nullopt);

  // Makes the chunk file a client on this host wrote whole under tmp/
  // (`tmp_name`, see IsLocalWriteName) chunk `key`, as a replacing Write of
  // its data would: checks that it is a regular file of ChunkFileSize(
  // `data_length`) bytes whose header decodes and names `key`,
  // `data_length` and `data_crc32c`, then renames it into place under the
  // chunk's stripe lock. The data is not reread here (its writer computed
  // the CRC32C, and every read checks it). EINVAL for a bad name or a file
  // that is not that chunk's; ENOENT when tmp/ holds no such file (Open
  // emptied tmp/ since, or the client gave up and removed it). EEXIST when
  // the chunk stored here holds more than `data_length` bytes (or is torn
  // where that matters): adopting never shrinks a chunk, since the bytes
  // past the file may be another client's; the client sends its bytes as
  // a WRITE instead, which merges them (or replaces, if it meant to). The
  // file is left in tmp/ on failure: the client removes it.
  // The header is read through the page cache: the client writes it there
  // (client/local_chunk_transport.h), so the check costs no disk read
  // behind the storm's writes. Unlike a WRITE, nothing here recomputes the
  // data's CRC32C: no network carried the bytes, and the client computed
  // the CRC from the same memory it wrote; every read checks it.
  absl::Status Adopt(ChunkKey key, absl::string_view tmp_name, uint32_t data_length,
                     uint32_t data_crc32c);
  // Removes clients' files ("local.*") in tmp/ last modified more than
  // `age` ago: left by a client that died between writing one and asking
  // for it to be adopted. Returns how many.
  absl::StatusOr<size_t> RemoveAbandonedLocalWrites(absl::Duration age);
  // RemoveAbandonedLocalWrites(kAbandonedLocalWriteAge) when the last sweep
  // was kAbandonedSweepInterval ago or more (or never); logs a failure.
  // Cheap otherwise: the server calls it after every heartbeat, and Adopt.
  void SweepIfDue();
  static constexpr absl::Duration kAbandonedLocalWriteAge = absl::Hours(1);
  static constexpr absl::Duration kAbandonedSweepInterval = absl::Minutes(10);

  // Calls `visit` for every chunk stored here (by the names under chunks/,
  // inode by inode, in no particular order) until it returns false. Chunks
  // written or removed during the walk may or may not be visited.
  absl::Status ForEachChunk(absl::FunctionRef<bool(ChunkKey)> visit) const;

  // Rereads chunk `key` whole into `buffer` and checks it as Read does. A
  // chunk that fails is checked again under its stripe lock (a writer may
  // have replaced it meanwhile) and, if it still fails, moved to
  // quarantine/ and logged: it then reads as missing (ENOENT) here, so
  // clients fall over to another copy and a repair writes it again. Errors
  // other than a bad chunk (e.g. the disk failing to read) are returned.
  absl::StatusOr<ScrubResult> Scrub(Ring& ring, AlignedBuffer& buffer, ChunkKey key);

  // Reads chunk bytes [offset, offset + length), cut at the chunk's stored
  // length (so the slice may be shorter, or empty), into `buffer` (grown as
  // needed). ENOENT when the chunk is not stored here; EIO (logged, naming
  // the chunk) when it fails its CRC checks.
  absl::StatusOr<ChunkSlice> Read(Ring& ring, AlignedBuffer& buffer, ChunkKey key, uint32_t offset,
                                  uint32_t length);

  // Cuts inode `ino` to `new_size` bytes: deletes every chunk starting at or
  // past it and shortens the chunk straddling it; removes the inode's
  // directory when no chunk is left. EINVAL for chunk_size 0 unless
  // new_size is 0 (delete everything).
  absl::Status Trim(Ring& ring, uint64_t ino, uint64_t new_size, uint32_t chunk_size);

  // Makes every chunk of `ino` stored here durable: fdatasync of each chunk
  // file, then of the directories naming them; and so the chunks removed
  // since (by Trim), also when none is left. OK when none is stored. EIO
  // when a chunk of `ino` may have lost bytes to a sync that failed before
  // (this one or an earlier one, of any inode) and was not written since.
  absl::Status Sync(Ring& ring, uint64_t ino);

  // Makes everything stored here durable with one syncfs(2) of the data
  // directory's file system: every chunk of every inode and the renames
  // that published them (a checkpoint commit: one sync per server instead
  // of one per file). Blocks for as long as the file system's writeback.
  // EIO when any chunk may have lost bytes to a sync that failed, as Sync.
  absl::Status SyncAll();

  // Capacity and use of the file system holding the store (statvfs).
  absl::StatusOr<SpaceUsage> Space() const;

  // Which run of the server this is: a random nonzero number chosen at
  // Open, another at every start. Replies carry it, and a SYNC that names
  // writes another incarnation acknowledged is refused (request_handler.h):
  // what that run had not synced may have gone with its page cache.
  uint64_t incarnation() const { return incarnation_; }

  bool direct_io() const { return direct_io_; }
  const std::string& data_dir() const { return data_dir_; }

  // Where a chunk lives (for tests and messages).
  std::string ChunkPath(ChunkKey key) const;
  std::string InodeDir(uint64_t ino) const;

 private:
  ChunkStore(std::string data_dir, bool direct_io, uint64_t incarnation, FileSystem& fs);

  absl::Mutex& LockFor(ChunkKey key);
  absl::Mutex& DirLockFor(uint64_t ino) {
    return dir_locks_[((ino * 0x9E3779B97F4A7C15ull) >> 32) % kLockStripes];
  }
  // Writes a new chunk file under tmp/ in one io_uring batch and renames it
  // into place. The image is `header_block` followed by `padded_data_len`
  // data bytes: contiguous in `header_block` when `data` is null, else in
  // `data`. Both are 4096-aligned. REQUIRES: the chunk's stripe lock is
  // held.
  absl::Status Publish(Ring& ring, ChunkKey key, const char* header_block, const char* data,
                       size_t padded_data_len);
  // Renames the complete chunk file at `tmp` to chunk `key`'s name, making
  // the inode directory when it is missing. REQUIRES: the chunk's stripe
  // lock is held.
  absl::Status PlaceLocked(const std::string& tmp, ChunkKey key);
  // OK when chunk `key` is not stored or holds at most `length` bytes,
  // else EEXIST. REQUIRES: the chunk's stripe lock is held.
  absl::Status RequireNotLongerThan(ChunkKey key, uint32_t length) const;
  // Checks the client's file at `path` as Adopt says, and returns when it
  // was last modified. REQUIRES: nothing.
  absl::StatusOr<absl::Time> CheckAdoptable(const std::string& path, ChunkKey key,
                                            uint32_t data_length, uint32_t data_crc32c) const;
  // Reads and verifies the whole chunk file into `buffer` (header at 0, data
  // at kChunkHeaderSize), with room for `min_capacity` bytes. Returns the
  // header.
  absl::StatusOr<ChunkHeader> Load(Ring& ring, ChunkKey key, AlignedBuffer& buffer,
                                   size_t min_capacity);
  // Sync's file calls: the chunk files of `ino`, then their directories.
  absl::Status SyncInode(Ring& ring, uint64_t ino);
  // Shortens a stored chunk to `new_length` bytes (nothing to do when it is
  // not longer, or missing). REQUIRES: the chunk's stripe lock is held.
  absl::Status Cut(Ring& ring, ChunkKey key, uint32_t new_length);
  // OK if chunk `key` holds at least `offset` bytes, else ENODATA naming
  // what it holds (a torn chunk passes: the merge then reports EIO).
  // REQUIRES: the chunk's stripe lock is held.
  absl::Status RequireStoredUpTo(ChunkKey key, uint32_t offset) const;
  // Write() without `replace` when the old bytes matter. REQUIRES: the
  // chunk's stripe lock is held.
  absl::Status MergeLocked(Ring& ring, ChunkKey key, uint32_t offset, absl::string_view data);
  // Publishes payload as the whole chunk. REQUIRES: the chunk's stripe lock
  // is held; payload.capacity() >= RoundUpToBlock(payload.size()).
  absl::Status PublishWhole(Ring& ring, ChunkKey key, AlignedBuffer& payload,
                            std::optional<uint32_t> payload_crc32c);
  // Opens a chunk file with O_DIRECT when the store uses it and the file
  // system takes it for this file, else buffered.
  absl::StatusOr<UniqueFd> OpenChunkFile(const std::string& path, int flags) const;

  static constexpr size_t kLockStripes = 256;

  FileSystem& fs_;
  const std::string data_dir_;
  const std::string chunks_dir_;
  const std::string tmp_dir_;
  const std::string quarantine_dir_;
  const bool direct_io_;
  const uint64_t incarnation_;
  std::atomic<uint64_t> next_tmp_{0};
  // When Adopt last swept tmp/ for abandoned client files (unix seconds).
  std::atomic<int64_t> last_sweep_s_{0};
  // Stripe locks: writers of one chunk hold LockFor(key). Never nested.
  std::array<absl::Mutex, kLockStripes> locks_;
  // Stripe locks of inode directories: placing a chunk holds
  // DirLockFor(ino) shared (inside its chunk's lock) from making the
  // directory to the rename into it; Trim holds it exclusively (and no
  // chunk lock) to remove the emptied directory, so it cannot remove it
  // between the two.
  std::array<absl::Mutex, kLockStripes> dir_locks_;
  // Chunks not yet known durable, and those a failed sync may have lost.
  WritebackTracker writeback_;
};

}  // namespace ckptfs::storage

#endif  // CKPTFS_SERVER_STORAGE_CHUNK_STORE_H_
