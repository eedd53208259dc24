// See blocking_chunk_transport.h.
#include "client/blocking_chunk_transport.h"

#include <cerrno>
#include <utility>

#include "absl/strings/str_cat.h"
#include "client/chunk_request_metrics.h"
#include "common/crc32c.h"
#include "common/credential.h"
#include "common/errno_status.h"
#include "common/log.h"

namespace ckptfs::client {

BlockingChunkTransport::BlockingChunkTransport(MetaClient* meta, absl::Duration timeout,
                                               std::string credential)
    : meta_(meta), timeout_(timeout), credential_(std::move(credential)) {}

absl::Status BlockingChunkTransport::RefreshServers() {
  auto reply = meta_->ListServers(meta::Empty());
  if (!reply.ok()) return reply.status();
  // Parse outside the lock; connections to a moved server are closed
  // outside it too (destructors close sockets).
  std::vector<std::pair<uint32_t, HostPort>> parsed;
  for (const meta::ServerInfo& info : reply->servers()) {
    auto address = ParseHostPort(info.address());
    if (!address.ok()) {
      CKPTFS_LOG(kWarning) << "storage server " << info.id() << " has a bad address '"
                           << info.address() << "': " << address.status().message();
      continue;
    }
    parsed.emplace_back(info.id(), *std::move(address));
  }
  std::vector<std::unique_ptr<DataConnection>> dropped;
  {
    absl::MutexLock lock(&mu_);
    for (auto& [id, address] : parsed) {
      Server& server = servers_[id];
      if (server.address.host != address.host || server.address.port != address.port) {
        for (auto& conn : server.idle) dropped.push_back(std::move(conn));
        server.idle.clear();
        server.address = std::move(address);
      }
    }
  }
  return absl::OkStatus();
}

absl::StatusOr<HostPort> BlockingChunkTransport::AddressOf(uint32_t server_id) {
  for (int attempt = 0; attempt < 2; ++attempt) {
    {
      absl::MutexLock lock(&mu_);
      auto it = servers_.find(server_id);
      if (it != servers_.end() && it->second.address.port != 0) return it->second.address;
    }
    if (attempt == 0) {
      if (absl::Status s = RefreshServers(); !s.ok()) return s;
    }
  }
  return ErrnoStatus(
      EIO, absl::StrCat("storage server ", server_id, " is unknown to the metadata service"));
}

absl::StatusOr<std::unique_ptr<DataConnection>> BlockingChunkTransport::Take(uint32_t server_id) {
  {
    absl::MutexLock lock(&mu_);
    auto it = servers_.find(server_id);
    if (it != servers_.end() && !it->second.idle.empty()) {
      std::unique_ptr<DataConnection> conn = std::move(it->second.idle.back());
      it->second.idle.pop_back();
      return conn;
    }
  }
  auto address = AddressOf(server_id);
  if (!address.ok()) return address.status();
  absl::StatusOr<std::unique_ptr<DataConnection>> conn =
      DataConnection::Connect(*address, timeout_);
  if (!conn.ok()) return conn;
  if (absl::Status hello = PresentCredential(**conn, credential_); !hello.ok()) return hello;
  return conn;
}

void BlockingChunkTransport::Return(uint32_t server_id, std::unique_ptr<DataConnection> conn) {
  absl::MutexLock lock(&mu_);
  auto it = servers_.find(server_id);
  // A connection to an address the server no longer has is just closed.
  if (it == servers_.end() || it->second.idle.size() >= kMaxIdlePerServer ||
      it->second.address.host != conn->server().host ||
      it->second.address.port != conn->server().port) {
    return;  // `conn` closes when it goes out of scope (after the unlock is fine too)
  }
  it->second.idle.push_back(std::move(conn));
}

absl::StatusOr<DataConnection::Response> BlockingChunkTransport::Call(
    uint32_t server_id, const data::RequestHeader& request, const void* payload, size_t payload_len,
    void* out, size_t out_capacity) {
  absl::Status last;
  data::RequestHeader attempt_request = request;
  for (int attempt = 0; attempt < 2; ++attempt) {
    auto conn = Take(server_id);
    if (!conn.ok()) {
      last = conn.status();
    } else {
      stamp_.Stamp(attempt_request);
      auto response = (*conn)->Call(attempt_request, payload, payload_len, out, out_capacity);
      if (response.ok() || !(*conn)->broken()) {
        Return(server_id, *std::move(conn));
        return response;
      }
      last = response.status();
      // A WRITE that timed out may still be applied by a live server later;
      // sent again, the late original could land after a newer write of the
      // same chunk and undo it. Only a connection found dead is retried.
      if (request.op() == data::WRITE && ErrnoFromStatus(last) == ETIMEDOUT) return last;
      // The other idle connections to this server are likely just as dead
      // (it restarted): drop them all and dial afresh.
      std::vector<std::unique_ptr<DataConnection>> dropped;
      {
        absl::MutexLock lock(&mu_);
        auto it = servers_.find(server_id);
        if (it != servers_.end()) dropped.swap(it->second.idle);
      }
    }
    if (attempt == 0) {
      CKPTFS_LOG(kInfo) << "storage server " << server_id << ": " << last.message()
                        << "; redialing";
      (void)RefreshServers();
    }
  }
  return last;
}

absl::Status BlockingChunkTransport::WriteChunk(uint32_t server_id, uint64_t ino,
                                                uint64_t chunk_index, uint32_t offset,
                                                const void* data, size_t length, bool replace,
                                                std::optional<uint32_t> crc32c) {
  data::RequestHeader request;
  request.set_op(data::WRITE);
  request.set_ino(ino);
  request.set_chunk_index(static_cast<uint32_t>(chunk_index));
  request.set_offset(offset);
  request.set_payload_crc32c(crc32c.has_value() ? *crc32c : Crc32c(data, length));
  request.set_replace(replace);
  ChunkRequestScope scope(ChunkOp::kWrite);
  auto response = Call(server_id, request, data, length, nullptr, 0);
  if (response.ok()) NoteStored(server_id, ino, response->header.incarnation());
  return scope.Finish(response.status(), length);
}

absl::Status BlockingChunkTransport::FillChunk(uint32_t server_id, uint64_t ino,
                                               uint64_t chunk_index, const void* data,
                                               size_t length) {
  data::RequestHeader request;
  request.set_op(data::WRITE);
  request.set_ino(ino);
  request.set_chunk_index(static_cast<uint32_t>(chunk_index));
  request.set_offset(0);
  request.set_payload_crc32c(Crc32c(data, length));
  request.set_replace(true);
  request.set_only_if_absent(true);
  ChunkRequestScope scope(ChunkOp::kWrite);
  auto response = Call(server_id, request, data, length, nullptr, 0);
  if (response.ok()) NoteStored(server_id, ino, response->header.incarnation());
  return scope.Finish(response.status(), length);
}

absl::Status BlockingChunkTransport::AdoptChunk(uint32_t server_id, uint64_t ino,
                                                uint64_t chunk_index, const std::string& tmp_name,
                                                uint32_t data_length, uint32_t data_crc32c) {
  data::RequestHeader request;
  request.set_op(data::ADOPT);
  request.set_ino(ino);
  request.set_chunk_index(static_cast<uint32_t>(chunk_index));
  request.set_tmp_name(tmp_name);
  request.set_length(data_length);
  request.set_payload_crc32c(data_crc32c);
  // Not in the chunk request metrics, as in UringChunkTransport.
  auto response = Call(server_id, request, nullptr, 0, nullptr, 0);
  if (response.ok()) NoteStored(server_id, ino, response->header.incarnation());
  return response.status();
}

absl::StatusOr<size_t> BlockingChunkTransport::ReadChunk(uint32_t server_id, uint64_t ino,
                                                         uint64_t chunk_index, uint32_t offset,
                                                         void* buf, size_t length) {
  data::RequestHeader request;
  request.set_op(data::READ);
  request.set_ino(ino);
  request.set_chunk_index(static_cast<uint32_t>(chunk_index));
  request.set_offset(offset);
  request.set_length(static_cast<uint32_t>(length));
  ChunkRequestScope scope(ChunkOp::kRead);
  auto response = Call(server_id, request, nullptr, 0, buf, length);
  if (!response.ok()) return scope.Finish(response.status(), 0);
  scope.Finish(absl::OkStatus(), response->payload_len).IgnoreError();
  return response->payload_len;
}

absl::Status BlockingChunkTransport::TrimChunks(uint32_t server_id, uint64_t ino,
                                                uint64_t trim_size, uint32_t chunk_size) {
  data::RequestHeader request;
  request.set_op(data::TRIM);
  request.set_ino(ino);
  request.set_trim_size(trim_size);
  request.set_chunk_size(chunk_size);
  ChunkRequestScope scope(ChunkOp::kTrim);
  return scope.Finish(Call(server_id, request, nullptr, 0, nullptr, 0).status(), 0);
}

absl::Status BlockingChunkTransport::SyncChunks(uint32_t server_id, uint64_t ino) {
  data::RequestHeader request;
  request.set_op(data::SYNC);
  request.set_ino(ino);
  const UnsyncedWrites::Pending pending = PendingSync(server_id, ino);
  for (uint64_t incarnation : pending.incarnations) request.add_written_by(incarnation);
  ChunkRequestScope scope(ChunkOp::kSync);
  absl::Status status = Call(server_id, request, nullptr, 0, nullptr, 0).status();
  if (status.ok()) ConfirmSync(server_id, ino, pending);
  return scope.Finish(std::move(status), 0);
}

}  // namespace ckptfs::client
