// See local_chunk_transport.h.
#include "client/local_chunk_transport.h"

#include <fcntl.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <sys/uio.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstdint>
#include <cstring>
#include <utility>
#include <vector>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/time/clock.h"
#include "common/chunk_format.h"
#include "common/crc32c.h"
#include "common/errno_status.h"
#include "common/frame.h"
#include "common/log.h"
#include "common/log_limiter.h"
#include "common/metrics/metrics.h"

namespace ckptfs::client {
namespace {

// Idle scratch buffers kept for the next reads; more are allocated while
// more reads run at once, and freed when they end.
constexpr size_t kIdleScratch = 16;
// Bytes CRC-checked and then copied at a time: well within a core's L2.
constexpr uint64_t kVerifyPiece = 256 * 1024;

struct LocalReadMetrics {
  metrics::Counter* local;
  metrics::Counter* missing;
  metrics::Counter* rejected;
  metrics::Counter* bytes;
  metrics::Counter* written_local;
  metrics::Counter* written_fallback;
  metrics::Counter* written_bytes;
};

const LocalReadMetrics& Metrics() {
  static const LocalReadMetrics* m = [] {
    metrics::Registry& r = metrics::Registry::Default();
    auto& reads = r.Counter(
        "ckptfs_client_local_chunk_reads_total",
        "Chunk reads of storage servers on this host, by result: read from the chunk file "
        "(local), no such file (missing: a hole, or a chunk the server no longer has), or the "
        "file failed a check or a read (rejected); the last two were then asked of the server.",
        {"result"});
    auto& bytes = r.Counter("ckptfs_client_local_chunk_read_bytes_total",
                            "Chunk bytes read from the chunk files of storage servers on this "
                            "host.",
                            {});
    auto& writes = r.Counter(
        "ckptfs_client_local_chunk_writes_total",
        "Chunk writes to storage servers on this host tried through their chunk files, by "
        "result: written as a chunk file and adopted by the server (local), or sent over the "
        "network after all (fallback: the file could not be written, or the server did not "
        "adopt it).",
        {"result"});
    auto& written = r.Counter("ckptfs_client_local_chunk_write_bytes_total",
                              "Chunk bytes written as chunk files of storage servers on this "
                              "host.",
                              {});
    return new LocalReadMetrics{&reads.WithLabels({"local"}),    &reads.WithLabels({"missing"}),
                                &reads.WithLabels({"rejected"}), &bytes.WithLabels({}),
                                &writes.WithLabels({"local"}),   &writes.WithLabels({"fallback"}),
                                &written.WithLabels({})};
  }();
  return *m;
}

// Moves `pieces` and `count` past `n` transferred bytes and past empty
// pieces.
void Advance(struct iovec*& pieces, int& count, size_t n) {
  while (count > 0 && (n > 0 || pieces->iov_len == 0)) {
    const size_t step = std::min(n, pieces->iov_len);
    pieces->iov_base = static_cast<char*>(pieces->iov_base) + step;
    pieces->iov_len -= step;
    n -= step;
    if (pieces->iov_len == 0) {
      ++pieces;
      --count;
    }
  }
}

// Reads into `pieces` (advanced as it goes) from offset 0, retrying short
// reads and EINTR, until they are full or the file ends. Returns the bytes
// read, or -1 with errno set.
ssize_t ReadFully(int fd, struct iovec* pieces, int count) {
  size_t done = 0;
  Advance(pieces, count, 0);
  while (count > 0) {
    const ssize_t n = preadv(fd, pieces, count, static_cast<off_t>(done));
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return -1;
    if (n == 0) break;
    done += static_cast<size_t>(n);
    Advance(pieces, count, static_cast<size_t>(n));
  }
  return static_cast<ssize_t>(done);
}

// Writes all of `pieces` (advanced as it goes) from file offset `at`,
// retrying short writes and EINTR. Returns 0, or -1 with errno set.
int WriteFully(int fd, struct iovec* pieces, int count, off_t at) {
  size_t done = 0;
  Advance(pieces, count, 0);
  while (count > 0) {
    const ssize_t n = pwritev(fd, pieces, count, at + static_cast<off_t>(done));
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return -1;
    if (n == 0) {
      errno = EIO;  // no progress: do not spin
      return -1;
    }
    done += static_cast<size_t>(n);
    Advance(pieces, count, static_cast<size_t>(n));
  }
  return 0;
}

// `data_dir`'s tmp/, opened to create and remove files in it; never
// through a symbolic link there. Invalid (errno set) when it cannot be.
UniqueFd OpenTmpDirectory(const std::string& data_dir) {
  return UniqueFd(
      open(TmpDirectory(data_dir).c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC));
}

// A name for the next chunk file this process writes for a server to
// adopt: random per process (made again in a forked child), so that mounts
// in other pid namespaces sharing a data directory never pick the same
// name, and numbered within it.
std::string NextLocalWriteName() {
  ABSL_CONST_INIT static absl::Mutex mu(absl::kConstInit);
  // All three guarded by mu.
  static pid_t tag_pid = 0;
  static std::string* tag = nullptr;
  static uint64_t next = 0;
  absl::MutexLock lock(&mu);
  if (tag == nullptr || tag_pid != getpid()) {
    tag_pid = getpid();
    uint64_t random = 0;
    if (getrandom(&random, sizeof(random), 0) != sizeof(random)) {
      random = static_cast<uint64_t>(absl::ToUnixNanos(absl::Now()));
    }
    delete tag;
    tag = new std::string(absl::StrCat(absl::Hex(random, absl::kZeroPad16), ".", tag_pid));
  }
  return absl::StrCat(kLocalWritePrefix, *tag, ".", next++);
}

// The first 4 KiB of a small file; nullopt when it cannot be read.
std::optional<std::string> ReadSmallFile(const std::string& path) {
  UniqueFd fd(open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK));
  if (!fd.valid()) return std::nullopt;
  std::string text(4096, '\0');
  struct iovec piece = {text.data(), text.size()};
  const ssize_t n = ReadFully(fd.get(), &piece, 1);
  if (n < 0) return std::nullopt;
  text.resize(static_cast<size_t>(n));
  return text;
}

}  // namespace

