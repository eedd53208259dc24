// See open_file_state.h.
#include "client/open_file_state.h"

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/time/clock.h"
#include "client/io_errors.h"
#include "client/layout.h"
#include "client/replica_io.h"
#include "client/stripe_ops.h"
#include "common/crc32c.h"
#include "common/errno_status.h"
#include "common/log.h"
#include "common/placement.h"

namespace ckptfs::client {
namespace {

// Chunk indexes travel as u32 on the data path.
constexpr uint64_t kMaxChunkIndex = UINT32_MAX;

// Chunks cached per file of `chunk_size`: the read-ahead window and a few
// behind it, plus one chunk per further open handle (up to 16) so that
// readers of one file at slightly different positions still share what
// was fetched; with read_window_per_handle a whole window per further
// handle (a broadcast load with no page cache between the ranks), but at
// most a quarter of the read-cache budget.
size_t CacheCapacity(const ClientOptions& options, uint32_t chunk_size, int handles) {
  const size_t window = static_cast<size_t>(std::max(0, options.readahead_chunks)) + 1;
  const size_t others = static_cast<size_t>(std::clamp(handles - 1, 0, 16));
  const size_t base = window + 3;
  if (!options.read_window_per_handle) return base + others;
  const size_t quarter_budget =
      static_cast<size_t>(std::max<int64_t>(options.read_cache_budget_bytes, 0) / 4 /
                          std::max<uint32_t>(chunk_size, 1));
  return std::max(base + others, std::min(base + others * window, quarter_budget));
}

}  // namespace

OpenFileState::OpenFileState(const ClientServices& services, const meta::Attr& attr)
    : services_(services),
      ino_(attr.ino()),
      layout_(attr.layout()),
      chunk_size_(attr.layout().chunk_size()),
      max_inflight_(std::max(1, services.options.max_inflight_chunks_per_file)),
      size_(attr.size()),
      seen_size_(attr.size()),
      seen_mtime_ns_(attr.mtime_ns()),
      seen_ctime_ns_(attr.ctime_ns()),
      cache_(CacheCapacity(services.options, attr.layout().chunk_size(), 1),
             attr.layout().chunk_size(), services.buffers,
             static_cast<uint32_t>(std::max(0, services.options.readahead_chunks))) {
  if (services_.unsynced_writes != nullptr) services_.unsynced_writes->Hold(ino_);
}

OpenFileState::~OpenFileState() {
  {
    // No request is in flight (each holds a reference): every buffer is
    // here, free or (if a File was never closed) dirty.
    absl::MutexLock lock(&mu_);
    if (dirty_.has_value()) {
      free_buffers_.push_back(std::move(dirty_->buffer));
      dirty_.reset();
    }
    ReturnFreeBuffersLocked();
  }
  if (services_.unsynced_writes != nullptr) services_.unsynced_writes->Release(ino_);
  services_.registry->RemoveExpired(ino_);
}

void OpenFileState::ReturnFreeBuffersLocked() {
  const int reserved_before = std::max(0, buffers_allocated_ - 1);
  buffers_allocated_ -= static_cast<int>(free_buffers_.size());
  const int reserved_after = std::max(0, buffers_allocated_ - 1);
  for (ChunkBuffer& buffer : free_buffers_) {
    services_.buffers->Release(chunk_size_, std::move(buffer));
  }
  free_buffers_.clear();
  services_.buffers->Unreserve(static_cast<size_t>(reserved_before - reserved_after) * chunk_size_);
}

uint64_t OpenFileState::size() const {
  absl::MutexLock lock(&mu_);
  return size_;
}

std::optional<uint64_t> OpenFileState::LiveSize() const {
  absl::MutexLock lock(&mu_);
  if (IdleLocked()) return std::nullopt;
  return size_;
}

void OpenFileState::AddHandle() {
  absl::MutexLock lock(&mu_);
  ++handles_;
  cache_.set_capacity(CacheCapacity(services_.options, chunk_size_, handles_));
}

bool OpenFileState::TryGiveUpReadBuffer() {
  if (!mu_.TryLock()) return false;
  const bool gave = cache_.GiveUpOne(last_read_chunk_);
  mu_.Unlock();
  return gave;
}

void OpenFileState::ReleaseHandle() {
  absl::MutexLock lock(&mu_);
  cache_.set_capacity(CacheCapacity(services_.options, chunk_size_, std::max(1, handles_ - 1)));
  if (--handles_ > 0) return;
  // The last Close has reported a write failure; the next open starts
  // afresh from what the service holds.
  if (!error_.ok()) {
    error_ = absl::OkStatus();
    written_since_commit_ = false;
    written_to_send_.Clear();
    written_unconfirmed_.Clear();
    size_ = seen_size_;
    ++size_version_;
  }
  // Nobody reads or writes through this state any more; a later open may
  // still find it while chunk requests hold it, so keep it consistent.
  cache_.ReleaseMemory();
  ReturnFreeBuffersLocked();
}

uint64_t OpenFileState::size_version() const {
  absl::MutexLock lock(&mu_);
  return size_version_;
}

void OpenFileState::Refresh(const meta::Attr& attr, std::optional<uint64_t> version_before) {
  absl::MutexLock lock(&mu_);
  if (attr.size() != seen_size_ || attr.mtime_ns() != seen_mtime_ns_ ||
      attr.ctime_ns() != seen_ctime_ns_) {
    cache_.Clear();
  }
  seen_size_ = attr.size();
  seen_mtime_ns_ = attr.mtime_ns();
  seen_ctime_ns_ = attr.ctime_ns();
  // Shrinking to a stale size would lose appends and make a later partial
  // chunk write a replace that wipes bytes written here; so the service's
  // smaller size (another client truncated) is taken only when it cannot
  // predate anything this client did.
  const bool current = version_before.has_value() && *version_before == size_version_;
  size_ = IdleLocked() && current ? attr.size() : std::max(size_, attr.size());
}

ChunkBuffer OpenFileState::TakeBufferLocked() {
  // One buffer per write in flight plus the one being filled is all the
  // pipeline needs. The first is always granted; more need the Client's
  // write budget. A writer that can have neither waits for one of this
  // file's writes to finish (one is in flight: every buffer it holds that
  // is not free is queued or in flight, and none is free).
  while (true) {
    if (!free_buffers_.empty()) {
      ChunkBuffer buffer = std::move(free_buffers_.back());
      free_buffers_.pop_back();
      return buffer;
    }
    if (buffers_allocated_ == 0 ||
        (buffers_allocated_ < max_inflight_ + 1 && services_.buffers->TryReserve(chunk_size_))) {
      ++buffers_allocated_;
      return services_.buffers->Acquire(chunk_size_);
    }
    changed_.Wait(&mu_);
  }
}

absl::StatusOr<size_t> OpenFileState::Write(uint64_t offset, WriteSource& source, size_t len,
                                            bool append) {
  // Appends run one at a time: a write may wait with mu_ released, and
  // another append must not take the end of file meanwhile.
  std::optional<absl::MutexLock> append_lock;
  if (append) append_lock.emplace(&append_mu_);
  absl::MutexLock lock(&mu_);
  if (!error_.ok()) return error_;
  if (append) offset = size_;
  if (len == 0) return 0;
  if (offset + len < offset || ChunkIndexOf(offset + len - 1, chunk_size_) > kMaxChunkIndex) {
    return ErrnoStatus(EFBIG, absl::StrCat("write past the largest file of inode ", ino_));
  }
  uint64_t done = 0;
  while (done < len) {
    const uint64_t at = offset + done;
    const uint64_t index = ChunkIndexOf(at, chunk_size_);
    const uint32_t in_chunk = OffsetInChunk(at, chunk_size_);
    const uint32_t n =
        static_cast<uint32_t>(std::min<uint64_t>(chunk_size_ - in_chunk, len - done));
    // A write elsewhere sends the current dirty range first: one buffer
    // holds one contiguous range.
    if (dirty_.has_value() &&
        (dirty_->index != index || in_chunk > dirty_->hi || in_chunk + n < dirty_->lo)) {
      DispatchLocked();
      // Dispatching may have waited (lock released): look again, another
      // writer may have started a dirty chunk meanwhile.
      continue;
    }
    if (!error_.ok()) return error_;
    if (!dirty_.has_value()) {
      ChunkBuffer buffer = TakeBufferLocked();
      if (dirty_.has_value()) {  // another writer started one while we waited
        free_buffers_.push_back(std::move(buffer));
        continue;
      }
      dirty_ = DirtyChunk{index, in_chunk, in_chunk, std::move(buffer)};
    }
    char* dst = dirty_->buffer.get() + in_chunk;
    if (absl::Status copied = source.CopyTo(dst, n); !copied.ok()) {
      // Bytes of the dirty range this write overlapped may be clobbered.
      dirty_->crc32c.reset();
      return copied;
    }
    if (dirty_->crc32c.has_value() && in_chunk == dirty_->hi) {
      dirty_->crc32c = Crc32cExtend(*dirty_->crc32c, dst, n);
    } else {
      dirty_->crc32c.reset();
    }
    dirty_->lo = std::min(dirty_->lo, in_chunk);
    dirty_->hi = std::max(dirty_->hi, in_chunk + n);
    cache_.Invalidate(index);
    if (at + n > size_) {
      size_ = at + n;
      ++size_version_;
    }
    written_since_commit_ = true;
    last_write_ns_ = absl::GetCurrentTimeNanos();
    done += n;
    if (dirty_->hi == chunk_size_) DispatchLocked();
  }
  return len;
}

void OpenFileState::DispatchLocked() {
  if (!dirty_.has_value()) return;
  DirtyChunk chunk = std::move(*dirty_);
  dirty_.reset();
  if (!error_.ok()) {
    // The file has failed; its later data goes nowhere.
    free_buffers_.push_back(std::move(chunk.buffer));
    changed_.SignalAll();
    return;
  }
  const uint64_t ticket = next_ticket_++;
  while (serving_ticket_ != ticket || inflight_ >= max_inflight_ ||
         inflight_chunks_.contains(chunk.index)) {
    changed_.Wait(&mu_);
  }
  ++serving_ticket_;
  ++inflight_;
  inflight_chunks_.insert(chunk.index);
  for (uint32_t server : ReplicaServers(layout_, chunk.index)) unsynced_servers_.insert(server);
  ChunkWrite write;
  write.ino = ino_;
  write.chunk_index = chunk.index;
  write.offset = chunk.lo;
  write.data = chunk.buffer.get() + chunk.lo;
  write.length = chunk.hi - chunk.lo;
  // Replace only a whole chunk. A shorter write merges on the server even
  // when it reaches this client's idea of the end of file: another client
  // may have written the chunk past that end meanwhile, and a replace would
  // drop its bytes. (The server takes a merge from offset 0 whole, without
  // reading the old chunk, when that holds no more than the write.)
  write.replace = chunk.lo == 0 && chunk.hi == chunk_size_;
  write.covers_known_end =
      chunk.lo == 0 && chunk.hi >= ChunkLengthInFile(chunk.index, chunk_size_, size_);
  write.crc32c = chunk.crc32c;
  changed_.SignalAll();  // the next ticket may leave
  // Every copy of the chunk; done once all answered. The buffer rides with
  // the completion, so it outlives every copy's request.
  WriteChunkCopies(*services_.transport, *services_.executor, layout_, write,
                   [self = shared_from_this(), index = chunk.index,
                    buffer = std::move(chunk.buffer)](absl::Status status) mutable {
                     self->WriteDone(index, std::move(buffer), std::move(status));
                   });
}

void OpenFileState::WriteDone(uint64_t index, ChunkBuffer buffer, absl::Status status) {
  absl::MutexLock lock(&mu_);
  --inflight_;
  inflight_chunks_.erase(index);
  free_buffers_.push_back(std::move(buffer));
  // A fetch of this chunk made while the write was queued or in flight (a
  // read-ahead, or a reader of another handle) may hold the old bytes.
  cache_.Invalidate(index);
  if (status.ok()) NoteWrittenLocked(index);
  if (!status.ok() && error_.ok()) {
    error_ = FileIoError(status, absl::StrCat("write of chunk ", index, " of inode ", ino_));
    CKPTFS_LOG(kWarning) << error_.message();
  }
  changed_.SignalAll();
}

void OpenFileState::NoteWrittenLocked(uint64_t index) {
  if (written_untracked_) return;
  written_to_send_.Add(index, index + 1);
  written_unconfirmed_.Add(index, index + 1);
  if (written_to_send_.range_count() > kMaxWrittenRanges ||
      written_unconfirmed_.range_count() > kMaxWrittenRanges) {
    // Scattered writes: stop tracking the file rather than keep (and send)
    // an unbounded record; its missing chunks read as holes again.
    written_untracked_ = true;
    written_to_send_.Clear();
    written_unconfirmed_.Clear();
  }
}

void OpenFileState::CutWrittenLocked(uint64_t size) {
  const uint64_t chunks = ChunksCovering(size, chunk_size_);
  written_to_send_.CutAt(chunks);
  written_unconfirmed_.CutAt(chunks);
}

void OpenFileState::DrainLocked() {
  while (serving_ticket_ != next_ticket_ || inflight_ > 0) changed_.Wait(&mu_);
}

void OpenFileState::SettleChunksLocked(uint64_t first, uint64_t last) {
  if (dirty_.has_value() && dirty_->index >= first && dirty_->index <= last) DispatchLocked();
  auto busy = [&]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    if (serving_ticket_ != next_ticket_) return true;
    for (uint64_t index : inflight_chunks_) {
      if (index >= first && index <= last) return true;
    }
    return false;
  };
  while (busy()) changed_.Wait(&mu_);
}

