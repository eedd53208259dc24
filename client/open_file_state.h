// OpenFileState: everything one Client knows about one open inode, shared
// by all its File handles — the layout, the size including unflushed
// writes, the write-behind chunk buffers, the chunk writes in flight, the
// sticky first error, and the read-ahead cache.
//
// Write path: a write is copied into the current dirty chunk buffer; a full
// buffer, or one that a write elsewhere displaces, is dispatched to the
// IoExecutor as one WRITE to each server holding a copy of the chunk
// (client/replica_io.h), done when every copy answered; a copy that fails
// fails the write, and so the file (the sticky error), which every later
// write, read, flush, fsync and the last close report; a copy that lacks
// the bytes before a partial write is rebuilt first (replica_io.h). At most
// options.max_inflight_chunks_per_file are in flight; a writer that would
// exceed it waits (backpressure). Dispatches leave in FIFO order, and two
// writes of the same chunk are never in flight together, so the server
// applies them in the order they were made. A WRITE replaces the chunk only
// when its bytes cover all the chunk holds at the current size; otherwise
// the server merges it. Buffers come from and go back to the Client's
// BufferPool.
//
// Read path: dirty or in-flight data of the chunks read is written first,
// so a handle sees its own writes. Sequential readers (and any reader while
// several handles are open) go through the shared ReadCache, which fetches
// whole chunks once and reads ahead options.readahead_chunks; other reads
// go straight from the server into a buffer of the reader's. A chunk is
// read from one of its copies, the next tried when a server fails, lacks
// it or answers short (the longest answer wins; replica_io.h). Never-written
// chunks (holes) and bytes past a chunk's stored length read as zeros, and
// nothing past the file size is returned. A chunk that no copy holds is a
// hole only if it was never written: one that this state's writes reached
// (acknowledged by every copy, its size commit perhaps not yet made) or
// that the service's record of written chunks names (GetAttr with_written,
// common/written_chunks.h) is lost, and reads as EIO. A read is a ReadView: cached chunks are
// pinned and read in place, outside mu_, so concurrent readers of one file
// share mu_ only to look up and pin; Read copies the view out.
//
// Written chunks: every chunk write acknowledged is recorded, and sent
// with the next size commit (CommitWriteRequest.written) for the service's
// record; a truncate drops the indexes past the new size.
//
// Durability: the transport records which run (incarnation) of each server
// acknowledged the file's writes (client/unsynced_writes.h; held while this
// state lives); Fsync's SYNCs name them, so a server that restarted since
// fails the fsync, and every size commit reports those not yet synced.
//
// Thread-safety: every public method may be called from any thread. mu_
// guards all mutable state and is never held across network I/O. Lock
// order: append_mu_, then mu_, then the BufferPool's or IoExecutor's.
// Chunk requests in flight hold a shared_ptr to the state, so it outlives
// its last handle until they end.
#ifndef CKPTFS_CLIENT_OPEN_FILE_STATE_H_
#define CKPTFS_CLIENT_OPEN_FILE_STATE_H_

#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_set.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "client/client_services.h"
#include "client/file.h"
#include "client/read_cache.h"
#include "client/write_source.h"
#include "common/written_chunks.h"
#include "proto/meta.pb.h"

namespace ckptfs::client {

class OpenFileState : public std::enable_shared_from_this<OpenFileState> {
 public:
  // `attr` is a regular file's, fresh from the service.
  // REQUIRES: ValidateLayout(attr.layout()).ok(); `services` outlives this.
  OpenFileState(const ClientServices& services, const meta::Attr& attr);
  OpenFileState(const OpenFileState&) = delete;
  OpenFileState& operator=(const OpenFileState&) = delete;
  ~OpenFileState();

  uint64_t ino() const { return ino_; }
  const meta::Layout& layout() const { return layout_; }
  // The size including bytes not yet flushed.
  uint64_t size() const ABSL_LOCKS_EXCLUDED(mu_);
  // size() while a handle is open or work is pending, else nullopt (then
  // the service's size is the truth; another client may have changed it).
  std::optional<uint64_t> LiveSize() const ABSL_LOCKS_EXCLUDED(mu_);