bool LocalChunkTransport::Scratch::Reserve(size_t n) {
  if (n <= memory_.size()) return true;
  absl::StatusOr<HugePageMemory> grown = HugePageMemory::Map(n);
  if (!grown.ok()) return false;
  memory_ = *std::move(grown);
  return true;
}

LocalChunkTransport::LocalChunkTransport(std::unique_ptr<ChunkTransport> inner, MetaClient* meta,
                                         absl::Duration refresh, Use use)
    : inner_(std::move(inner)),
      meta_(meta),
      refresh_(std::max(refresh, absl::Milliseconds(10))),
      use_(use) {
  Metrics();
  Reload();
  refresher_ = std::thread([this] { RefreshLoop(); });
}

LocalChunkTransport::~LocalChunkTransport() {
  {
    absl::MutexLock lock(&mu_);
    stopping_ = true;
  }
  refresher_.join();
}

bool LocalChunkTransport::ServerRuns(int lock_fd) {
  struct flock probe {};
  probe.l_type = F_WRLCK;
  probe.l_whence = SEEK_SET;
  probe.l_start = 0;
  probe.l_len = 0;  // the whole file
  // Reports (and takes) nothing unless someone's lock conflicts with a
  // write lock: the server's read lock does.
  return fcntl(lock_fd, F_OFD_GETLK, &probe) == 0 && probe.l_type != F_UNLCK;
}

std::optional<LocalChunkTransport::LocalServer> LocalChunkTransport::FindLocal(
    const meta::ServerInfo& info) {
  if (!info.alive() || info.data_dir().empty() || info.uuid().empty()) return std::nullopt;
  std::optional<std::string> uuid = ReadSmallFile(absl::StrCat(info.data_dir(), "/server.uuid"));
  if (!uuid.has_value() || absl::StripAsciiWhitespace(*uuid) != info.uuid()) return std::nullopt;
  const std::string lock_path = absl::StrCat(info.data_dir(), "/LOCK");
  auto lock = std::make_shared<const UniqueFd>(
      open(lock_path.c_str(), O_RDONLY | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK));
  if (!lock->valid() || !ServerRuns(lock->get())) return std::nullopt;
  // A process that may not enter the chunk directory (a mount not run as
  // the server's user: servers make it 0700) reads over TCP instead of
  // failing every local read first; likewise for writes and tmp/.
  if (faccessat(AT_FDCWD, ChunksDirectory(info.data_dir()).c_str(), R_OK | X_OK, AT_EACCESS) != 0) {
    return std::nullopt;
  }
  const bool writable =
      faccessat(AT_FDCWD, TmpDirectory(info.data_dir()).c_str(), W_OK | X_OK, AT_EACCESS) == 0;
  return LocalServer{info.data_dir(), std::move(lock), writable};
}