absl::StatusOr<size_t> OpenFileState::Read(uint64_t offset, void* buf, size_t len,
                                           bool sequential) {
  absl::StatusOr<ReadView> view = ViewInto(offset, len, sequential, static_cast<char*>(buf));
  if (!view.ok()) return view.status();
  view->CopyTo(buf);
  return view->size();
}

absl::StatusOr<ReadView> OpenFileState::View(uint64_t offset, size_t len, bool sequential) {
  return ViewInto(offset, len, sequential, nullptr);
}

absl::StatusOr<ReadView> OpenFileState::ViewInto(uint64_t offset, size_t len, bool sequential,
                                                 char* direct_out) {
  absl::MutexLock lock(&mu_);
  if (!error_.ok()) return error_;
  if (len == 0 || offset >= size_) return ReadView();
  len = static_cast<size_t>(std::min<uint64_t>(len, size_ - offset));
  SettleChunksLocked(ChunkIndexOf(offset, chunk_size_),
                     ChunkIndexOf(offset + len - 1, chunk_size_));
  if (!error_.ok()) return error_;
  if (offset >= size_) return ReadView();  // truncated meanwhile
  len = static_cast<size_t>(std::min<uint64_t>(len, size_ - offset));
  const bool use_cache = sequential || handles_ > 1;
  ReadView view(shared_from_this());
  uint64_t last_index = 0;
  for (const ChunkPiece& piece : SplitRange(offset, len, chunk_size_)) {
    char* out = direct_out == nullptr ? nullptr : direct_out + piece.range_offset;
    absl::Status status = ViewPieceLocked(piece.chunk_index, piece.offset_in_chunk, piece.length,
                                          use_cache, out, view);
    if (!status.ok()) {
      EndViewLocked(view);  // its destructor would take mu_
      return status;
    }
    last_index = piece.chunk_index;
  }
  last_read_chunk_ = last_index;
  if (sequential) ReadAheadLocked(last_index);
  return view;  // moved out before `lock` is released; the moved-from view is empty
}