  // Handles: every File counts itself in and out. When the last goes, the
  // read cache's memory is released and a write error (reported by that
  // last Close) is forgotten, with the size back at the service's.
  void AddHandle() ABSL_LOCKS_EXCLUDED(mu_);
  void ReleaseHandle() ABSL_LOCKS_EXCLUDED(mu_);

  // Gives the least recently used read-cache buffer that nobody reads back
  // to the pool (another file needs the read budget). False, changing
  // nothing, when there is none or the state is busy (mu_ held elsewhere:
  // never waits for it).
  bool TryGiveUpReadBuffer() ABSL_LOCKS_EXCLUDED(mu_);

  // Changes whenever this client changes the file's size (a write that
  // extends it, a commit, a truncate): an attr read from the service while
  // it changed may predate what this client did.
  uint64_t size_version() const ABSL_LOCKS_EXCLUDED(mu_);

  // Takes in attributes the service returned at an open (close-to-open): a
  // changed size, mtime or ctime drops cached chunks. The service's size is
  // adopted as is (it may be smaller: another client truncated) only when
  // no handle is open, nothing is pending, and `version_before` — the
  // size_version() read before the RPC that returned `attr`, if the caller
  // held this state then — shows nothing changed meanwhile; otherwise the
  // larger size wins.
  void Refresh(const meta::Attr& attr, std::optional<uint64_t> version_before)
      ABSL_LOCKS_EXCLUDED(mu_);

  // Writes `len` bytes taken from `source` at `offset`, or at the current
  // size if `append`. Returns len, or the file's first write error, or the
  // source's error (the bytes before it are written).
  absl::StatusOr<size_t> Write(uint64_t offset, WriteSource& source, size_t len, bool append)
      ABSL_LOCKS_EXCLUDED(mu_);

  // Reads up to len bytes at offset (short only at end of file) into buf:
  // the bytes of View, copied once, outside mu_ (bytes fetched straight
  // from a server land in buf directly).
  // `sequential`: the handle reads sequentially, so read ahead.
  absl::StatusOr<size_t> Read(uint64_t offset, void* buf, size_t len, bool sequential)
      ABSL_LOCKS_EXCLUDED(mu_);
  // The bytes Read would return, left where they lie (see ReadView).
  absl::StatusOr<ReadView> View(uint64_t offset, size_t len, bool sequential)
      ABSL_LOCKS_EXCLUDED(mu_);

  // Waits for every chunk write, then commits the size in the metadata
  // service if anything was written since the last commit.
  absl::Status Flush() ABSL_LOCKS_EXCLUDED(mu_);

  // Writer registration (checkpoints): a handle that may write is
  // registered with the service under a random id while it writes.
  // RegisterWriter: one Open RPC with writer_handle = `writer`.
  absl::Status RegisterWriter(uint64_t writer) ABSL_LOCKS_EXCLUDED(mu_);
  // Flush, then one CommitWrite that publishes the size (if anything was
  // written) and releases `writer` — sent even if nothing was written —
  // with failed = true if a write of the file has failed (the sticky error,
  // which is then returned). `released`: the service took the release (the
  // CommitWrite succeeded); otherwise the caller still holds the
  // registration and must release it later.
  struct FlushRelease {
    absl::Status status;
    bool released = false;
  };
  FlushRelease FlushAndReleaseWriter(uint64_t writer) ABSL_LOCKS_EXCLUDED(mu_);

  // Flush, then SYNC on every server that received chunks (any copy) since
  // the last sync. EIO when one of them restarted after it acknowledged a
  // write of the file that no sync confirmed (the bytes may be lost); every
  // later Fsync fails the same way, as the record of them stays. A success
  // tells the service which incarnations are now durable (its checkpoint
  // commit then no longer asks those servers to have kept running).
  absl::Status Fsync() ABSL_LOCKS_EXCLUDED(mu_);