absl::StatusOr<size_t> LocalChunkTransport::ReadChunkFile(const std::string& data_dir, uint64_t ino,
                                                          uint64_t chunk_index, uint32_t offset,
                                                          void* buf, size_t length,
                                                          Scratch& scratch) {
  if (chunk_index > UINT32_MAX) {
    return ErrnoStatus(ENOENT, absl::StrCat("chunk index ", chunk_index, " is past any chunk"));
  }
  const std::string path = ChunkFilePath(data_dir, {ino, static_cast<uint32_t>(chunk_index)});
  auto bad = [&](const std::string& why) {
    return ErrnoStatus(EIO, absl::StrCat("chunk file ", path, ": ", why));
  };
  if (uint64_t{offset} + length > kMaxFramePayload) {  // the server refuses it (EINVAL)
    return bad(absl::StrCat("a read of ", length, " bytes at ", offset, " is past any chunk"));
  }
  // Paths a server advertised: never follow a link, never wait on a FIFO.
  constexpr int kFlags = O_RDONLY | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK;
  UniqueFd fd(open(path.c_str(), kFlags | O_DIRECT));
  if (!fd.valid() && errno == EINVAL) {  // a file system without O_DIRECT
    fd = UniqueFd(open(path.c_str(), kFlags));
  }
  if (!fd.valid()) {
    const int err = errno;
    return ErrnoStatus(err == ENOENT ? ENOENT : EIO,
                       absl::StrCat("open ", path, ": ", std::strerror(err)));
  }
  // The sizes the server's read accepts (server/storage/chunk_store.cc).
  struct stat st {};
  if (fstat(fd.get(), &st) != 0) return bad(absl::StrCat("fstat: ", std::strerror(errno)));
  const uint64_t file_size = static_cast<uint64_t>(st.st_size);
  if (!S_ISREG(st.st_mode)) return bad("not a regular file");
  if (file_size < kChunkHeaderSize || file_size % kChunkBlockSize != 0 ||
      file_size > ChunkFileSize(kMaxFramePayload)) {
    return bad(absl::StrCat("size ", file_size, " is not a chunk file's"));
  }

  // The whole file in one read, as the server reads it: when the caller's
  // buffer can take the data straight from the disk (a whole-chunk read
  // into 4096-aligned memory with room for the padded data, e.g. a
  // ChunkBuffer), the header into an aligned block on the stack and the
  // data into buf; otherwise all of it into the scratch buffer, copied out
  // after.
  const uint64_t padded_data = file_size - kChunkHeaderSize;
  const bool direct = offset == 0 && padded_data <= length &&
                      reinterpret_cast<uintptr_t>(buf) % kChunkBlockSize == 0;
  alignas(kChunkBlockSize) char header_block[kChunkHeaderSize];
  if (!direct && !scratch.Reserve(file_size)) return bad("no memory to read it into");
  char* const image = direct ? header_block : scratch.data();
  struct iovec pieces[2] = {{image, direct ? kChunkHeaderSize : file_size},
                            {buf, direct ? padded_data : 0}};
  const ssize_t got = ReadFully(fd.get(), pieces, direct ? 2 : 1);
  if (got < 0) return bad(absl::StrCat("read: ", std::strerror(errno)));
  if (static_cast<uint64_t>(got) != file_size) {
    return bad(absl::StrCat("read ", got, " of ", file_size, " bytes"));
  }
  absl::StatusOr<ChunkHeader> header =
      DecodeChunkHeader(absl::string_view(image, kChunkHeaderSize), path);
  if (!header.ok()) return header.status();
  if (header->key.ino != ino || header->key.index != chunk_index) {
    return bad(
        absl::StrCat("its header names chunk ", header->key.index, " of inode ", header->key.ino));
  }
  const uint64_t data_length = header->data_length;
  if (ChunkFileSize(data_length) > file_size) {
    return bad(
        absl::StrCat("its header says ", data_length, " data bytes in a file of ", file_size));
  }
  const uint64_t begin = std::min<uint64_t>(offset, data_length);
  const uint64_t end = std::min<uint64_t>(uint64_t{offset} + length, data_length);
  if (direct) {
    if (Crc32c(buf, data_length) != header->data_crc32c) {
      return bad("its data fails its CRC32C");
    }
    return static_cast<size_t>(end);  // begin is 0
  }
  // Verify and copy out in pieces that stay in the CPU cache between the
  // two passes, so the data comes from memory once, not twice (CRC and copy
  // as two whole-chunk passes were a quarter of a load storm's CPU).
  // Either way a failed CRC leaves buf written, as a read that fails
  // halfway over the network does; the server's read that follows
  // overwrites it.
  const char* const data = image + kChunkHeaderSize;
  uint32_t crc = 0;
  for (uint64_t at = 0; at < data_length; at += kVerifyPiece) {
    const uint64_t n = std::min<uint64_t>(kVerifyPiece, data_length - at);
    crc = Crc32cExtend(crc, data + at, n);
    const uint64_t from = std::max(at, begin);
    const uint64_t to = std::min(at + n, end);
    if (from < to) std::memcpy(static_cast<char*>(buf) + (from - begin), data + from, to - from);
  }
  if (crc != header->data_crc32c) return bad("its data fails its CRC32C");
  return static_cast<size_t>(end - begin);
}

