// See fake_chunk_transport.h.
#include "client/testing/fake_chunk_transport.h"

#include <algorithm>
#include <cerrno>
#include <cstring>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "common/crc32c.h"
#include "common/errno_status.h"

namespace ckptfs::client::testing {

absl::Status FakeChunkTransport::DownStatus(uint32_t server_id) const {
  if (down_.count(server_id) == 0) return absl::OkStatus();
  return ErrnoStatus(ECONNREFUSED, absl::StrCat("fake storage server ", server_id, " is down"));
}

void FakeChunkTransport::Delay() const {
  absl::Duration delay;
  {
    absl::MutexLock lock(&mu_);
    delay = delay_;
  }
  if (delay > absl::ZeroDuration()) absl::SleepFor(delay);
}

absl::Status FakeChunkTransport::WriteChunk(uint32_t server_id, uint64_t ino, uint64_t chunk_index,
                                            uint32_t offset, const void* data, size_t length,
                                            bool replace, std::optional<uint32_t> crc32c) {
  if (crc32c.has_value() && *crc32c != Crc32c(data, length)) {
    return ErrnoStatus(EBADMSG, absl::StrCat("fake storage server ", server_id, ": payload of ",
                                             length, " bytes for chunk ", chunk_index, " of inode ",
                                             ino, " does not match its CRC32C"));
  }
  {
    absl::MutexLock lock(&mu_);
    ++counts_.writes;
    if (replace) ++counts_.replace_writes;
    if (crc32c.has_value()) ++counts_.writes_with_crc;
    ++inflight_writes_;
    counts_.max_inflight_writes = std::max(counts_.max_inflight_writes, inflight_writes_);
  }
  Delay();
  absl::MutexLock lock(&mu_);
  --inflight_writes_;
  if (write_err_ != 0) {
    if (writes_before_failing_ > 0) {
      --writes_before_failing_;
    } else {
      return ErrnoStatus(
          write_err_, absl::StrCat("fake storage server ", server_id, ": injected write failure"));
    }
  }
  if (absl::Status down = DownStatus(server_id); !down.ok()) return down;
  if (replace && offset != 0) return ErrnoStatus(EINVAL, "replace write at offset != 0");
  if (replace) corrupt_.erase(Key(server_id, ino, chunk_index));
  std::string& chunk = chunks_[Key(server_id, ino, chunk_index)];
  const char* bytes = static_cast<const char*>(data);
  if (replace) {
    chunk.assign(bytes, length);
  } else {
    if (chunk.size() < offset + length) chunk.resize(offset + length, '\0');
    std::memcpy(chunk.data() + offset, bytes, length);
  }
  return absl::OkStatus();
}

absl::Status FakeChunkTransport::FillChunk(uint32_t server_id, uint64_t ino, uint64_t chunk_index,
                                           const void* data, size_t length) {
  {
    absl::MutexLock lock(&mu_);
    ++counts_.fills;
    if (absl::Status down = DownStatus(server_id); !down.ok()) return down;
    if (chunks_.count(Key(server_id, ino, chunk_index)) != 0) {
      return ErrnoStatus(EEXIST,
                         absl::StrCat("fake storage server ", server_id, ": already holds chunk ",
                                      chunk_index, " of inode ", ino));
    }
  }
  return WriteChunk(server_id, ino, chunk_index, 0, data, length, /*replace=*/true);
}

absl::StatusOr<size_t> FakeChunkTransport::ReadChunk(uint32_t server_id, uint64_t ino,
                                                     uint64_t chunk_index, uint32_t offset,
                                                     void* buf, size_t length) {
  Delay();
  absl::MutexLock lock(&mu_);
  ++counts_.reads;
  ++reads_of_[{ino, chunk_index}];
  if (read_err_ != 0) return ErrnoStatus(read_err_, "fake storage server: injected read failure");
  if (absl::Status down = DownStatus(server_id); !down.ok()) return down;
  if (corrupt_.count(Key(server_id, ino, chunk_index)) != 0) {
    return ErrnoStatus(EIO, absl::StrCat("fake storage server ", server_id, ": chunk ", chunk_index,
                                         " of inode ", ino, " fails its CRC32C"));
  }
  auto it = chunks_.find(Key(server_id, ino, chunk_index));
  if (it == chunks_.end()) {
    return ErrnoStatus(ENOENT, absl::StrCat("fake storage server ", server_id, ": no chunk ",
                                            chunk_index, " of inode ", ino));
  }
  const std::string& chunk = it->second;
  if (offset >= chunk.size()) return 0;
  const size_t n = std::min<size_t>(length, chunk.size() - offset);
  std::memcpy(buf, chunk.data() + offset, n);
  return n;
}

absl::Status FakeChunkTransport::TrimChunks(uint32_t server_id, uint64_t ino, uint64_t trim_size,
                                            uint32_t chunk_size) {
  Delay();
  absl::MutexLock lock(&mu_);
  ++counts_.trims;
  if (trim_err_ != 0) return ErrnoStatus(trim_err_, "fake storage server: injected trim failure");
  if (absl::Status down = DownStatus(server_id); !down.ok()) return down;
  if (chunk_size == 0) return ErrnoStatus(EINVAL, "trim with chunk size 0");
  for (auto it = chunks_.lower_bound(Key(server_id, ino, 0)); it != chunks_.end() &&
                                                              std::get<0>(it->first) == server_id &&
                                                              std::get<1>(it->first) == ino;) {
    const uint64_t start = std::get<2>(it->first) * chunk_size;
    if (start >= trim_size) {
      it = chunks_.erase(it);
      continue;
    }
    if (start + it->second.size() > trim_size) it->second.resize(trim_size - start);
    ++it;
  }
  return absl::OkStatus();
}

absl::Status FakeChunkTransport::SyncChunks(uint32_t server_id, uint64_t ino) {
  Delay();
  absl::MutexLock lock(&mu_);
  ++counts_.syncs;
  ++syncs_of_[{server_id, ino}];
  if (sync_err_ != 0) return ErrnoStatus(sync_err_, "fake storage server: injected sync failure");
  if (absl::Status down = DownStatus(server_id); !down.ok()) return down;
  const Key first(server_id, ino, 0);
  auto of_inode = [&](const Key& key) {
    return std::get<0>(key) == server_id && std::get<1>(key) == ino;
  };
  for (auto it = durable_.lower_bound(first); it != durable_.end() && of_inode(it->first);) {
    it = durable_.erase(it);
  }
  for (auto it = chunks_.lower_bound(first); it != chunks_.end() && of_inode(it->first); ++it) {
    durable_[it->first] = it->second;
  }
  return absl::OkStatus();
}

void FakeChunkTransport::LosePower(uint32_t server_id) {
  absl::MutexLock lock(&mu_);
  auto on_server = [&](const Key& key) { return std::get<0>(key) == server_id; };
  const Key first(server_id, 0, 0);
  for (auto it = chunks_.lower_bound(first); it != chunks_.end() && on_server(it->first);) {
    it = chunks_.erase(it);
  }
  for (auto it = durable_.lower_bound(first); it != durable_.end() && on_server(it->first); ++it) {
    chunks_[it->first] = it->second;
  }
}

bool FakeChunkTransport::DeleteChunk(uint32_t server_id, uint64_t ino, uint64_t chunk_index) {
  absl::MutexLock lock(&mu_);
  const Key key(server_id, ino, chunk_index);
  durable_.erase(key);
  corrupt_.erase(key);
  return chunks_.erase(key) > 0;
}

std::optional<std::string> FakeChunkTransport::DurableChunkBytes(uint32_t server_id, uint64_t ino,
                                                                 uint64_t chunk_index) const {
  absl::MutexLock lock(&mu_);
  auto it = durable_.find(Key(server_id, ino, chunk_index));
  if (it == durable_.end()) return std::nullopt;
  return it->second;
}

void FakeChunkTransport::FailWrites(int err, int after) {
  absl::MutexLock lock(&mu_);
  write_err_ = err;
  writes_before_failing_ = after;
}

void FakeChunkTransport::FailReads(int err) {
  absl::MutexLock lock(&mu_);
  read_err_ = err;
}

void FakeChunkTransport::FailTrims(int err) {
  absl::MutexLock lock(&mu_);
  trim_err_ = err;
}

void FakeChunkTransport::FailSyncs(int err) {
  absl::MutexLock lock(&mu_);
  sync_err_ = err;
}

void FakeChunkTransport::CorruptChunk(uint32_t server_id, uint64_t ino, uint64_t chunk_index) {
  absl::MutexLock lock(&mu_);
  corrupt_.insert(Key(server_id, ino, chunk_index));
}

void FakeChunkTransport::SetServerDown(uint32_t server_id, bool down) {
  absl::MutexLock lock(&mu_);
  if (down) {
    down_.insert(server_id);
  } else {
    down_.erase(server_id);
  }
}

void FakeChunkTransport::SetDelay(absl::Duration delay) {
  absl::MutexLock lock(&mu_);
  delay_ = delay;
}

FakeChunkTransport::Counts FakeChunkTransport::counts() const {
  absl::MutexLock lock(&mu_);
  return counts_;
}

int FakeChunkTransport::ReadsOf(uint64_t ino, uint64_t chunk_index) const {
  absl::MutexLock lock(&mu_);
  auto it = reads_of_.find({ino, chunk_index});
  return it == reads_of_.end() ? 0 : it->second;
}

std::optional<std::string> FakeChunkTransport::ChunkBytes(uint32_t server_id, uint64_t ino,
                                                          uint64_t chunk_index) const {
  absl::MutexLock lock(&mu_);
  auto it = chunks_.find(Key(server_id, ino, chunk_index));
  if (it == chunks_.end()) return std::nullopt;
  return it->second;
}

int FakeChunkTransport::ChunkCount(uint64_t ino) const {
  absl::MutexLock lock(&mu_);
  int n = 0;
  for (const auto& [key, bytes] : chunks_) n += std::get<1>(key) == ino ? 1 : 0;
  return n;
}

int FakeChunkTransport::SyncsOf(uint32_t server_id, uint64_t ino) const {
  absl::MutexLock lock(&mu_);
  auto it = syncs_of_.find({server_id, ino});
  return it == syncs_of_.end() ? 0 : it->second;
}

}  // namespace ckptfs::client::testing
