// See ckpt_check.h.
#include "tools/ckpt_check.h"

#include <sys/stat.h>

#include <algorithm>
#include <cerrno>
#include <filesystem>

#include "absl/strings/str_cat.h"
#include "common/crc32c.h"
#include "common/credential.h"
#include "common/errno_status.h"
#include "common/net.h"

namespace ckptfs::tools {

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
    return absl::NotFoundError(absl::StrCat(DescribeServer(id),
                                            ": the metadata service does not know it"));
  }
  std::unique_ptr<DataConnection>& conn = connections_[id];
  if (conn != nullptr && !conn->broken()) return conn.get();
  absl::StatusOr<HostPort> address = ParseHostPort(known->second.address());
  if (!address.ok()) return address.status();
  absl::StatusOr<std::unique_ptr<DataConnection>> dialed =
      DataConnection::Connect(*address, timeout_);
  if (!dialed.ok()) {
    return absl::Status(dialed.status().code(),
                        absl::StrCat(DescribeServer(id), " unreachable (",
                                     dialed.status().message(), ")",
                                     known->second.alive() ? "" : "; it is marked DOWN",
                                     ": check `ckptfs status`"));
  }
  if (absl::Status hello = PresentCredential(**dialed, probe_->credential()); !hello.ok()) {
    return absl::Status(hello.code(), absl::StrCat(DescribeServer(id), ": ", hello.message()));
  }
  conn = *std::move(dialed);
  return conn.get();
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
  absl::StatusOr<meta::Attr> attr = probe_->GetAttr(file.ino, timeout_);
  if (!attr.ok()) {
    file.status = absl::Status(attr.status().code(),
                               absl::StrCat("layout of ", path, " (inode ", file.ino,
                                            "): ", attr.status().message()));
    return file;
  }
  file.size = attr->size();
  file.chunk_size = attr->layout().chunk_size();
  const auto& stripe = attr->layout().stripe();
  if (file.size > 0 && (file.chunk_size == 0 || stripe.empty())) {
    file.status = absl::DataLossError(absl::StrCat(path, " has no layout"));
    return file;
  }
  std::string buffer;
  uint32_t file_crc = 0;
  const uint64_t chunks = file.size == 0 ? 0 : (file.size - 1) / file.chunk_size + 1;
  for (uint64_t i = 0; i < chunks; ++i) {
    ChunkCheck chunk;
    chunk.index = static_cast<uint32_t>(i);
    chunk.server_id = stripe[static_cast<int>(i % stripe.size())];
    if (auto it = servers_.find(chunk.server_id); it != servers_.end()) {
      chunk.server = it->second.address();
    }
    chunk.length = std::min<uint64_t>(file.chunk_size, file.size - i * file.chunk_size);
    buffer.assign(chunk.length, '\0');  // a hole reads as zeros
    absl::StatusOr<DataConnection*> conn = ConnectionTo(chunk.server_id);
    if (!conn.ok()) {
      chunk.status = conn.status();
    } else {
      data::RequestHeader request;
      request.set_op(data::READ);
      request.set_ino(file.ino);
      request.set_chunk_index(chunk.index);
      request.set_offset(0);
      request.set_length(static_cast<uint32_t>(chunk.length));
      absl::StatusOr<DataConnection::Response> read =
          (*conn)->Call(request, nullptr, 0, buffer.data(), buffer.size());
      if (!read.ok() && ErrnoFromStatus(read.status()) == ENOENT) {
        // No chunk file: a hole (e.g. a file extended by truncate), which
        // reads as zeros, as it does through the mount.
        chunk.hole = true;
        buffer.assign(chunk.length, '\0');
      } else if (!read.ok()) {
        chunk.status = absl::Status(
            read.status().code(),
            absl::StrCat("chunk ", chunk.index, " on ", DescribeServer(chunk.server_id), ": ",
                         read.status().message()));
      }
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