absl::StatusOr<std::string> LocalChunkTransport::WriteChunkFile(const std::string& data_dir,
                                                                uint64_t ino, uint32_t chunk_index,
                                                                const void* data, size_t length,
                                                                uint32_t data_crc32c) {
  const std::string name = NextLocalWriteName();
  const std::string tmp = TmpDirectory(data_dir);
  const std::string path = absl::StrCat(tmp, "/", name);
  if (length > kMaxFramePayload || reinterpret_cast<uintptr_t>(data) % kChunkBlockSize != 0) {
    return ErrnoStatus(EINVAL, absl::StrCat("chunk file ", path, ": ", length,
                                            " bytes not in whole aligned blocks"));
  }
  // tmp/ itself never through a link: a server's directory names where the
  // file goes, not a link planted there.
  UniqueFd dir = OpenTmpDirectory(data_dir);
  if (!dir.valid()) {
    const int err = errno;
    return ErrnoStatus(err, absl::StrCat("open ", tmp, ": ", std::strerror(err)));
  }
  UniqueFd fd(
      openat(dir.get(), name.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW, 0644));
  if (!fd.valid()) {
    const int err = errno;
    return ErrnoStatus(err, absl::StrCat("create ", path, ": ", std::strerror(err)));
  }
  // The file as the server writes it (common/chunk_format.h). The header
  // block goes through the page cache, so that the server's check of it
  // (ChunkStore::Adopt) does not wait for a disk read behind the storm's
  // writes; then O_DIRECT (when the file system takes it; switched on the
  // open file, so a refusal leaves nothing to undo) for the data: whole
  // blocks from the caller's memory, the last partial block zero-padded in
  // a block of our own.
  alignas(kChunkBlockSize) char header_block[kChunkHeaderSize];
  EncodeChunkHeader({{ino, chunk_index}, static_cast<uint32_t>(length), data_crc32c}, header_block);
  const size_t whole = length / kChunkBlockSize * kChunkBlockSize;
  alignas(kChunkBlockSize) char tail_block[kChunkBlockSize];
  const size_t tail = length - whole;
  if (tail > 0) {
    std::memcpy(tail_block, static_cast<const char*>(data) + whole, tail);
    std::memset(tail_block + tail, 0, kChunkBlockSize - tail);
  }
  struct iovec header = {header_block, kChunkHeaderSize};
  struct iovec pieces[2] = {{const_cast<void*>(data), whole},
                            {tail_block, tail > 0 ? kChunkBlockSize : 0}};
  const int flags = fcntl(fd.get(), F_GETFL);
  bool ok = fchmod(fd.get(), 0644) == 0 &&  // whatever our umask: the server reads it
            WriteFully(fd.get(), &header, 1, 0) == 0 && flags >= 0;
  // Start the header's writeback now (without waiting), so that a crash
  // after the rename but before any sync finds the header on disk about as
  // soon as the data, not up to the dirty-page expiry later.
  if (ok) (void)sync_file_range(fd.get(), 0, kChunkHeaderSize, SYNC_FILE_RANGE_WRITE);
  if (ok && fcntl(fd.get(), F_SETFL, flags | O_DIRECT) != 0 && errno != EINVAL) ok = false;
  ok = ok && WriteFully(fd.get(), pieces, 2, static_cast<off_t>(kChunkHeaderSize)) == 0;
  if (!ok || close(fd.Release()) != 0) {
    const int err = errno;
    (void)unlinkat(dir.get(), name.c_str(), 0);
    return ErrnoStatus(err, absl::StrCat("write ", path, ": ", std::strerror(err)));
  }
  return name;
}