absl::Status OpenFileState::ViewPieceLocked(uint64_t index, uint32_t offset, uint32_t length,
                                            bool use_cache, char* direct_out, ReadView& view) {
  const uint32_t needed = offset + length;
  bool asked_others = false;  // for a read-cache buffer, once
  while (true) {
    switch (cache_.Find(index, needed)) {
      case ReadCache::Lookup::kReady: {
        // Read in place: the pin keeps the buffer unchanged after mu_ is
        // released, whatever writes, truncates or evictions come.
        ReadCache::Pinned pinned = cache_.Pin(index);
        view.pins_.push_back(pinned.ref);
        view.spans_.push_back({const_cast<char*>(pinned.data) + offset, length});
        view.size_ += length;
        return absl::OkStatus();
      }
      case ReadCache::Lookup::kFetching:
        // Another reader or the read-ahead is fetching it: wait, don't fetch
        // it again.
        changed_.Wait(&mu_);
        continue;
      case ReadCache::Lookup::kMiss:
        break;
    }
    if (!use_cache) break;
    const uint32_t cover = std::max(needed, ChunkLengthInFile(index, chunk_size_, size_));
    ReadCache::Fetch fetch = cache_.StartFetch(index, cover);
    if (fetch.buffer == nullptr && !asked_others && !cache_.full()) {
      // The read budget is spent (not this cache's own bound): another
      // open file may give a buffer up. Asked without mu_, so that no two
      // files' locks are ever held together; look again after.
      asked_others = true;
      mu_.Unlock();
      services_.registry->GiveUpReadBuffer(this);
      mu_.Lock();
      continue;
    }
    if (fetch.buffer == nullptr) break;  // no room: read directly, uncached
    mu_.Unlock();
    absl::StatusOr<uint32_t> stored = FetchChunk(index, 0, cover, fetch.buffer);
    mu_.Lock();
    cache_.FinishFetch(index, fetch.id, stored.ok(), stored.ok() ? *stored : 0);
    changed_.SignalAll();
    if (!stored.ok()) return stored.status();
    // Loop: pin it (or fetch again if a write invalidated it).
  }
  // Straight from the server: into the caller's buffer, or into one of the
  // view's (the network's one copy; no other).
  mu_.Unlock();
  ChunkBuffer owned;
  char* out = direct_out;
  if (out == nullptr) {
    owned = services_.buffers->Acquire(chunk_size_);
    out = owned.get();
  }
  absl::StatusOr<uint32_t> stored = FetchChunk(index, offset, length, out);
  if (!stored.ok() && owned != nullptr) {
    services_.buffers->Release(chunk_size_, std::move(owned));
  }
  mu_.Lock();
  if (!stored.ok()) return stored.status();
  view.spans_.push_back({out, length});
  if (owned != nullptr) view.owned_.push_back(std::move(owned));
  view.size_ += length;
  return absl::OkStatus();
}