  // The storage half of a truncate: drops buffered bytes at or past
  // `new_size`, waits for writes in flight, then TRIMs every server of the
  // stripe set (at the smaller of the old and new size, so an extension
  // reads zeros). The old size is the larger of this client's and
  // `service_size` (the service's, just read: another client may have
  // extended the file since this state last saw it). The caller then
  // records the size in the metadata service and calls Refresh or SetSize.
  absl::Status TruncateStorage(uint64_t new_size, uint64_t service_size) ABSL_LOCKS_EXCLUDED(mu_);

  // After the service recorded `size` for a truncate.
  void SetSize(uint64_t size) ABSL_LOCKS_EXCLUDED(mu_);

 private:
  // The chunk buffer being filled.
  struct DirtyChunk {
    uint64_t index = 0;
    uint32_t lo = 0;  // dirty bytes [lo, hi) of the chunk
    uint32_t hi = 0;
    ChunkBuffer buffer;
    // CRC32C of bytes [lo, hi), kept while the chunk is filled by appends
    // only (computed right after each copy, while the bytes are in the CPU
    // cache); nullopt once a write lands elsewhere in it.
    std::optional<uint32_t> crc32c = 0;
  };

  // Sends the dirty chunk, if any, waiting for its turn (FIFO), for a free
  // in-flight slot and for an earlier write of the same chunk to finish.
  void DispatchLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Completion of a chunk write, on an IoExecutor thread.
  void WriteDone(uint64_t index, ChunkBuffer buffer, absl::Status status) ABSL_LOCKS_EXCLUDED(mu_);
  ChunkBuffer TakeBufferLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Gives the idle write buffers back to the pool, with their budget.
  void ReturnFreeBuffersLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  bool IdleLocked() const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    return handles_ == 0 && !written_since_commit_ && !dirty_.has_value() && inflight_ == 0 &&
           commits_running_ == 0;
  }
  // Waits until no chunk write is queued or in flight.
  void DrainLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Makes the chunks [first, last] readable from the servers: dispatches
  // the dirty one and waits for queued and in-flight writes among them.
  void SettleChunksLocked(uint64_t first, uint64_t last) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  // Flush and FlushAndReleaseWriter (release_writer 0: a plain flush).
  FlushRelease FlushCommit(uint64_t release_writer) ABSL_LOCKS_EXCLUDED(mu_);
  // Adds to a size commit the server incarnations that hold writes of the
  // file not yet synced (client/unsynced_writes.h), so that a checkpoint
  // commit syncing them fails if one of those servers restarted since.
  void AddUnsyncedWrites(meta::CommitWriteRequest& request) const;

  friend class ReadView;
  // View, with bytes fetched straight from a server put at `direct_out`
  // (the caller's buffer, for Read) instead of in buffers the view owns.
  absl::StatusOr<ReadView> ViewInto(uint64_t offset, size_t len, bool sequential, char* direct_out)
      ABSL_LOCKS_EXCLUDED(mu_);
  // Adds one piece of chunk `index` to `view`: a pinned cache entry, or a
  // fetch straight from the server into `direct_out` (if not null) or into
  // a buffer the view owns.
  absl::Status ViewPieceLocked(uint64_t index, uint32_t offset, uint32_t length, bool use_cache,
                               char* direct_out, ReadView& view) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Ends a view: unpins its cache entries and gives its buffers back.
  void EndView(ReadView& view) ABSL_LOCKS_EXCLUDED(mu_);
  void EndViewLocked(ReadView& view) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Fetches chunk bytes [offset, offset + length) into out from one of its
  // copies, zero-filling holes; returns the bytes the copy had. No lock
  // held.
  absl::StatusOr<uint32_t> FetchChunk(uint64_t index, uint32_t offset, uint32_t length, char* out)
      ABSL_LOCKS_EXCLUDED(mu_);
  // Chunk `index` is on none of its servers: OK if it is a hole (never
  // written, and the inode still has a name); EIO if a write of it was
  // acknowledged here or the service records it written (the data is lost),
  // or if the inode was deleted (its chunks may have been reclaimed). At
  // most one RPC.
  absl::Status CheckHole(uint64_t index) ABSL_LOCKS_EXCLUDED(mu_);
  // The EIO for chunk `index`, written and now on no server.
  absl::Status LostChunkError(uint64_t index) const;
  // Records chunk `index` as written (a write of it was acknowledged).
  void NoteWrittenLocked(uint64_t index) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Forgets the written chunks wholly past `size` (a truncate).
  void CutWrittenLocked(uint64_t size) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void ReadAheadLocked(uint64_t after_index) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  const ClientServices& services_;
  const uint64_t ino_;
  const meta::Layout layout_;
  const uint32_t chunk_size_;
  const int max_inflight_;