absl::Status LocalChunkTransport::WriteChunk(uint32_t server_id, uint64_t ino, uint64_t chunk_index,
                                             uint32_t offset, const void* data, size_t length,
                                             bool replace, std::optional<uint32_t> crc32c) {
  // In place: writes from a chunk's start from aligned memory (every
  // write-behind flush; the server refuses a merge that would drop bytes
  // past `length`); other merges, empty chunks and other memory go over
  // the network.
  if (use_.writes && offset == 0 && length > 0 && length <= kMaxFramePayload &&
      chunk_index <= UINT32_MAX && reinterpret_cast<uintptr_t>(data) % kChunkBlockSize == 0) {
    if (std::optional<LocalServer> local = RunningLocal(server_id);
        local.has_value() && local->writable) {
      const uint32_t crc = crc32c.has_value() ? *crc32c : Crc32c(data, length);
      absl::StatusOr<bool> written = WriteInPlace(
          *local, server_id, ino, static_cast<uint32_t>(chunk_index), data, length, crc);
      if (!written.ok()) return written.status();
      if (*written) return absl::OkStatus();
      crc32c = crc;
    }
  }
  return inner_->WriteChunk(server_id, ino, chunk_index, offset, data, length, replace, crc32c);
}

absl::StatusOr<bool> LocalChunkTransport::WriteInPlace(const LocalServer& local, uint32_t server_id,
                                                       uint64_t ino, uint32_t chunk_index,
                                                       const void* data, size_t length,
                                                       uint32_t crc32c) {
  {
    absl::MutexLock lock(&mu_);
    auto marked = cannot_adopt_.find(server_id);
    if (marked != cannot_adopt_.end() && absl::Now() < marked->second) return false;
  }
  absl::StatusOr<std::string> name =
      WriteChunkFile(local.data_dir, ino, chunk_index, data, length, crc32c);
  if (!name.ok()) {
    Metrics().written_fallback->Increment();
    static LogLimiter limiter(absl::Minutes(1), 3);
    if (std::string held_back; limiter.Allow(&held_back)) {
      CKPTFS_LOG(kWarning) << "cannot write chunk " << chunk_index << " of inode " << ino
                           << " in place for storage server " << server_id << " ("
                           << name.status().message() << "); sent over the network" << held_back;
    }
    return false;
  }
  const absl::Status adopted =
      inner_->AdoptChunk(server_id, ino, chunk_index, *name, static_cast<uint32_t>(length), crc32c);
  if (adopted.ok()) {
    Metrics().written_local->Increment();
    Metrics().written_bytes->Increment(length);
    return true;
  }
  // Removed before the chunk is sent again: an ADOPT that timed out but
  // still runs on the server then finds no file, and can never put these
  // bytes over a later write of the chunk. (If it ran already, the resend
  // stores the same bytes again.)
  // (A file that cannot be removed fails the write instead. Very rare:
  // unlink fails with the file still there only on an I/O error or a file
  // system gone read-only; if the application then writes the chunk again,
  // an ADOPT of this file still queued on the server could land after it.)
  UniqueFd dir = OpenTmpDirectory(local.data_dir);
  if (!dir.valid() ? errno != ENOENT
                   : unlinkat(dir.get(), name->c_str(), 0) != 0 && errno != ENOENT) {
    const int err = errno;
    return ErrnoStatus(err, absl::StrCat("the server did not adopt ", *name, " in ",
                                         TmpDirectory(local.data_dir), " (", adopted.message(),
                                         ") and it cannot be removed: ", std::strerror(err)));
  }
  Metrics().written_fallback->Increment();
  if (ErrnoFromStatus(adopted) == EOPNOTSUPP) {
    absl::MutexLock lock(&mu_);
    const bool first = !cannot_adopt_.contains(server_id);
    cannot_adopt_[server_id] = absl::Now() + use_.adopt_retry;
    if (first) {
      CKPTFS_LOG(kInfo) << "storage server " << server_id << " cannot adopt chunk files ("
                        << adopted.message() << "); its chunks go over the network, asked "
                        << "again every " << use_.adopt_retry;
    }
    return false;
  }
  // EEXIST: the chunk is longer than this write (another client wrote past
  // it); the merge over the network keeps those bytes. Not a problem.
  if (ErrnoFromStatus(adopted) == EEXIST) return false;
  static LogLimiter limiter(absl::Minutes(1), 3);
  if (std::string held_back; limiter.Allow(&held_back)) {
    CKPTFS_LOG(kWarning) << "storage server " << server_id << " did not adopt chunk " << chunk_index
                         << " of inode " << ino << " written in place (" << adopted.message()
                         << "); sent over the network" << held_back;
  }
  return false;
}

