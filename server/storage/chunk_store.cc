// See chunk_store.h.
#include "server/storage/chunk_store.h"

#include <dirent.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
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
#include "common/unique_fd.h"

namespace ckptfs::storage {
namespace {

// Chunk files opened at once by Sync (bounded so fds stay well under limits).
constexpr size_t kSyncBatch = 64;

std::string ChunkName(ChunkKey key) {
  return absl::StrCat("chunk ", key.index, " of inode ", key.ino);
}

// The names in directory `path` except "." and "..". ENOENT passes through.
absl::StatusOr<std::vector<std::string>> ListDir(const std::string& path) {
  DIR* dir = ::opendir(path.c_str());
  if (dir == nullptr) return SyscallError(errno, absl::StrCat("opendir ", path));
  std::vector<std::string> names;
  errno = 0;
  while (dirent* entry = ::readdir(dir)) {
    const absl::string_view name(entry->d_name);
    if (name != "." && name != "..") names.emplace_back(name);
  }
  const int err = errno;
  ::closedir(dir);
  if (err != 0) return SyscallError(err, absl::StrCat("readdir ", path));
  return names;
}

// Whether the chunk file at `path`, `file_size` bytes long, is a whole chunk
// of at most `len` data bytes: its header decodes, and the file is as long
// as that header says. A torn file (cut short by a power loss, or with a
// damaged header) is not, so a write does not take it for one that its
// payload covers and silently drop the bytes it stood for.
bool HoldsAtMost(const std::string& path, size_t file_size, size_t len) {
  if (file_size < kChunkHeaderSize || file_size > kChunkHeaderSize + RoundUpToBlock(len)) {
    return false;
  }
  UniqueFd fd(::open(path.c_str(), O_RDONLY | O_CLOEXEC));
  if (!fd.valid()) return false;
  char block[kChunkHeaderSize];
  if (::pread(fd.get(), block, sizeof(block), 0) != static_cast<ssize_t>(sizeof(block))) {
    return false;
  }
  auto header = DecodeChunkHeader(absl::string_view(block, sizeof(block)), path);
  return header.ok() && header->data_length <= len &&
         file_size == ChunkFileSize(header->data_length);
}

absl::Status MakeDir(const std::string& path) {
  if (::mkdir(path.c_str(), 0755) != 0 && errno != EEXIST) {
    return SyscallError(errno, absl::StrCat("mkdir ", path));
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<std::unique_ptr<ChunkStore>> ChunkStore::Open(const std::string& data_dir) {
  const std::string chunks = absl::StrCat(data_dir, "/chunks");
  const std::string tmp = absl::StrCat(data_dir, "/tmp");
  if (absl::Status s = MakeDir(chunks); !s.ok()) return s;
  if (absl::Status s = MakeDir(tmp); !s.ok()) return s;
  if (absl::Status s = MakeDir(absl::StrCat(data_dir, "/quarantine")); !s.ok()) return s;
  // Leftovers of writes a crash interrupted: never published, never acked.
  auto leftovers = ListDir(tmp);
  if (!leftovers.ok()) return leftovers.status();
  for (const std::string& name : *leftovers) {
    const std::string path = absl::StrCat(tmp, "/", name);
    if (::unlink(path.c_str()) != 0 && errno != ENOENT) {
      return SyscallError(errno, absl::StrCat("unlink ", path));
    }
  }
  if (!leftovers->empty()) {
    CKPTFS_LOG(kInfo) << "removed " << leftovers->size() << " unfinished chunk writes from "
                      << tmp;
  }
  // O_DIRECT is refused with EINVAL at open by file systems that lack it.
  const std::string probe = absl::StrCat(tmp, "/direct-io-probe");
  bool direct_io = true;
  int fd = ::open(probe.c_str(), O_WRONLY | O_CREAT | O_CLOEXEC | O_DIRECT, 0644);
  if (fd < 0 && errno == EINVAL) {
    direct_io = false;
    fd = ::open(probe.c_str(), O_WRONLY | O_CREAT | O_CLOEXEC, 0644);
  }
  if (fd < 0) return SyscallError(errno, absl::StrCat("create ", probe));
  ::close(fd);
  ::unlink(probe.c_str());
  if (!direct_io) {
    CKPTFS_LOG(kWarning) << data_dir << ": file system refuses O_DIRECT; using buffered I/O";
  }
  return std::unique_ptr<ChunkStore>(new ChunkStore(data_dir, direct_io));
}

ChunkStore::ChunkStore(std::string data_dir, bool direct_io)
    : data_dir_(std::move(data_dir)),
      chunks_dir_(absl::StrCat(data_dir_, "/chunks")),
      tmp_dir_(absl::StrCat(data_dir_, "/tmp")),
      quarantine_dir_(absl::StrCat(data_dir_, "/quarantine")),
      direct_io_(direct_io) {}

std::string ChunkStore::InodeDir(uint64_t ino) const {
  return absl::StrCat(chunks_dir_, "/", ino);
}

std::string ChunkStore::ChunkPath(ChunkKey key) const {
  return absl::StrCat(chunks_dir_, "/", key.ino, "/", key.index);
}

absl::Mutex& ChunkStore::LockFor(ChunkKey key) {
  uint64_t h = key.ino * 0x9E3779B97F4A7C15ull;
  h ^= (key.index + 0x632BE59BD9B4E019ull) * 0xC2B2AE3D27D4EB4Full;
  h ^= h >> 29;
  return locks_[h % kLockStripes];
}

absl::StatusOr<int> ChunkStore::OpenChunkFile(const std::string& path, int flags) const {
  int fd = -1;
  if (direct_io_) {
    fd = ::open(path.c_str(), flags | O_DIRECT | O_CLOEXEC, 0644);
    if (fd >= 0 || errno != EINVAL) {
      if (fd < 0) return SyscallError(errno, absl::StrCat("open ", path));
      return fd;
    }
  }
  fd = ::open(path.c_str(), flags | O_CLOEXEC, 0644);
  if (fd < 0) return SyscallError(errno, absl::StrCat("open ", path));
  return fd;
}

absl::Status ChunkStore::Publish(Ring& ring, ChunkKey key, const char* header_block,
                                 const char* data, size_t padded_data_len) {
  const std::string tmp = absl::StrCat(tmp_dir_, "/", key.ino, ".", key.index, ".",
                                       next_tmp_.fetch_add(1));
  auto fd = OpenChunkFile(tmp, O_WRONLY | O_CREAT | O_EXCL);
  if (!fd.ok()) return fd.status();
  UniqueFd file(*fd);
  std::vector<Ring::Op> ops;
  if (data == nullptr) {
    ops.push_back({Ring::OpKind::kWrite, file.get(), const_cast<char*>(header_block),
                   kChunkHeaderSize + padded_data_len, 0, 0});
  } else {
    ops.push_back({Ring::OpKind::kWrite, file.get(), const_cast<char*>(header_block),
                   kChunkHeaderSize, 0, 0});
    if (padded_data_len > 0) {
      ops.push_back({Ring::OpKind::kWrite, file.get(), const_cast<char*>(data),
                     padded_data_len, static_cast<off_t>(kChunkHeaderSize), 0});
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
  if (status.ok()) {
    const std::string dir = InodeDir(key.ino);
    const std::string path = ChunkPath(key);
    // The inode directory usually exists already; make it when the rename
    // says it does not. A concurrent Trim may remove it again (when empty)
    // between our mkdir and rename: try again then.
    for (int attempt = 0;; ++attempt) {
      if (::rename(tmp.c_str(), path.c_str()) == 0) break;
      const int err = errno;
      if (err != ENOENT || attempt >= 4) {
        status = SyscallError(err, absl::StrCat("rename ", tmp, " to ", path));
        break;
      }
      status = MakeDir(dir);
      if (!status.ok()) break;
    }
  }
  if (!status.ok()) ::unlink(tmp.c_str());
  return status;
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
  UniqueFd file(*fd);
  struct stat st {};
  if (::fstat(file.get(), &st) != 0) return SyscallError(errno, absl::StrCat("fstat ", path));
  const size_t file_size = static_cast<size_t>(st.st_size);
  auto corrupt = [&](const std::string& why) {
    absl::Status s = ErrnoStatus(EIO, absl::StrCat(ChunkName(key), " (", path, ") is corrupt: ",
                                                   why));
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
    return ErrnoStatus(ErrnoFromStatus(got.status()),
                       absl::StrCat("read ", ChunkName(key), " from ", path, ": ",
                                    got.status().message()));
  }
  if (*got != file_size) {
    return corrupt(absl::StrCat("read ", *got, " of ", file_size, " bytes"));
  }
  auto header = DecodeChunkHeader(absl::string_view(buffer.data(), kChunkHeaderSize), path);
  if (!header.ok()) return corrupt(std::string(header.status().message()));
  if (header->key.ino != key.ino || header->key.index != key.index) {
    return corrupt(absl::StrCat("header names chunk ", header->key.index, " of inode ",
                                header->key.ino));
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

absl::Status ChunkStore::Write(Ring& ring, ChunkKey key, uint32_t offset,
                               AlignedBuffer& payload, bool replace,
                               std::optional<uint32_t> payload_crc32c) {
  const size_t len = payload.size();
  if (replace && offset != 0) {
    return ErrnoStatus(EINVAL, absl::StrCat("replacing write of ", ChunkName(key),
                                            " at offset ", offset, " (must be 0)"));
  }
  if (uint64_t{offset} + len > kMaxChunkLength) {
    return ErrnoStatus(EINVAL, absl::StrCat("write of ", len, " bytes at offset ", offset,
                                            " of ", ChunkName(key), " exceeds the ",
                                            kMaxChunkLength, "-byte chunk limit"));
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
    struct stat st {};
    const std::string path = ChunkPath(key);
    if (::stat(path.c_str(), &st) != 0) {
      if (errno != ENOENT) return SyscallError(errno, absl::StrCat("stat ", path));
      whole = true;
    } else {
      whole = HoldsAtMost(path, static_cast<size_t>(st.st_size), len);
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
    return ErrnoStatus(EINVAL, absl::StrCat("fill of ", ChunkName(key), " with ",
                                            payload.size(), " bytes exceeds the ",
                                            kMaxChunkLength, "-byte chunk limit"));
  }
  if (payload.capacity() < RoundUpToBlock(payload.size())) {
    return ErrnoStatus(EINVAL, absl::StrCat("fill of ", ChunkName(key),
                                            ": payload buffer not padded to whole blocks"));
  }
  absl::MutexLock lock(&LockFor(key));
  const std::string path = ChunkPath(key);
  struct stat st {};
  if (::stat(path.c_str(), &st) == 0) {
    return ErrnoStatus(EEXIST, absl::StrCat(ChunkName(key),
                                            " is stored here already: fill refused"));
  }
  if (errno != ENOENT) return SyscallError(errno, absl::StrCat("stat ", path));
  return PublishWhole(ring, key, payload, payload_crc32c);
}

absl::Status ChunkStore::ForEachChunk(absl::FunctionRef<bool(ChunkKey)> visit) const {
  auto inodes = ListDir(chunks_dir_);
  if (!inodes.ok()) return inodes.status();
  for (const std::string& inode_name : *inodes) {
    uint64_t ino = 0;
    if (!absl::SimpleAtoi(inode_name, &ino)) continue;  // not an inode directory
    auto names = ListDir(InodeDir(ino));
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
  const std::string aside =
      absl::StrCat(quarantine_dir_, "/", key.ino, ".", key.index, ".", absl::ToUnixMillis(absl::Now()));
  if (::rename(path.c_str(), aside.c_str()) != 0) {
    return SyscallError(errno, absl::StrCat("rename ", path, " to ", aside));
  }
  CKPTFS_LOG(kError) << "scrub: " << ChunkName(key) << " failed its CRC checks ("
                     << header.status().message() << "); moved to " << aside
                     << ": it reads as missing here until a repair writes it again";
  result.verdict = ScrubVerdict::kQuarantined;
  return result;
}

absl::Status ChunkStore::Write(Ring& ring, ChunkKey key, uint32_t offset,
                               absl::string_view data, bool replace) {
  AlignedBuffer payload;
  if (absl::Status s = payload.Reserve(std::max<size_t>(data.size(), 1)); !s.ok()) return s;
  std::memcpy(payload.data(), data.data(), data.size());
  payload.set_size(data.size());
  return Write(ring, key, offset, payload, replace);
}

absl::Status ChunkStore::RequireStoredUpTo(ChunkKey key, uint32_t offset) const {
  uint32_t stored = 0;
  const std::string path = ChunkPath(key);
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0) {
    if (errno != ENOENT) return SyscallError(errno, absl::StrCat("stat ", path));
  } else if (static_cast<size_t>(st.st_size) >= kChunkHeaderSize + offset + kBlockSize) {
    // Data padded to whole blocks: the stored length is past `offset`.
    return absl::OkStatus();
  } else {
    UniqueFd fd(::open(path.c_str(), O_RDONLY | O_CLOEXEC));
    char block[kChunkHeaderSize];
    if (!fd.valid() ||
        ::pread(fd.get(), block, sizeof(block), 0) != static_cast<ssize_t>(sizeof(block))) {
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
  EncodeChunkHeader({key, static_cast<uint32_t>(new_len), Crc32c(bytes, new_len)},
                    image.data());
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

absl::Status ChunkStore::Trim(Ring& ring, uint64_t ino, uint64_t new_size,
                              uint32_t chunk_size) {
  if (chunk_size == 0 && new_size != 0) {
    return ErrnoStatus(EINVAL, absl::StrCat("trim of inode ", ino, " to ", new_size,
                                            " bytes with chunk size 0"));
  }
  const std::string dir = InodeDir(ino);
  auto names = ListDir(dir);
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
      if (::unlink(path.c_str()) != 0 && errno != ENOENT) {
        status = SyscallError(errno, absl::StrCat("unlink ", path));
      }
    } else if (new_size - start < chunk_size) {
      const uint32_t keep = static_cast<uint32_t>(new_size - start);
      struct stat st {};
      // A file whose padded data fits in `keep` bytes needs no cut.
      if (::stat(path.c_str(), &st) == 0 &&
          static_cast<size_t>(st.st_size) > kChunkHeaderSize + keep) {
        status = Cut(ring, key, keep);
      }
    }
    if (!status.ok() && first_error.ok()) first_error = status;
  }
  // Fails harmlessly (ENOTEMPTY) while chunks remain or a write adds one.
  ::rmdir(dir.c_str());
  return first_error;
}

absl::Status ChunkStore::Sync(Ring& ring, uint64_t ino) {
  const std::string dir = InodeDir(ino);
  auto names = ListDir(dir);
  if (!names.ok()) {
    return ErrnoFromStatus(names.status()) == ENOENT ? absl::OkStatus() : names.status();
  }
  for (size_t first = 0; first < names->size(); first += kSyncBatch) {
    std::vector<UniqueFd> files;
    std::vector<Ring::Op> ops;
    std::vector<std::string> paths;
    for (size_t i = first; i < std::min(names->size(), first + kSyncBatch); ++i) {
      const std::string path = absl::StrCat(dir, "/", (*names)[i]);
      UniqueFd fd(::open(path.c_str(), O_RDONLY | O_CLOEXEC));
      if (!fd.valid()) {
        if (errno == ENOENT) continue;  // trimmed meanwhile
        return SyscallError(errno, absl::StrCat("open ", path, " to sync"));
      }
      ops.push_back({Ring::OpKind::kFdatasync, fd.get(), nullptr, 0, 0, 0});
      files.push_back(std::move(fd));
      paths.push_back(path);
    }
    if (absl::Status s = ring.Run(ops); !s.ok()) return s;
    for (size_t i = 0; i < ops.size(); ++i) {
      if (ops[i].result < 0) {
        return SyscallError(static_cast<int>(-ops[i].result),
                            absl::StrCat("fdatasync ", paths[i]));
      }
    }
  }
  // The renames that published the chunks, and the inode directory itself.
  for (const std::string& path : {dir, chunks_dir_}) {
    UniqueFd fd(::open(path.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC));
    if (!fd.valid()) {
      if (errno == ENOENT) continue;
      return SyscallError(errno, absl::StrCat("open ", path, " to sync"));
    }
    if (absl::Status s = ring.Fdatasync(fd.get()); !s.ok()) {
      return ErrnoStatus(ErrnoFromStatus(s), absl::StrCat("fsync ", path, ": ", s.message()));
    }
  }
  return absl::OkStatus();
}

absl::Status ChunkStore::SyncAll() {
  UniqueFd fd(::open(data_dir_.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC));
  if (!fd.valid()) return SyscallError(errno, absl::StrCat("open ", data_dir_, " to sync"));
  if (::syncfs(fd.get()) != 0) return SyscallError(errno, absl::StrCat("syncfs ", data_dir_));
  return absl::OkStatus();
}

absl::StatusOr<SpaceUsage> ChunkStore::Space() const {
  struct statvfs vfs {};
  if (::statvfs(data_dir_.c_str(), &vfs) != 0) {
    return SyscallError(errno, absl::StrCat("statvfs ", data_dir_));
  }
  SpaceUsage usage;
  usage.capacity_bytes = uint64_t{vfs.f_blocks} * vfs.f_frsize;
  const uint64_t available = uint64_t{vfs.f_bavail} * vfs.f_frsize;
  usage.used_bytes = usage.capacity_bytes > available ? usage.capacity_bytes - available : 0;
  return usage;
}

}  // namespace ckptfs::storage