void OpenFileState::EndView(ReadView& view) {
  if (!view.pins_.empty()) {
    absl::MutexLock lock(&mu_);
    for (const ReadCache::PinRef& pin : view.pins_) cache_.Unpin(pin);
  }
  for (ChunkBuffer& buffer : view.owned_) {
    services_.buffers->Release(chunk_size_, std::move(buffer));
  }
}

void OpenFileState::EndViewLocked(ReadView& view) {
  for (const ReadCache::PinRef& pin : view.pins_) cache_.Unpin(pin);
  view.pins_.clear();
  for (ChunkBuffer& buffer : view.owned_) {
    services_.buffers->Release(chunk_size_, std::move(buffer));
  }
  view.owned_.clear();
  view.spans_.clear();
  view.size_ = 0;
  view.state_.reset();  // the caller holds this state too
}

absl::StatusOr<uint32_t> OpenFileState::FetchChunk(uint64_t index, uint32_t offset, uint32_t length,
                                                   char* out) {
  if (index > kMaxChunkIndex) {
    // Past the largest file anyone can write (Write says EFBIG), so only a
    // truncate can reach it: a hole. The data protocol carries 32-bit chunk
    // indexes; asking would read chunk index mod 2^32.
    std::memset(out, 0, length);
    return 0;
  }
  absl::StatusOr<size_t> got = ReadChunkCopy(*services_.transport, services_.failed_servers,
                                             layout_, ino_, index, offset, out, length);
  uint32_t stored = 0;
  if (got.ok()) {
    stored = static_cast<uint32_t>(std::min<size_t>(*got, length));
  } else if (ErrnoFromStatus(got.status()) != ENOENT) {
    return FileIoError(got.status(), absl::StrCat("read of chunk ", index, " of inode ", ino_));
  } else if (absl::Status hole = CheckHole(index); !hole.ok()) {
    return hole;  // a lost or reclaimed chunk, not a hole: never hand out zeros for it
  }
  if (stored < length) std::memset(out + stored, 0, length - stored);
  return stored;
}

