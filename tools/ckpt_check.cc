// See ckpt_check.h.
#include "tools/ckpt_check.h"

#include <sys/stat.h>

#include <algorithm>
#include <cerrno>
#include <filesystem>
#include <functional>
#include <optional>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "client/fragment_io.h"
#include "client/layout.h"
#include "common/crc32c.h"
#include "common/credential.h"
#include "common/errno_status.h"
#include "common/placement.h"
#include "common/tcp.h"
#include "common/written_chunks.h"

namespace ckptfs::tools {
namespace {

// The reader's connections as a client::ChunkTransport for fragment_io:
// READs only (verify never writes: every other call fails with EROFS).
class ReadOnlyTransport : public client::ChunkTransport {
 public:
  using Connect = std::function<absl::StatusOr<DataConnection*>(uint32_t)>;
  explicit ReadOnlyTransport(Connect connect) : connect_(std::move(connect)) {}

  using ChunkTransport::WriteChunk;
  absl::Status WriteChunk(uint32_t, uint64_t, uint64_t, uint32_t, const void*, size_t, bool,
                          std::optional<uint32_t>) override {
    return ReadOnly();
  }
  absl::Status FillChunk(uint32_t, uint64_t, uint64_t, const void*, size_t) override {
    return ReadOnly();
  }
  absl::StatusOr<size_t> ReadChunk(uint32_t server_id, uint64_t ino, uint64_t chunk_index,
                                   uint32_t offset, void* buf, size_t length) override {
    absl::StatusOr<DataConnection*> conn = connect_(server_id);
    if (!conn.ok()) return conn.status();
    data::RequestHeader request;
    request.set_op(data::READ);
    request.set_ino(ino);
    request.set_chunk_index(chunk_index);
    request.set_offset(offset);
    request.set_length(static_cast<uint32_t>(length));
    absl::StatusOr<DataConnection::Response> read =
        (*conn)->Call(request, nullptr, 0, static_cast<char*>(buf), length);
    if (!read.ok()) return read.status();
    return read->payload_len;
  }
  absl::Status TrimChunks(uint32_t, uint64_t, uint64_t, uint32_t) override { return ReadOnly(); }
  absl::Status SyncChunks(uint32_t, uint64_t) override { return ReadOnly(); }

 private:
  static absl::Status ReadOnly() { return ErrnoStatus(EROFS, "ckpt verify reads chunks only"); }