absl::StatusOr<size_t> LocalChunkTransport::ReadChunk(uint32_t server_id, uint64_t ino,
                                                      uint64_t chunk_index, uint32_t offset,
                                                      void* buf, size_t length) {
  if (std::optional<LocalServer> local = use_.reads ? RunningLocal(server_id) : std::nullopt;
      local.has_value()) {
    Scratch scratch = TakeScratch();
    absl::StatusOr<size_t> got =
        ReadChunkFile(local->data_dir, ino, chunk_index, offset, buf, length, scratch);
    GiveScratch(std::move(scratch));
    if (got.ok()) {
      Metrics().local->Increment();
      Metrics().bytes->Increment(*got);
      return *got;
    }
    // Not judged here: the server answers (see the header).
    (ErrnoFromStatus(got.status()) == ENOENT ? Metrics().missing : Metrics().rejected)->Increment();
  }
  return inner_->ReadChunk(server_id, ino, chunk_index, offset, buf, length);
}

std::optional<LocalChunkTransport::LocalServer> LocalChunkTransport::RunningLocal(
    uint32_t server_id) {
  std::optional<LocalServer> local;
  {
    absl::MutexLock lock(&mu_);
    auto it = local_.find(server_id);
    if (it == local_.end()) return std::nullopt;
    local = it->second;
  }
  if (!ServerRuns(local->lock->get())) return std::nullopt;
  return local;
}

LocalChunkTransport::Scratch LocalChunkTransport::TakeScratch() {
  absl::MutexLock lock(&scratch_mu_);
  if (idle_scratch_.empty()) return Scratch();
  Scratch scratch = std::move(idle_scratch_.back());
  idle_scratch_.pop_back();
  return scratch;
}

void LocalChunkTransport::GiveScratch(Scratch scratch) {
  absl::MutexLock lock(&scratch_mu_);
  if (idle_scratch_.size() < kIdleScratch) idle_scratch_.push_back(std::move(scratch));
}

void LocalChunkTransport::RefreshLoop() {
  absl::MutexLock lock(&mu_);
  while (true) {
    mu_.AwaitWithTimeout(absl::Condition(&stopping_), refresh_);
    if (stopping_) return;
    mu_.Unlock();
    Reload();
    mu_.Lock();
  }
}

void LocalChunkTransport::Reload() {
  absl::StatusOr<meta::ListServersReply> reply = meta_->ListServers(meta::Empty());
  if (!reply.ok()) return;  // keep the map; try again after `refresh_`
  absl::flat_hash_map<uint32_t, LocalServer> local;
  for (const meta::ServerInfo& info : reply->servers()) {
    if (std::optional<LocalServer> found = FindLocal(info); found.has_value()) {
      local.emplace(info.id(), *std::move(found));
    }
  }
  absl::MutexLock lock(&mu_);
  bool changed = local.size() != local_.size();
  for (const auto& [id, server] : local) {
    auto it = local_.find(id);
    changed = changed || it == local_.end() || it->second.data_dir != server.data_dir;
  }
  if (changed) {
    std::vector<uint32_t> ids;
    for (const auto& [id, server] : local) ids.push_back(id);
    std::sort(ids.begin(), ids.end());
    CKPTFS_LOG(kInfo) << "storage servers on this host, used through their chunk files: "
                      << (ids.empty() ? "none" : absl::StrJoin(ids, ", "));
  }
  local_ = std::move(local);
}

}  // namespace ckptfs::client