absl::Status OpenFileState::CheckHole(uint64_t index) {
  {
    absl::MutexLock lock(&mu_);
    if (written_unconfirmed_.Contains(index)) return LostChunkError(index);
  }
  // A missing chunk inside the file is a hole while the file has a name
  // and the service does not record it written. Once its last name is
  // gone, the metadata service reclaims its chunks after the orphan grace
  // period, and a handle still open would read zeros in place of the data:
  // refuse instead.
  meta::InodeRequest request;
  request.set_ino(ino_);
  request.set_with_written(true);
  absl::StatusOr<meta::AttrReply> reply = services_.meta->GetAttr(request);
  if (reply.ok() && reply->attr().nlink() > 0) {
    if (IsWritten(reply->written(), index)) return LostChunkError(index);
    return absl::OkStatus();
  }
  if (!reply.ok() && ErrnoFromStatus(reply.status()) != ENOENT) return reply.status();
  return ErrnoStatus(EIO, absl::StrCat("chunk ", index, " of inode ", ino_,
                                       " is gone: the file was deleted while open and its data "
                                       "reclaimed (ckptfs-meta --orphan_grace_s); reopen it by "
                                       "name"));
}

absl::Status OpenFileState::LostChunkError(uint64_t index) const {
  const std::vector<uint32_t> servers = ReplicaServers(layout_, index);
  return ErrnoStatus(
      EIO, absl::StrCat("chunk ", index, " of inode ", ino_, " is lost: it was written, but ",
                        servers.size() == 1 ? "storage server " : "none of storage servers ",
                        absl::StrJoin(servers, ", "),
                        servers.size() == 1 ? " no longer holds it" : " holds it any more",
                        " (a replaced disk, a corrupt copy the scrubber set aside, a power loss "
                        "before a sync); `ckptfs repair` cannot rebuild it with no copy left: "
                        "restore the file from another checkpoint or write it again"));
}