  Connect connect_;
};

}  // namespace

ChunkCheck CheckErasureCodedChunk(client::ChunkTransport& transport, const meta::Layout& layout,
                                  uint64_t ino, uint32_t index, uint64_t length, std::string& bytes,
                                  bool written) {
  ChunkCheck chunk;
  chunk.index = index;
  chunk.length = length;
  chunk.server_id = ReplicaServer(layout, index, 0);
  bytes.assign(length, '\0');
  absl::StatusOr<client::DecodedChunk> decoded =
      client::ReadWholeChunkFragments(transport, nullptr, layout, ino, index, /*check_all=*/true);
  if (!decoded.ok() && ErrnoFromStatus(decoded.status()) == ENOENT && written) {
    chunk.status = absl::DataLossError(
        absl::StrCat("chunk ", index, ": lost: it was written, but ", decoded.status().message()));
  } else if (!decoded.ok() && ErrnoFromStatus(decoded.status()) == ENOENT) {
    chunk.hole = true;  // no fragment anywhere: reads as zeros, as through the mount
  } else if (!decoded.ok()) {
    chunk.status =
        absl::DataLossError(absl::StrCat("chunk ", index, ": ", decoded.status().message()));
  } else {
    std::copy_n(decoded->bytes.begin(), std::min<size_t>(length, decoded->bytes.size()),
                bytes.begin());
    std::vector<std::string> problems;
    for (size_t r = 0; r < decoded->fragment_good.size(); ++r) {
      if (decoded->fragment_good[r]) continue;
      // The status names the fragment and its server.
      problems.push_back(
          absl::StrCat("chunk ", index, ": ", decoded->fragment_status[r].message()));
    }
    if (!problems.empty()) chunk.status = absl::DataLossError(absl::StrJoin(problems, "; "));
  }
  chunk.crc32c = Crc32c(bytes.data(), bytes.size());
  return chunk;
}

CheckpointReader::CheckpointReader(MetaProbe* probe, absl::Duration timeout)
    : probe_(probe), timeout_(timeout) {}

absl::Status CheckpointReader::Init() {
  absl::StatusOr<std::vector<meta::ServerInfo>> servers = probe_->ListServers(timeout_);
  if (!servers.ok()) {
    return absl::Status(servers.status().code(),
                        absl::StrCat("cannot reach the metadata service at ", probe_->address(),
                                     ": ", servers.status().message()));
  }
  for (meta::ServerInfo& s : *servers) servers_[s.id()] = std::move(s);
  return absl::OkStatus();
}

absl::StatusOr<std::vector<std::string>> CheckpointReader::ListFiles(const std::string& dir) {
  namespace fs = std::filesystem;
  std::error_code ec;
  if (!fs::is_directory(dir, ec)) {
    return ErrnoStatus(ec ? ec.value() : ENOTDIR, absl::StrCat(dir, " is not a directory"));
  }
  std::vector<std::string> files;
  fs::recursive_directory_iterator it(dir, fs::directory_options::none, ec);
  if (ec) return ErrnoStatus(ec.value(), absl::StrCat("cannot list ", dir, ": ", ec.message()));
  for (; it != fs::recursive_directory_iterator(); it.increment(ec)) {
    if (ec) return ErrnoStatus(ec.value(), absl::StrCat("cannot list ", dir, ": ", ec.message()));
    if (it->is_regular_file(ec) && !it->is_symlink(ec)) {
      files.push_back(fs::relative(it->path(), dir, ec).string());
    }
  }
  std::sort(files.begin(), files.end());
  return files;
}

std::string CheckpointReader::DescribeServer(uint32_t id) const {
  auto it = servers_.find(id);
  return it == servers_.end()
             ? absl::StrCat("storage server ", id, " (not registered)")
             : absl::StrCat("storage server ", id, " (", it->second.address(), ")");
}

absl::StatusOr<DataConnection*> CheckpointReader::ConnectionTo(uint32_t id) {
  auto known = servers_.find(id);
  if (known == servers_.end()) {
    return absl::NotFoundError(
        absl::StrCat(DescribeServer(id), ": the metadata service does not know it"));
  }
  std::unique_ptr<DataConnection>& conn = connections_[id];
  if (conn != nullptr && !conn->broken()) return conn.get();
  absl::StatusOr<HostPort> address = ParseHostPort(known->second.address());
  if (!address.ok()) return address.status();
  absl::StatusOr<std::unique_ptr<DataConnection>> dialed =
      DataConnection::Connect(*address, timeout_);
  if (!dialed.ok()) {
    return absl::Status(
        dialed.status().code(),
        absl::StrCat(DescribeServer(id), " unreachable (", dialed.status().message(), ")",
                     known->second.alive() ? "" : "; it is marked DOWN",
                     ": check `ckptfs status`"));
  }
  if (absl::Status hello = PresentCredential(**dialed, probe_->credential()); !hello.ok()) {
    return absl::Status(hello.code(), absl::StrCat(DescribeServer(id), ": ", hello.message()));
  }
  conn = *std::move(dialed);
  return conn.get();
}

CheckpointReader::CopyRead CheckpointReader::ReadCopy(uint64_t ino, uint32_t index, uint64_t length,
                                                      uint32_t server_id, std::string& buffer) {
  CopyRead result;
  buffer.assign(length, '\0');
  absl::StatusOr<DataConnection*> conn = ConnectionTo(server_id);
  if (!conn.ok()) {
    result.status = conn.status();
    result.unreachable = true;
    return result;
  }
  data::RequestHeader request;
  request.set_op(data::READ);
  request.set_ino(ino);
  request.set_chunk_index(index);
  request.set_offset(0);
  request.set_length(static_cast<uint32_t>(length));
  absl::StatusOr<DataConnection::Response> read =
      (*conn)->Call(request, nullptr, 0, buffer.data(), buffer.size());
  if (!read.ok() && ErrnoFromStatus(read.status()) == ENOENT) {
    result.missing = true;
  } else if (!read.ok()) {
    result.status = read.status();
  } else {
    result.crc32c = Crc32c(buffer.data(), buffer.size());
  }
  return result;
}

FileCheck CheckpointReader::CheckFile(const std::string& dir, const std::string& relative) {
  FileCheck file;
  file.path = relative;
  const std::string path = (std::filesystem::path(dir) / relative).string();
  struct stat st;
  if (::stat(path.c_str(), &st) != 0) {
    file.status = SyscallError(errno, absl::StrCat("stat ", path));
    return file;
  }
  file.ino = st.st_ino;
  absl::StatusOr<meta::AttrReply> reply = probe_->GetAttr(file.ino, timeout_);
  if (!reply.ok()) {
    file.status = absl::Status(
        reply.status().code(),
        absl::StrCat("layout of ", path, " (inode ", file.ino, "): ", reply.status().message()));
    return file;
  }
  const meta::Attr* attr = &reply->attr();
  const meta::WrittenChunks& written = reply->written();
  file.size = attr->size();
  file.chunk_size = attr->layout().chunk_size();
  const auto& stripe = attr->layout().stripe();
  if (file.size > 0 && (file.chunk_size == 0 || stripe.empty())) {
    file.status = absl::DataLossError(absl::StrCat(path, " has no layout"));
    return file;
  }
  const int copies = ReplicaCount(attr->layout());
  if (file.size > 0 && copies > stripe.size()) {
    file.status = absl::DataLossError(
        absl::StrCat(path, " has ", copies,
                     IsErasureCoded(attr->layout()) ? " fragments per chunk" : " replicas",
                     " on a stripe of ", stripe.size()));
    return file;
  }
  std::string buffer, scratch;
  uint32_t file_crc = 0;
  const uint64_t chunks = file.size == 0 ? 0 : (file.size - 1) / file.chunk_size + 1;
  if (IsErasureCoded(attr->layout()) && file.size > 0) {
    if (absl::Status valid = client::ValidateLayout(attr->layout()); !valid.ok()) {
      file.status = absl::DataLossError(absl::StrCat(path, ": ", valid.message()));
      return file;
    }
    ReadOnlyTransport transport([this](uint32_t id) { return ConnectionTo(id); });
    for (uint64_t i = 0; i < chunks; ++i) {
      ChunkCheck chunk = CheckErasureCodedChunk(
          transport, attr->layout(), file.ino, static_cast<uint32_t>(i),
          std::min<uint64_t>(file.chunk_size, file.size - i * file.chunk_size), buffer,
          IsWritten(written, i));
      if (auto it = servers_.find(chunk.server_id); it != servers_.end()) {
        chunk.server = it->second.address();
      }
      file_crc = Crc32cExtend(file_crc, buffer.data(), buffer.size());
      if (!chunk.status.ok() && file.status.ok()) file.status = chunk.status;
      file.chunks.push_back(std::move(chunk));
    }
    file.crc32c = file_crc;
    return file;
  }
  for (uint64_t i = 0; i < chunks; ++i) {
    ChunkCheck chunk;
    chunk.index = static_cast<uint32_t>(i);
    chunk.length = std::min<uint64_t>(file.chunk_size, file.size - i * file.chunk_size);
    // Every copy is read (common/placement.h);
    // the chunk is good when all have the same bytes, a hole when none has
    // a chunk file.
    std::vector<std::string> problems;
    int missing = 0, readable = 0;
    std::optional<CopyRead> first_data;
    for (int r = 0; r < copies; ++r) {
      const uint32_t server_id = ReplicaServer(attr->layout(), i, r);
      if (r == 0) {
        chunk.server_id = server_id;
        if (auto it = servers_.find(server_id); it != servers_.end()) {
          chunk.server = it->second.address();
        }
      }
      std::string& into = first_data.has_value() ? scratch : buffer;
      CopyRead read = ReadCopy(file.ino, chunk.index, chunk.length, server_id, into);
      const std::string which_copy =
          copies == 1 ? "" : absl::StrCat(" (copy ", r + 1, " of ", copies, ")");
      if (read.missing) {
        ++missing;
        continue;
      }
      if (read.unreachable) {
        // The message names the server already.
        problems.push_back(
            absl::StrCat("chunk ", chunk.index, which_copy, ": ", read.status.message()));
        continue;
      }
      if (!read.status.ok()) {
        problems.push_back(absl::StrCat("chunk ", chunk.index, " on ", DescribeServer(server_id),
                                        which_copy, ": ", read.status.message()));
        continue;
      }
      ++readable;
      read.copy = r;
      read.server_id = server_id;
      if (!first_data.has_value()) {
        first_data = read;
      } else if (read.crc32c != first_data->crc32c) {
        problems.push_back(absl::StrFormat(
            "chunk %u: the copies differ: copy %d on storage server %u has CRC32C %08x, copy "
            "%d on storage server %u has %08x",
            chunk.index, first_data->copy + 1, first_data->server_id, first_data->crc32c, r + 1,
            server_id, read.crc32c));
      }
    }
    if (missing == copies && IsWritten(written, i)) {
      // Written, and now on no server: lost (reads as EIO through the mount).
      problems.push_back(absl::StrCat("chunk ", chunk.index,
                                      ": lost: it was written, but none of its ", copies,
                                      copies == 1 ? " copy has" : " copies has", " a chunk file"));
    } else if (missing == copies) {
      // No chunk file anywhere: a hole (e.g. a file extended by truncate),
      // which reads as zeros, as it does through the mount.
      chunk.hole = true;
    } else if (missing > 0) {
      problems.push_back(absl::StrCat("chunk ", chunk.index, ": ", missing, " of ", copies,
                                      " copies missing (no chunk file on their server",
                                      readable > 0 ? "; another copy has the data)" : ")"));
    }
    if (!first_data.has_value()) buffer.assign(chunk.length, '\0');  // a hole reads as zeros
    if (!problems.empty()) {
      chunk.status = absl::DataLossError(absl::StrJoin(problems, "; "));
    }
    chunk.crc32c = Crc32c(buffer.data(), buffer.size());
    file_crc = Crc32cExtend(file_crc, buffer.data(), buffer.size());
    if (!chunk.status.ok() && file.status.ok()) file.status = chunk.status;
    file.chunks.push_back(std::move(chunk));
  }
  file.crc32c = file_crc;
  return file;
}

}  // namespace ckptfs::tools