  // Held by an O_APPEND write for its whole duration. Lock order: append_mu_
  // before mu_.
  absl::Mutex append_mu_;
  mutable absl::Mutex mu_;
  // Signalled on every change waiters care about: a write done, a fetch
  // done, a dispatch leaving the queue.
  absl::CondVar changed_;
  int handles_ ABSL_GUARDED_BY(mu_) = 0;
  uint64_t size_ ABSL_GUARDED_BY(mu_) = 0;
  uint64_t size_version_ ABSL_GUARDED_BY(mu_) = 0;
  // The service's size, mtime and ctime as last seen, to notice others'
  // writes: a rewrite in place that keeps the size and sets an older mtime
  // still moves the service-set ctime.
  uint64_t seen_size_ ABSL_GUARDED_BY(mu_) = 0;
  int64_t seen_mtime_ns_ ABSL_GUARDED_BY(mu_) = 0;
  int64_t seen_ctime_ns_ ABSL_GUARDED_BY(mu_) = 0;
  int64_t last_write_ns_ ABSL_GUARDED_BY(mu_) = 0;
  bool written_since_commit_ ABSL_GUARDED_BY(mu_) = false;
  int commits_running_ ABSL_GUARDED_BY(mu_) = 0;
  int syncs_running_ ABSL_GUARDED_BY(mu_) = 0;
  absl::Status error_ ABSL_GUARDED_BY(mu_);  // first chunk write error, sticky
  // Chunks whose writes were acknowledged since the last size commit took
  // them (sent with the next), and those plus the ones a commit in flight
  // carries (what a read of a missing chunk checks).
  ChunkRanges written_to_send_ ABSL_GUARDED_BY(mu_);
  ChunkRanges written_unconfirmed_ ABSL_GUARDED_BY(mu_);
  // More ranges were written than kMaxWrittenRanges: the next commit tells
  // the service to stop tracking the file, and nothing more is recorded
  // until a truncate to 0.
  bool written_untracked_ ABSL_GUARDED_BY(mu_) = false;

  std::optional<DirtyChunk> dirty_ ABSL_GUARDED_BY(mu_);
  std::vector<ChunkBuffer> free_buffers_ ABSL_GUARDED_BY(mu_);
  // Write buffers this file holds (free, dirty, queued or in flight); all
  // but the first are reserved from the pool's write budget.
  int buffers_allocated_ ABSL_GUARDED_BY(mu_) = 0;
  uint64_t next_ticket_ ABSL_GUARDED_BY(mu_) = 0;     // dispatches queued so far
  uint64_t serving_ticket_ ABSL_GUARDED_BY(mu_) = 0;  // next dispatch to leave
  int inflight_ ABSL_GUARDED_BY(mu_) = 0;
  absl::flat_hash_set<uint64_t> inflight_chunks_ ABSL_GUARDED_BY(mu_);
  absl::flat_hash_set<uint32_t> unsynced_servers_ ABSL_GUARDED_BY(mu_);

  ReadCache cache_ ABSL_GUARDED_BY(mu_);
  // The last chunk a read of this file reached: where a buffer given up to
  // another file (TryGiveUpReadBuffer) is taken from outside its window.
  uint64_t last_read_chunk_ ABSL_GUARDED_BY(mu_) = 0;
};

}  // namespace ckptfs::client

#endif  // CKPTFS_CLIENT_OPEN_FILE_STATE_H_