void OpenFileState::ReadAheadLocked(uint64_t after_index) {
  const int window = services_.options.readahead_chunks;
  for (int i = 1; i <= window; ++i) {
    const uint64_t index = after_index + static_cast<uint64_t>(i);
    const uint32_t cover = ChunkLengthInFile(index, chunk_size_, size_);
    if (cover == 0) break;
    if (cache_.Find(index, cover) != ReadCache::Lookup::kMiss) continue;
    // Chunks with writes pending are read after those writes land.
    if (inflight_chunks_.contains(index) || (dirty_.has_value() && dirty_->index == index)) {
      continue;
    }
    ReadCache::Fetch fetch = cache_.StartReadAhead(index, cover, after_index);
    if (fetch.buffer == nullptr) break;
    services_.executor->Submit([self = shared_from_this(), index, cover, fetch] {
      absl::StatusOr<uint32_t> stored = self->FetchChunk(index, 0, cover, fetch.buffer);
      absl::MutexLock lock(&self->mu_);
      self->cache_.FinishFetch(index, fetch.id, stored.ok(), stored.ok() ? *stored : 0);
      self->changed_.SignalAll();
    });
  }
}

absl::Status OpenFileState::Flush() { return FlushCommit(0).status; }

OpenFileState::FlushRelease OpenFileState::FlushAndReleaseWriter(uint64_t writer) {
  return FlushCommit(writer);
}

absl::Status OpenFileState::RegisterWriter(uint64_t writer) {
  meta::OpenRequest request;
  request.set_ino(ino_);
  request.set_writer_handle(writer);
  return services_.meta->Open(request).status();
}

OpenFileState::FlushRelease OpenFileState::FlushCommit(uint64_t release_writer) {
  FlushRelease result;
  bool publish = false;
  absl::Status write_error;
  uint64_t size = 0;
  int64_t mtime_ns = 0;
  ChunkRanges written;  // the chunks this commit records as written
  bool written_untracked = false;
  {
    absl::MutexLock lock(&mu_);
    while (true) {
      DispatchLocked();
      DrainLocked();
      if (!error_.ok()) {
        write_error = error_;
        break;
      }
      if (written_since_commit_) {
        publish = true;
        break;
      }
      // Nothing new; but a commit another handle started may cover our
      // writes, and close-to-open needs it finished before we return.
      if (commits_running_ == 0) break;
      changed_.Wait(&mu_);
    }
    if (!publish && release_writer == 0) {
      result.status = write_error;
      return result;
    }
    if (publish) {
      written_since_commit_ = false;
      ++commits_running_;
      size = size_;
      mtime_ns = last_write_ns_;
      written = std::move(written_to_send_);
      written_to_send_.Clear();
      written_untracked = written_untracked_;
    }
  }
  // A release alone (nothing written, or the file failed) carries neither
  // size nor mtime: the service changes no attribute for it.
  meta::CommitWriteRequest request;
  request.set_ino(ino_);
  request.set_size(size);
  request.set_mtime_ns(mtime_ns);
  request.set_release_writer(release_writer);
  request.set_failed(!write_error.ok());
  written.AppendTo(request.mutable_written());
  request.set_written_untracked(written_untracked);
  AddUnsyncedWrites(request);
  absl::StatusOr<meta::AttrReply> reply = services_.meta->CommitWrite(request);
  result.released = reply.ok() && release_writer != 0;
  result.status = !write_error.ok() ? write_error : reply.status();
  if (!publish) return result;
  absl::MutexLock lock(&mu_);
  --commits_running_;
  changed_.SignalAll();
  if (!reply.ok()) {
    written_since_commit_ = true;  // the next Flush tries again
    written_to_send_.Add(written);
    return result;
  }
  // With no commit in flight, the service has every chunk recorded but
  // those written since.
  if (commits_running_ == 0) written_unconfirmed_ = written_to_send_;
  seen_size_ = reply->attr().size();
  seen_mtime_ns_ = reply->attr().mtime_ns();
  seen_ctime_ns_ = reply->attr().ctime_ns();
  ++size_version_;
  return result;
}

