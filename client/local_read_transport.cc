// See local_read_transport.h.
#include "client/local_read_transport.h"

#include <fcntl.h>
#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <utility>
#include <vector>

#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/time/clock.h"
#include "common/chunk_format.h"
#include "common/crc32c.h"
#include "common/log.h"
#include "common/metrics/metrics.h"
#include "common/unique_fd.h"

namespace ckptfs::client {
namespace {

static_assert(LocalReadTransport::kBouncePieceBytes % kChunkBlockSize == 0 &&
              LocalReadTransport::kBouncePieceBytes > kChunkHeaderSize);

struct LocalReadMetrics {
  metrics::Counter* local;
  metrics::Counter* fallback;
  metrics::Counter* bytes;
};

const LocalReadMetrics& Metrics() {
  static const LocalReadMetrics* m = [] {
    auto& family = metrics::Registry::Default().Counter(
        "ckptfs_client_local_chunk_reads_total",
        "Chunk reads of storage servers on this host: read from the chunk file (local) or "
        "handed to the server after the file could not be used (fallback).",
        {"result"});
    auto& bytes = metrics::Registry::Default().Counter(
        "ckptfs_client_local_chunk_read_bytes_total",
        "Chunk bytes read from the chunk files of storage servers on this host.", {});
    return new LocalReadMetrics{&family.WithLabels({"local"}), &family.WithLabels({"fallback"}),
                                &bytes.WithLabels({})};
  }();
  return *m;
}

struct FreeDeleter {
  void operator()(char* p) const { std::free(p); }
};

// This thread's aligned buffer for O_DIRECT reads of chunk files.
char* BounceBuffer() {
  thread_local std::unique_ptr<char, FreeDeleter> buffer(static_cast<char*>(
      std::aligned_alloc(kChunkBlockSize, LocalReadTransport::kBouncePieceBytes)));
  return buffer.get();
}

// pread until `length` bytes or end of file; -1 on error.
ssize_t ReadFully(int fd, char* out, size_t length, off_t offset) {
  size_t done = 0;
  while (done < length) {
    const ssize_t n = pread(fd, out + done, length - done, offset + static_cast<off_t>(done));
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return -1;
    if (n == 0) break;
    done += static_cast<size_t>(n);
  }
  return static_cast<ssize_t>(done);
}

// The first 4 KiB of a file; nullopt when it cannot be read.
std::optional<std::string> ReadSmallFile(const std::string& path) {
  UniqueFd fd(open(path.c_str(), O_RDONLY | O_CLOEXEC));
  if (!fd.valid()) return std::nullopt;
  std::string text(4096, '\0');
  const ssize_t n = ReadFully(fd.get(), text.data(), text.size(), 0);
  if (n < 0) return std::nullopt;
  text.resize(static_cast<size_t>(n));
  return text;
}

// Whether process `pid` exists (a zombie counts, until its parent reaps it).
bool ProcessRuns(pid_t pid) { return kill(pid, 0) == 0 || errno == EPERM; }

}  // namespace

LocalReadTransport::LocalReadTransport(std::unique_ptr<ChunkTransport> inner, MetaClient* meta,
                                       absl::Duration refresh)
    : inner_(std::move(inner)), meta_(meta), refresh_(refresh) {
  Metrics();
}

std::optional<LocalReadTransport::LocalServer> LocalReadTransport::FindLocal(
    const meta::ServerInfo& info) {
  if (!info.alive() || info.data_dir().empty() || info.uuid().empty()) return std::nullopt;
  std::optional<std::string> uuid = ReadSmallFile(absl::StrCat(info.data_dir(), "/server.uuid"));
  if (!uuid.has_value() || absl::StripAsciiWhitespace(*uuid) != info.uuid()) return std::nullopt;
  std::optional<std::string> lock = ReadSmallFile(absl::StrCat(info.data_dir(), "/LOCK"));
  pid_t pid = 0;
  if (!lock.has_value() || !absl::SimpleAtoi(absl::StripAsciiWhitespace(*lock), &pid) ||
      pid <= 0 || !ProcessRuns(pid)) {
    return std::nullopt;
  }
  return LocalServer{info.data_dir(), pid};
}

std::optional<size_t> LocalReadTransport::ReadChunkFile(const std::string& data_dir,
                                                        uint64_t ino, uint64_t chunk_index,
                                                        uint32_t offset, void* buf,
                                                        size_t length) {
  if (chunk_index > UINT32_MAX) return std::nullopt;
  const ChunkKey key{ino, static_cast<uint32_t>(chunk_index)};
  char* const bounce = BounceBuffer();
  if (bounce == nullptr) return std::nullopt;
  const std::string path = ChunkFilePath(data_dir, key);
  UniqueFd fd(open(path.c_str(), O_RDONLY | O_CLOEXEC | O_DIRECT));
  if (!fd.valid() && errno == EINVAL) fd = UniqueFd(open(path.c_str(), O_RDONLY | O_CLOEXEC));
  if (!fd.valid()) return std::nullopt;

  // The first piece holds the header block and the first data bytes.
  ssize_t got = ReadFully(fd.get(), bounce, kBouncePieceBytes, 0);
  if (got < static_cast<ssize_t>(kChunkHeaderSize)) return std::nullopt;
  absl::StatusOr<ChunkHeader> header =
      DecodeChunkHeader(absl::string_view(bounce, kChunkHeaderSize), path);
  if (!header.ok() || header->key.ino != ino || header->key.index != key.index) {
    return std::nullopt;
  }
  const uint64_t data_length = header->data_length;
  const uint64_t want_begin = std::min<uint64_t>(offset, data_length);
  const uint64_t want_end = std::min<uint64_t>(uint64_t{offset} + length, data_length);
  char* const out = static_cast<char*>(buf);

  // Walk the file piece by piece: CRC every data byte, copy the wanted ones.
  uint32_t crc = 0;
  uint64_t file_offset = 0;  // of bounce[0]
  uint64_t data_pos = 0;     // data bytes checked so far
  while (true) {
    const uint64_t skip = file_offset == 0 ? kChunkHeaderSize : 0;
    const uint64_t in_piece =
        std::min<uint64_t>(static_cast<uint64_t>(got) - skip, data_length - data_pos);
    const char* data = bounce + skip;
    crc = Crc32cExtend(crc, data, in_piece);
    const uint64_t copy_begin = std::max(want_begin, data_pos);
    const uint64_t copy_end = std::min(want_end, data_pos + in_piece);
    if (copy_begin < copy_end) {
      std::memcpy(out + (copy_begin - want_begin), data + (copy_begin - data_pos),
                  copy_end - copy_begin);
    }
    data_pos += in_piece;
    if (data_pos == data_length) break;
    if (static_cast<uint64_t>(got) < kBouncePieceBytes) return std::nullopt;  // file too short
    file_offset += kBouncePieceBytes;
    got = ReadFully(fd.get(), bounce, kBouncePieceBytes, static_cast<off_t>(file_offset));
    if (got <= 0) return std::nullopt;
  }
  if (crc != header->data_crc32c) return std::nullopt;  // the server judges (and quarantines)
  return static_cast<size_t>(want_end - want_begin);
}

absl::StatusOr<size_t> LocalReadTransport::ReadChunk(uint32_t server_id, uint64_t ino,
                                                     uint64_t chunk_index, uint32_t offset,
                                                     void* buf, size_t length) {
  if (std::optional<LocalServer> local = LocalServerOf(server_id); local.has_value()) {
    if (std::optional<size_t> got =
            ReadChunkFile(local->data_dir, ino, chunk_index, offset, buf, length);
        got.has_value()) {
      Metrics().local->Increment();
      Metrics().bytes->Increment(*got);
      return *got;
    }
    Metrics().fallback->Increment();
  }
  return inner_->ReadChunk(server_id, ino, chunk_index, offset, buf, length);
}

std::optional<LocalReadTransport::LocalServer> LocalReadTransport::LocalServerOf(
    uint32_t server_id) {
  bool reload = false;
  {
    absl::MutexLock lock(&mu_);
    if (!reloading_ && absl::Now() - loaded_at_ >= refresh_) {
      reloading_ = true;
      reload = true;
    }
  }
  if (reload) Reload();
  std::optional<LocalServer> local;
  {
    absl::MutexLock lock(&mu_);
    auto it = local_.find(server_id);
    if (it == local_.end()) return std::nullopt;
    local = it->second;
  }
  if (!ProcessRuns(local->pid)) return std::nullopt;
  return local;
}

void LocalReadTransport::Reload() {
  absl::flat_hash_map<uint32_t, LocalServer> local;
  absl::StatusOr<meta::ListServersReply> reply = meta_->ListServers(meta::Empty());
  if (reply.ok()) {
    for (const meta::ServerInfo& info : reply->servers()) {
      if (std::optional<LocalServer> found = FindLocal(info); found.has_value()) {
        local.emplace(info.id(), *std::move(found));
      }
    }
  }
  absl::MutexLock lock(&mu_);
  reloading_ = false;
  loaded_at_ = absl::Now();
  if (!reply.ok()) return;  // keep the old map; try again after `refresh_`
  bool changed = local.size() != local_.size();
  for (const auto& [id, server] : local) {
    auto it = local_.find(id);
    changed = changed || it == local_.end() || it->second.data_dir != server.data_dir ||
              it->second.pid != server.pid;
  }
  if (changed) {
    std::vector<uint32_t> ids;
    for (const auto& [id, server] : local) ids.push_back(id);
    std::sort(ids.begin(), ids.end());
    CKPTFS_LOG(kInfo) << "storage servers on this host, read from their chunk files: "
                      << (ids.empty() ? "none" : absl::StrJoin(ids, ", "));
  }
  local_ = std::move(local);
}

}  // namespace ckptfs::client
