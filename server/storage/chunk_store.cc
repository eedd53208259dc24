// See chunk_store.h.
#include "server/storage/chunk_store.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "common/crc32c.h"
#include "common/errno_status.h"
#include "common/log.h"
#include "common/random_id.h"
#include "common/unique_fd.h"

namespace ckptfs::storage {

static_assert(kBlockSize == kChunkBlockSize, "chunk files are made of aligned-buffer blocks");
namespace {

std::string ChunkName(ChunkKey key) {
  return absl::StrCat("chunk ", key.index, " of inode ", key.ino);
}

// Whether the chunk file at `path`, `file_size` bytes long, is a whole chunk
// of at most `len` data bytes: its header decodes, and the file is as long
// as that header says. A torn file (cut short by a power loss, or with a
// damaged header) is not, so a write does not take it for one that its
// payload covers and silently drop the bytes it stood for.
bool HoldsAtMost(FileSystem& fs, const std::string& path, size_t file_size, size_t len) {
  if (file_size < kChunkHeaderSize || file_size > kChunkHeaderSize + RoundUpToBlock(len)) {
    return false;
  }
  auto fd = fs.Open(path, O_RDONLY);
  if (!fd.ok()) return false;
  char block[kChunkHeaderSize];
  if (::pread(fd->get(), block, sizeof(block), 0) != static_cast<ssize_t>(sizeof(block))) {
    return false;
  }
  auto header = DecodeChunkHeader(absl::string_view(block, sizeof(block)), path);
  return header.ok() && header->data_length <= len &&
         file_size == ChunkFileSize(header->data_length);
}

// mkdir that is content with an existing directory. Returns whether it
// made one.
absl::StatusOr<bool> MakeDir(FileSystem& fs, const std::string& path) {
  absl::Status s = fs.MakeDir(path);
  if (s.ok()) return true;
  if (ErrnoFromStatus(s) == EEXIST) return false;
  return s;
}

}  // namespace

absl::StatusOr<std::unique_ptr<ChunkStore>> ChunkStore::Open(const std::string& data_dir,
                                                             FileSystem* fs) {
  FileSystem& files = fs != nullptr ? *fs : FileSystem::Default();
  const std::string chunks = absl::StrCat(data_dir, "/chunks");
  const std::string tmp = absl::StrCat(data_dir, "/tmp");
  bool made = false;
  for (const std::string& dir : {chunks, tmp, absl::StrCat(data_dir, "/quarantine")}) {
    auto made_dir = MakeDir(files, dir);
    if (!made_dir.ok()) return made_dir.status();
    made = made || *made_dir;
  }
  if (made) {
    // A new store: its directories must outlive a power loss, or so would
    // not every chunk a Sync(ino) confirms (Sync syncs chunks/ and below).
    auto ring = Ring::Create(1);
    if (!ring.ok()) return ring.status();
    if (absl::Status s = files.SyncDir(**ring, data_dir); !s.ok()) return s;
  }
  // Leftovers of writes a crash interrupted: never published, never acked.
  auto leftovers = files.ListDir(tmp);
  if (!leftovers.ok()) return leftovers.status();
  for (const std::string& name : *leftovers) {
    absl::Status s = files.Unlink(absl::StrCat(tmp, "/", name));
    if (!s.ok() && ErrnoFromStatus(s) != ENOENT) return s;
  }
  if (!leftovers->empty()) {
    CKPTFS_LOG(kInfo) << "removed " << leftovers->size() << " unfinished chunk writes from " << tmp;
  }
  // O_DIRECT is refused with EINVAL at open by file systems that lack it.
  const std::string probe = absl::StrCat(tmp, "/direct-io-probe");
  bool direct_io = true;
  auto fd = files.Open(probe, O_WRONLY | O_CREAT | O_DIRECT, 0644);
  if (!fd.ok() && ErrnoFromStatus(fd.status()) == EINVAL) {
    direct_io = false;
    fd = files.Open(probe, O_WRONLY | O_CREAT, 0644);
  }
  if (!fd.ok()) return fd.status();
  fd->Reset();
  (void)files.Unlink(probe);
  if (!direct_io) {
    CKPTFS_LOG(kWarning) << data_dir << ": file system refuses O_DIRECT; using buffered I/O";
  }
  const uint64_t incarnation = RandomNonzeroId();
  CKPTFS_LOG(kInfo) << data_dir << ": incarnation " << absl::StrCat("0x", absl::Hex(incarnation));
  return std::unique_ptr<ChunkStore>(new ChunkStore(data_dir, direct_io, incarnation, files));
}

ChunkStore::ChunkStore(std::string data_dir, bool direct_io, uint64_t incarnation, FileSystem& fs)
    : fs_(fs),
      data_dir_(std::move(data_dir)),
      chunks_dir_(ChunksDirectory(data_dir_)),
      tmp_dir_(absl::StrCat(data_dir_, "/tmp")),
      quarantine_dir_(absl::StrCat(data_dir_, "/quarantine")),
      direct_io_(direct_io),
      incarnation_(incarnation) {}

std::string ChunkStore::InodeDir(uint64_t ino) const { return absl::StrCat(chunks_dir_, "/", ino); }

std::string ChunkStore::ChunkPath(ChunkKey key) const { return ChunkFilePath(data_dir_, key); }

absl::Mutex& ChunkStore::LockFor(ChunkKey key) {
  uint64_t h = key.ino * 0x9E3779B97F4A7C15ull;
  h ^= (key.index + 0x632BE59BD9B4E019ull) * 0xC2B2AE3D27D4EB4Full;
  h ^= h >> 29;
  return locks_[h % kLockStripes];
}

absl::StatusOr<UniqueFd> ChunkStore::OpenChunkFile(const std::string& path, int flags) const {
  if (direct_io_) {
    auto fd = fs_.Open(path, flags | O_DIRECT, 0644);
    if (fd.ok() || ErrnoFromStatus(fd.status()) != EINVAL) return fd;
  }
  return fs_.Open(path, flags, 0644);
}

absl::Status ChunkStore::Publish(Ring& ring, ChunkKey key, const char* header_block,
                                 const char* data, size_t padded_data_len) {
  const std::string tmp =
      absl::StrCat(tmp_dir_, "/", key.ino, ".", key.index, ".", next_tmp_.fetch_add(1));
  const uint64_t token = writeback_.Writing();
  auto fd = OpenChunkFile(tmp, O_WRONLY | O_CREAT | O_EXCL);
  if (!fd.ok()) return fd.status();
  UniqueFd file = *std::move(fd);
  std::vector<Ring::Op> ops;
  if (data == nullptr) {
    ops.push_back({Ring::OpKind::kWrite, file.get(), const_cast<char*>(header_block),
                   kChunkHeaderSize + padded_data_len, 0, 0});
  } else {
    ops.push_back({Ring::OpKind::kWrite, file.get(), const_cast<char*>(header_block),
                   kChunkHeaderSize, 0, 0});
    if (padded_data_len > 0) {
      ops.push_back({Ring::OpKind::kWrite, file.get(), const_cast<char*>(data), padded_data_len,
                     static_cast<off_t>(kChunkHeaderSize), 0});
    }
  }
  absl::Status status = ring.Run(ops);
  for (const Ring::Op& op : ops) {
    if (status.ok() && op.result < 0) {
      status = SyscallError(static_cast<int>(-op.result),
                            absl::StrCat("write ", ChunkName(key), " to ", tmp));
    }
  }
  file.Reset();
  if (status.ok()) status = PlaceLocked(tmp, key);
  if (!status.ok()) {
    (void)fs_.Unlink(tmp);
    return status;
  }
  writeback_.Published(key, token);
  return status;
}

absl::Status ChunkStore::PlaceLocked(const std::string& tmp, ChunkKey key) {
  const std::string dir = InodeDir(key.ino);
  const std::string path = ChunkPath(key);
  // The inode directory usually exists already; make it when the rename
  // says it does not. A concurrent Trim removes it (when empty) only
  // holding the directory's lock exclusively, never between our mkdir and
  // rename. A missing `tmp` says ENOENT too (an adopted file its client
  // removed): that is returned as is, without making a directory for it.
  absl::ReaderMutexLock dir_lock(&DirLockFor(key.ino));
  absl::Status status;
  for (int attempt = 0;; ++attempt) {
    status = fs_.Rename(tmp, path);
    if (status.ok() || ErrnoFromStatus(status) != ENOENT || attempt >= 4) break;
    if (!fs_.Stat(tmp).ok()) break;  // the source is gone: ENOENT as is
    status = MakeDir(fs_, dir).status();
    if (!status.ok()) break;
  }
  return status;
}

absl::StatusOr<absl::Time> ChunkStore::CheckAdoptable(const std::string& path, ChunkKey key,
                                                      uint32_t data_length,
                                                      uint32_t data_crc32c) const {
  auto not_it = [&](const std::string& why) {
    return ErrnoStatus(EINVAL, absl::StrCat("adopt ", path, " as ", ChunkName(key), ": ", why));
  };
  if (data_length > kMaxChunkLength) {
    return not_it(
        absl::StrCat(data_length, " data bytes exceed the ", kMaxChunkLength, "-byte chunk limit"));
  }
  auto fd = fs_.Open(path, O_RDONLY | O_NOFOLLOW | O_NONBLOCK);
  if (!fd.ok()) {
    const int err = ErrnoFromStatus(fd.status());
    if (err == ENOENT) {
      return ErrnoStatus(ENOENT, absl::StrCat("adopt ", ChunkName(key), ": no file ", path));
    }
    return err == ELOOP ? not_it("a symbolic link") : fd.status();
  }
  struct stat st {};
  if (::fstat(fd->get(), &st) != 0) return SyscallError(errno, absl::StrCat("fstat ", path));
  if (!S_ISREG(st.st_mode)) return not_it("not a regular file");
  if (static_cast<uint64_t>(st.st_size) != ChunkFileSize(data_length)) {
    return not_it(absl::StrCat("its size ", st.st_size, " is not that of a chunk file of ",
                               data_length, " data bytes"));
  }
  char block[kChunkHeaderSize];
  if (::pread(fd->get(), block, sizeof(block), 0) != static_cast<ssize_t>(sizeof(block))) {
    return not_it("its header cannot be read");
  }
  auto header = DecodeChunkHeader(absl::string_view(block, sizeof(block)), path);
  if (!header.ok()) return not_it(std::string(header.status().message()));
  if (header->key.ino != key.ino || header->key.index != key.index ||
      header->data_length != data_length || header->data_crc32c != data_crc32c) {
    return not_it(absl::StrCat("its header says chunk ", header->key.index, " of inode ",
                               header->key.ino, ", ", header->data_length, " bytes of CRC32C 0x",
                               absl::Hex(header->data_crc32c)));
  }
  return absl::TimeFromTimespec(st.st_mtim);
}

absl::Status ChunkStore::Adopt(ChunkKey key, absl::string_view tmp_name, uint32_t data_length,
                               uint32_t data_crc32c) {
  if (!IsLocalWriteName(tmp_name)) {
    return ErrnoStatus(EINVAL, absl::StrCat("adopt ", ChunkName(key), ": '", tmp_name,
                                            "' is not the name of a client's chunk file"));
  }
  SweepIfDue();
  const std::string tmp = absl::StrCat(tmp_dir_, "/", tmp_name);
  const uint64_t token = writeback_.Writing();
  absl::StatusOr<absl::Time> written_at = CheckAdoptable(tmp, key, data_length, data_crc32c);
  if (!written_at.ok()) return written_at.status();
  absl::MutexLock lock(&LockFor(key));
  if (absl::Status s = RequireNotLongerThan(key, data_length); !s.ok()) return s;
  if (absl::Status s = PlaceLocked(tmp, key); !s.ok()) return s;
  // Its writer wrote it before asking: a sync that failed since then may
  // have lost its pages.
  writeback_.Published(key, token, *written_at);
  return absl::OkStatus();
}

absl::Status ChunkStore::RequireNotLongerThan(ChunkKey key, uint32_t length) const {
  const std::string path = ChunkPath(key);
  auto st = fs_.Stat(path);
  if (!st.ok()) return ErrnoFromStatus(st.status()) == ENOENT ? absl::OkStatus() : st.status();
  const size_t file_size = static_cast<size_t>(st->st_size);
  // A file no longer than `length`'s holds at most that many bytes when the
  // length fills its last block (the common case: a whole chunk); only a
  // length within a block needs the stored header to tell.
  bool longer = file_size > ChunkFileSize(length);
  if (!longer && length % kBlockSize != 0 && file_size == ChunkFileSize(length)) {
    longer = !HoldsAtMost(fs_, path, file_size, length);
  }
  if (!longer) return absl::OkStatus();
  return ErrnoStatus(EEXIST, absl::StrCat(ChunkName(key), " holds more than the ", length,
                                          " bytes offered for adoption (another client wrote "
                                          "past them): refused; send them as a merging WRITE"));
}

void ChunkStore::SweepIfDue() {
  const int64_t now_s = absl::ToUnixSeconds(absl::Now());
  int64_t last = last_sweep_s_.load(std::memory_order_relaxed);
  if (now_s - last < absl::ToInt64Seconds(kAbandonedSweepInterval) ||
      !last_sweep_s_.compare_exchange_strong(last, now_s)) {
    return;
  }
  auto removed = RemoveAbandonedLocalWrites(kAbandonedLocalWriteAge);
  if (!removed.ok()) {
    CKPTFS_LOG(kWarning) << "sweeping " << tmp_dir_ << ": " << removed.status().message();
  }
}

absl::StatusOr<size_t> ChunkStore::RemoveAbandonedLocalWrites(absl::Duration age) {
  auto names = fs_.ListDir(tmp_dir_);
  if (!names.ok()) return names.status();
  const absl::Time cutoff = absl::Now() - age;
  size_t removed = 0;
  for (const std::string& name : *names) {
    if (!IsLocalWriteName(name)) continue;
    const std::string path = absl::StrCat(tmp_dir_, "/", name);
    auto st = fs_.Stat(path);
    if (!st.ok() || absl::FromUnixSeconds(st->st_mtime) >= cutoff) continue;
    if (fs_.Unlink(path).ok()) ++removed;
  }
  if (removed > 0) {
    CKPTFS_LOG(kInfo) << "removed " << removed << " chunk files that clients wrote to " << tmp_dir_
                      << " and never asked to adopt (older than " << age << ")";
  }
  return removed;
}

absl::StatusOr<ChunkHeader> ChunkStore::Load(Ring& ring, ChunkKey key, AlignedBuffer& buffer,
                                             size_t min_capacity) {
  const std::string path = ChunkPath(key);
  auto fd = OpenChunkFile(path, O_RDONLY);
  if (!fd.ok()) {
    if (ErrnoFromStatus(fd.status()) == ENOENT) {
      return ErrnoStatus(ENOENT, absl::StrCat(ChunkName(key), " is not stored here"));
    }
    return fd.status();
  }
  UniqueFd file = *std::move(fd);
  struct stat st {};
  if (::fstat(file.get(), &st) != 0) return SyscallError(errno, absl::StrCat("fstat ", path));
  const size_t file_size = static_cast<size_t>(st.st_size);
  auto corrupt = [&](const std::string& why) {
    absl::Status s =
        ErrnoStatus(EIO, absl::StrCat(ChunkName(key), " (", path, ") is corrupt: ", why));
    CKPTFS_LOG(kError) << s.message();
    return s;
  };
  if (file_size < kChunkHeaderSize || file_size % kBlockSize != 0 ||
      file_size > ChunkFileSize(kMaxChunkLength)) {
    return corrupt(absl::StrCat("file size ", file_size, " is not a valid chunk file size"));
  }
  if (absl::Status s = buffer.Reserve(std::max(file_size, min_capacity)); !s.ok()) return s;
  auto got = ring.Pread(file.get(), buffer.data(), file_size, 0);
  if (!got.ok()) {
    return ErrnoStatus(
        ErrnoFromStatus(got.status()),
        absl::StrCat("read ", ChunkName(key), " from ", path, ": ", got.status().message()));
  }
  if (*got != file_size) {
    return corrupt(absl::StrCat("read ", *got, " of ", file_size, " bytes"));
  }
  auto header = DecodeChunkHeader(absl::string_view(buffer.data(), kChunkHeaderSize), path);
  if (!header.ok()) return corrupt(std::string(header.status().message()));
  if (header->key.ino != key.ino || header->key.index != key.index) {
    return corrupt(
        absl::StrCat("header names chunk ", header->key.index, " of inode ", header->key.ino));
  }
  if (ChunkFileSize(header->data_length) > file_size) {
    return corrupt(absl::StrCat("header says ", header->data_length,
                                " data bytes but the file holds ", file_size));
  }
  const uint32_t crc = Crc32c(buffer.data() + kChunkHeaderSize, header->data_length);
  if (crc != header->data_crc32c) {
    return corrupt(absl::StrCat("data CRC32C 0x", absl::Hex(crc), " != stored 0x",
                                absl::Hex(header->data_crc32c)));
  }
  buffer.set_size(kChunkHeaderSize + header->data_length);
  return *header;
}

absl::StatusOr<ChunkSlice> ChunkStore::Read(Ring& ring, AlignedBuffer& buffer, ChunkKey key,
                                            uint32_t offset, uint32_t length) {
  auto header = Load(ring, key, buffer, 0);
  if (!header.ok()) return header.status();
  const uint64_t stored = header->data_length;
  const uint64_t begin = std::min<uint64_t>(offset, stored);
  const uint64_t end = std::min<uint64_t>(uint64_t{offset} + length, stored);
  ChunkSlice slice;
  slice.data = absl::string_view(buffer.data() + kChunkHeaderSize + begin, end - begin);
  slice.chunk_length = header->data_length;
  // The whole chunk's CRC is already known; a part needs its own.
  slice.data_crc32c = slice.data.size() == stored ? header->data_crc32c
                                                  : Crc32c(slice.data.data(), slice.data.size());
  return slice;
}

absl::Status ChunkStore::Write(Ring& ring, ChunkKey key, uint32_t offset, AlignedBuffer& payload,
                               bool replace, std::optional<uint32_t> payload_crc32c) {
  const size_t len = payload.size();
  if (replace && offset != 0) {
    return ErrnoStatus(EINVAL, absl::StrCat("replacing write of ", ChunkName(key), " at offset ",
                                            offset, " (must be 0)"));
  }
  if (uint64_t{offset} + len > kMaxChunkLength) {
    return ErrnoStatus(
        EINVAL, absl::StrCat("write of ", len, " bytes at offset ", offset, " of ", ChunkName(key),
                             " exceeds the ", kMaxChunkLength, "-byte chunk limit"));
  }
  absl::MutexLock lock(&LockFor(key));
  bool whole = replace;
  if (!replace && offset > 0 && len > 0) {
    // The bytes before `offset` must be stored here already: zeros made up
    // for a chunk this server lost would differ from the other copies'
    // bytes (client/replica_io.h says what a client does then).
    if (absl::Status s = RequireStoredUpTo(key, offset); !s.ok()) return s;
  }
  if (!whole && offset == 0) {
    // The payload covers every old byte when the old chunk's length is
    // within it: no need to read (and merge) the old data, only its header.
    // Otherwise, or when the old file is torn, MergeLocked reads it all
    // (and fails with EIO on a torn one).
    const std::string path = ChunkPath(key);
    auto st = fs_.Stat(path);
    if (!st.ok()) {
      if (ErrnoFromStatus(st.status()) != ENOENT) return st.status();
      whole = true;
    } else {
      whole = HoldsAtMost(fs_, path, static_cast<size_t>(st->st_size), len);
    }
  }
  if (!whole || payload.capacity() < RoundUpToBlock(len)) {
    return MergeLocked(ring, key, offset, payload.view());
  }
  return PublishWhole(ring, key, payload, payload_crc32c);
}

absl::Status ChunkStore::PublishWhole(Ring& ring, ChunkKey key, AlignedBuffer& payload,
                                      std::optional<uint32_t> payload_crc32c) {
  const size_t len = payload.size();
  const size_t padded = RoundUpToBlock(len);
  if (padded > len) std::memset(payload.data() + len, 0, padded - len);
  AlignedBuffer header_block;
  if (absl::Status s = header_block.Reserve(kChunkHeaderSize); !s.ok()) return s;
  const uint32_t crc = payload_crc32c.has_value() ? *payload_crc32c : Crc32c(payload.data(), len);
  EncodeChunkHeader({key, static_cast<uint32_t>(len), crc}, header_block.data());
  return Publish(ring, key, header_block.data(), payload.data(), padded);
}

absl::Status ChunkStore::Fill(Ring& ring, ChunkKey key, AlignedBuffer& payload,
                              std::optional<uint32_t> payload_crc32c) {
  if (payload.size() > kMaxChunkLength) {
    return ErrnoStatus(EINVAL,
                       absl::StrCat("fill of ", ChunkName(key), " with ", payload.size(),
                                    " bytes exceeds the ", kMaxChunkLength, "-byte chunk limit"));
  }
  if (payload.capacity() < RoundUpToBlock(payload.size())) {
    return ErrnoStatus(EINVAL, absl::StrCat("fill of ", ChunkName(key),
                                            ": payload buffer not padded to whole blocks"));
  }
  absl::MutexLock lock(&LockFor(key));
  auto st = fs_.Stat(ChunkPath(key));
  if (st.ok()) {
    return ErrnoStatus(EEXIST,
                       absl::StrCat(ChunkName(key), " is stored here already: fill refused"));
  }
  if (ErrnoFromStatus(st.status()) != ENOENT) return st.status();
  return PublishWhole(ring, key, payload, payload_crc32c);
}

absl::Status ChunkStore::ForEachChunk(absl::FunctionRef<bool(ChunkKey)> visit) const {
  auto inodes = fs_.ListDir(chunks_dir_);
  if (!inodes.ok()) return inodes.status();
  for (const std::string& inode_name : *inodes) {
    uint64_t ino = 0;
    if (!absl::SimpleAtoi(inode_name, &ino)) continue;  // not an inode directory
    auto names = fs_.ListDir(InodeDir(ino));
    if (!names.ok()) {
      if (ErrnoFromStatus(names.status()) == ENOENT) continue;  // trimmed away meanwhile
      return names.status();
    }
    for (const std::string& name : *names) {
      uint32_t index = 0;
      if (!absl::SimpleAtoi(name, &index)) continue;  // not a chunk file
      if (!visit(ChunkKey{ino, index})) return absl::OkStatus();
    }
  }
  return absl::OkStatus();
}

absl::StatusOr<ScrubResult> ChunkStore::Scrub(Ring& ring, AlignedBuffer& buffer, ChunkKey key) {
  ScrubResult result;
  auto bad = [](const absl::Status& s) { return ErrnoFromStatus(s) == EIO; };
  // Reads take no lock: a chunk only changes by an atomic rename.
  absl::StatusOr<ChunkHeader> header = Load(ring, key, buffer, 0);
  result.bytes_read = buffer.size();
  if (header.ok()) return result;
  if (ErrnoFromStatus(header.status()) == ENOENT) {
    result.verdict = ScrubVerdict::kGone;
    return result;
  }
  if (!bad(header.status())) return header.status();
  // Check again where no writer can replace it between the check and the
  // move: only the version that failed is set aside.
  absl::MutexLock lock(&LockFor(key));
  header = Load(ring, key, buffer, 0);
  if (header.ok()) return result;
  if (ErrnoFromStatus(header.status()) == ENOENT) {
    result.verdict = ScrubVerdict::kGone;
    return result;
  }
  if (!bad(header.status())) return header.status();
  const std::string path = ChunkPath(key);
  const std::string aside = absl::StrCat(quarantine_dir_, "/", key.ino, ".", key.index, ".",
                                         absl::ToUnixMillis(absl::Now()));
  if (absl::Status s = fs_.Rename(path, aside); !s.ok()) return s;
  writeback_.Removed(key);
  CKPTFS_LOG(kError) << "scrub: " << ChunkName(key) << " failed its CRC checks ("
                     << header.status().message() << "); moved to " << aside
                     << ": it reads as missing here until a repair writes it again";
  result.verdict = ScrubVerdict::kQuarantined;
  return result;
}

absl::Status ChunkStore::Write(Ring& ring, ChunkKey key, uint32_t offset, absl::string_view data,
                               bool replace) {
  AlignedBuffer payload;
  if (absl::Status s = payload.Reserve(std::max<size_t>(data.size(), 1)); !s.ok()) return s;
  std::memcpy(payload.data(), data.data(), data.size());
  payload.set_size(data.size());
  return Write(ring, key, offset, payload, replace);
}

absl::Status ChunkStore::RequireStoredUpTo(ChunkKey key, uint32_t offset) const {
  uint32_t stored = 0;
  const std::string path = ChunkPath(key);
  auto st = fs_.Stat(path);
  if (!st.ok()) {
    if (ErrnoFromStatus(st.status()) != ENOENT) return st.status();
  } else if (static_cast<size_t>(st->st_size) >= kChunkHeaderSize + offset + kBlockSize) {
    // Data padded to whole blocks: the stored length is past `offset`.
    return absl::OkStatus();
  } else {
    auto fd = fs_.Open(path, O_RDONLY);
    char block[kChunkHeaderSize];
    if (!fd.ok() ||
        ::pread(fd->get(), block, sizeof(block), 0) != static_cast<ssize_t>(sizeof(block))) {
      return absl::OkStatus();  // MergeLocked reads it whole, and reports what is wrong
    }
    auto header = DecodeChunkHeader(absl::string_view(block, sizeof(block)), path);
    if (!header.ok()) return absl::OkStatus();  // torn: MergeLocked says EIO
    stored = header->data_length;
  }
  if (stored >= offset) return absl::OkStatus();
  return ErrnoStatus(ENODATA,
                     absl::StrCat("merging write at offset ", offset, " of ", ChunkName(key),
                                  ", which holds ", stored == 0 ? "nothing" : "only ",
                                  stored == 0 ? "" : absl::StrCat(stored, " bytes"),
                                  " here: refused rather than filling the gap with zeros "
                                  "(extend the chunk first with an empty write at ",
                                  offset, ", or send the whole chunk with replace)"));
}

absl::Status ChunkStore::MergeLocked(Ring& ring, ChunkKey key, uint32_t offset,
                                     absl::string_view data) {
  const size_t end = offset + data.size();
  AlignedBuffer image;
  size_t old_len = 0;
  auto header = Load(ring, key, image, ChunkFileSize(end));
  if (header.ok()) {
    old_len = header->data_length;
  } else if (ErrnoFromStatus(header.status()) == ENOENT) {
    if (absl::Status s = image.Reserve(ChunkFileSize(end)); !s.ok()) return s;
  } else {
    return header.status();
  }
  const size_t new_len = std::max(old_len, end);
  char* bytes = image.data() + kChunkHeaderSize;
  if (offset > old_len) std::memset(bytes + old_len, 0, offset - old_len);
  // An empty WRITE (payload_len 0) only extends the chunk; its data() may be null.
  if (!data.empty()) std::memcpy(bytes + offset, data.data(), data.size());
  std::memset(bytes + new_len, 0, RoundUpToBlock(new_len) - new_len);
  EncodeChunkHeader({key, static_cast<uint32_t>(new_len), Crc32c(bytes, new_len)}, image.data());
  return Publish(ring, key, image.data(), nullptr, RoundUpToBlock(new_len));
}

absl::Status ChunkStore::Cut(Ring& ring, ChunkKey key, uint32_t new_length) {
  AlignedBuffer image;
  auto header = Load(ring, key, image, 0);
  if (!header.ok()) {
    return ErrnoFromStatus(header.status()) == ENOENT ? absl::OkStatus() : header.status();
  }
  if (header->data_length <= new_length) return absl::OkStatus();
  char* bytes = image.data() + kChunkHeaderSize;
  std::memset(bytes + new_length, 0, RoundUpToBlock(new_length) - new_length);
  EncodeChunkHeader({key, new_length, Crc32c(bytes, new_length)}, image.data());
  return Publish(ring, key, image.data(), nullptr, RoundUpToBlock(new_length));
}

absl::Status ChunkStore::Trim(Ring& ring, uint64_t ino, uint64_t new_size, uint32_t chunk_size) {
  if (chunk_size == 0 && new_size != 0) {
    return ErrnoStatus(
        EINVAL, absl::StrCat("trim of inode ", ino, " to ", new_size, " bytes with chunk size 0"));
  }
  const std::string dir = InodeDir(ino);
  auto names = fs_.ListDir(dir);
  if (!names.ok()) {
    return ErrnoFromStatus(names.status()) == ENOENT ? absl::OkStatus() : names.status();
  }
  absl::Status first_error;
  for (const std::string& name : *names) {
    uint32_t index = 0;
    if (!absl::SimpleAtoi(name, &index)) continue;  // not a chunk file
    const ChunkKey key{ino, index};
    const uint64_t start = uint64_t{index} * chunk_size;
    absl::Status status;
    absl::MutexLock lock(&LockFor(key));
    const std::string path = ChunkPath(key);
    if (new_size == 0 || start >= new_size) {
      status = fs_.Unlink(path);
      if (ErrnoFromStatus(status) == ENOENT) status = absl::OkStatus();
      if (status.ok()) writeback_.Removed(key);
    } else if (new_size - start < chunk_size) {
      const uint32_t keep = static_cast<uint32_t>(new_size - start);
      // A file whose padded data fits in `keep` bytes needs no cut.
      auto st = fs_.Stat(path);
      if (st.ok() && static_cast<size_t>(st->st_size) > kChunkHeaderSize + keep) {
        status = Cut(ring, key, keep);
      }
    }
    if (!status.ok() && first_error.ok()) first_error = status;
  }
  // Fails harmlessly (ENOTEMPTY) while chunks remain or a write added one.
  absl::MutexLock dir_lock(&DirLockFor(ino));
  (void)fs_.RemoveDir(dir);
  return first_error;
}

absl::Status ChunkStore::Sync(Ring& ring, uint64_t ino) {
  const uint64_t begun = writeback_.BeginSync();
  if (absl::Status s = SyncInode(ring, ino); !s.ok()) {
    writeback_.Failed(s);
    return s;
  }
  writeback_.Synced(ino, begun);
  return writeback_.CheckNoneLost(ino);
}

absl::Status ChunkStore::SyncInode(Ring& ring, uint64_t ino) {
  const std::string dir = InodeDir(ino);
  auto names = fs_.ListDir(dir);
  if (!names.ok()) {
    if (ErrnoFromStatus(names.status()) != ENOENT) return names.status();
    // No chunk stored. If a Trim removed them all (and the directory), that
    // removal must be durable too, or a power loss brings the old chunks
    // back: bytes a file cut to zero and grown again would read in its holes.
    absl::Status s = fs_.SyncDir(ring, chunks_dir_);
    return ErrnoFromStatus(s) == ENOENT ? absl::OkStatus() : s;
  }
  std::vector<std::string> paths;
  paths.reserve(names->size());
  for (const std::string& name : *names) paths.push_back(absl::StrCat(dir, "/", name));
  // Files trimmed meanwhile are skipped.
  if (absl::Status s = fs_.SyncFiles(ring, paths); !s.ok()) return s;
  // The renames that published the chunks, and the inode directory itself.
  for (const std::string* path : {&dir, &chunks_dir_}) {
    absl::Status s = fs_.SyncDir(ring, *path);
    if (!s.ok() && ErrnoFromStatus(s) != ENOENT) return s;
  }
  return absl::OkStatus();
}

absl::Status ChunkStore::SyncAll() {
  const uint64_t begun = writeback_.BeginSync();
  if (absl::Status s = fs_.SyncFileSystem(data_dir_); !s.ok()) {
    writeback_.Failed(s);
    return s;
  }
  writeback_.Synced(std::nullopt, begun);
  return writeback_.CheckNoneLost(std::nullopt);
}

absl::StatusOr<SpaceUsage> ChunkStore::Space() const {
  auto vfs = fs_.StatFileSystem(data_dir_);
  if (!vfs.ok()) return vfs.status();
  SpaceUsage usage;
  usage.capacity_bytes = uint64_t{vfs->f_blocks} * vfs->f_frsize;
  const uint64_t available = uint64_t{vfs->f_bavail} * vfs->f_frsize;
  usage.used_bytes = usage.capacity_bytes > available ? usage.capacity_bytes - available : 0;
  return usage;
}

}  // namespace ckptfs::storage