void OpenFileState::AddUnsyncedWrites(meta::CommitWriteRequest& request) const {
  if (services_.unsynced_writes == nullptr) return;
  for (meta::StorageIncarnation& one : services_.unsynced_writes->Of(ino_)) {
    *request.add_unsynced() = std::move(one);
  }
}

absl::Status OpenFileState::Fsync() {
  if (absl::Status status = Flush(); !status.ok()) return status;
  std::vector<uint32_t> servers;
  {
    absl::MutexLock lock(&mu_);
    // As in Flush: a sync another handle started must end before ours.
    while (unsynced_servers_.empty() && syncs_running_ > 0) changed_.Wait(&mu_);
    servers.assign(unsynced_servers_.begin(), unsynced_servers_.end());
    unsynced_servers_.clear();
    if (servers.empty()) return absl::OkStatus();
    ++syncs_running_;
  }
  // The incarnations these SYNCs name (each confirms its server's) — all
  // durable once they succeed, which the durable commit tells the service.
  std::vector<meta::StorageIncarnation> confirmed;
  if (services_.unsynced_writes != nullptr) {
    for (meta::StorageIncarnation& one : services_.unsynced_writes->Of(ino_)) {
      if (std::find(servers.begin(), servers.end(), one.server_id()) != servers.end()) {
        confirmed.push_back(std::move(one));
      }
    }
  }
  absl::Status status = ForEachServer(*services_.executor, servers, [this](uint32_t id) {
    return services_.transport->SyncChunks(id, ino_);
  });
  meta::CommitWriteRequest request;
  {
    absl::MutexLock lock(&mu_);
    --syncs_running_;
    changed_.SignalAll();
    if (!status.ok()) {
      unsynced_servers_.insert(servers.begin(), servers.end());
      return FileIoError(status, absl::StrCat("fsync of inode ", ino_));
    }
    request.set_ino(ino_);
    request.set_size(size_);
    request.set_mtime_ns(last_write_ns_);
  }
  // The bytes are on stable storage; now make the size that names them as
  // durable (Flush's commit only reached the service's log in memory).
  request.set_durable(true);
  for (meta::StorageIncarnation& one : confirmed) *request.add_synced() = std::move(one);
  AddUnsyncedWrites(request);
  absl::StatusOr<meta::AttrReply> reply = services_.meta->CommitWrite(request);
  if (!reply.ok()) {
    absl::MutexLock lock(&mu_);
    unsynced_servers_.insert(servers.begin(), servers.end());
    return reply.status();
  }
  return absl::OkStatus();
}

absl::Status OpenFileState::TruncateStorage(uint64_t new_size, uint64_t service_size) {
  uint64_t trim_at = 0;
  {
    absl::MutexLock lock(&mu_);
    if (dirty_.has_value()) {
      const uint64_t start = ChunkStart(dirty_->index, chunk_size_);
      if (new_size <= start + dirty_->lo) {
        free_buffers_.push_back(std::move(dirty_->buffer));
        dirty_.reset();
        changed_.SignalAll();
      } else if (new_size < start + dirty_->hi) {
        dirty_->hi = static_cast<uint32_t>(new_size - start);
        dirty_->crc32c.reset();  // it covered the bytes cut off
      }
    }
    DrainLocked();
    CutWrittenLocked(new_size);
    trim_at = std::min(std::max(size_, service_size), new_size);
    cache_.InvalidateFrom(ChunkIndexOf(trim_at, chunk_size_));
  }
  return TrimStripe(*services_.transport, *services_.executor, ino_, layout_, trim_at);
}

void OpenFileState::SetSize(uint64_t size) {
  absl::MutexLock lock(&mu_);
  size_ = size;
  ++size_version_;
  seen_size_ = size;
  cache_.InvalidateFrom(ChunkIndexOf(size, chunk_size_));
  CutWrittenLocked(size);
  if (size == 0) written_untracked_ = false;  // the service tracks the file afresh
}

}  // namespace ckptfs::client
