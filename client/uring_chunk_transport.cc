// See uring_chunk_transport.h.
#include "client/uring_chunk_transport.h"

#include <algorithm>
#include <cerrno>
#include <string>
#include <utility>

#include "absl/strings/str_cat.h"
#include "client/chunk_request_metrics.h"
#include "common/crc32c.h"
#include "common/credential.h"
#include "common/errno_status.h"
#include "common/frame.h"
#include "common/log.h"

namespace ckptfs::client {
namespace {

bool SameAddress(const HostPort& a, const HostPort& b) {
  return a.host == b.host && a.port == b.port;
}

// Most tries of one call: two that may have reached the server, plus resends
// of requests that never left the client (their connection died first).
constexpr int kMaxTries = 4;
constexpr int kMaxSentFailures = 2;

}  // namespace

absl::StatusOr<std::unique_ptr<UringChunkTransport>> UringChunkTransport::Create(
    MetaClient* meta, absl::Duration timeout, const Options& options) {
  auto loop = UringDataLoop::Start(options.loop);
  if (!loop.ok()) return loop.status();
  return std::unique_ptr<UringChunkTransport>(
      new UringChunkTransport(meta, timeout, options, *std::move(loop)));
}

UringChunkTransport::UringChunkTransport(MetaClient* meta, absl::Duration timeout,
                                         const Options& options,
                                         std::unique_ptr<UringDataLoop> loop)
    : meta_(meta), timeout_(timeout), options_(options), loop_(std::move(loop)) {
  RegisterChunkRequestMetrics();
}

absl::Status UringChunkTransport::RefreshServers() {
  auto reply = meta_->ListServers(meta::Empty());
  if (!reply.ok()) return reply.status();
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
  absl::MutexLock lock(&mu_);
  for (auto& [id, address] : parsed) {
    Server& server = servers_[id];
    if (SameAddress(server.address, address)) continue;
    // The server moved: its connections finish what they carry and close.
    for (const Link& link : server.links) loop_->Retire(link.conn);
    server.links.clear();
    ++server.epoch;
    server.address = std::move(address);
  }
  return absl::OkStatus();
}

absl::StatusOr<HostPort> UringChunkTransport::AddressOf(uint32_t server_id) {
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

absl::StatusOr<UringChunkTransport::Link> UringChunkTransport::PickLink(uint32_t server_id) {
  if (auto address = AddressOf(server_id); !address.ok()) return address.status();
  const size_t limit = static_cast<size_t>(std::max(1, options_.connections_per_server));
  absl::MutexLock lock(&mu_);
  while (true) {
    Server& server = servers_[server_id];
    server.links.erase(std::remove_if(server.links.begin(), server.links.end(),
                                      [](const Link& l) { return l.conn->dead(); }),
                       server.links.end());
    const Link* best = nullptr;
    for (const Link& link : server.links) {
      if (best == nullptr || link.conn->load() < best->conn->load()) best = &link;
    }
    if (best != nullptr && best->conn->load() == 0) return *best;
    if (server.links.size() + static_cast<size_t>(server.dialing) < limit) {
      ++server.dialing;
      const HostPort address = server.address;
      const uint64_t epoch = server.epoch;
      mu_.Unlock();  // no lock across the connect
      absl::StatusOr<UniqueFd> fd = ConnectTcp(address, timeout_);
      absl::Status hello;
      if (fd.ok()) {
        hello = PresentCredential(fd->get(), options_.credential, timeout_, address.ToString());
      }
      std::shared_ptr<DataConnection> conn;
      if (fd.ok() && hello.ok()) conn = loop_->Adopt(*std::move(fd), address);
      mu_.Lock();
      Server& again = servers_[server_id];  // the map may have grown meanwhile
      --again.dialing;
      dial_done_.SignalAll();
      if (!fd.ok()) {
        return ErrnoStatusWithCode(absl::StatusCode::kUnavailable, ErrnoFromStatus(fd.status()),
                                   absl::StrCat("storage server ", address.ToString(),
                                                " unreachable: ", fd.status().message()));
      }
      if (!hello.ok()) return hello;
      if (!SameAddress(again.address, address)) {
        loop_->Retire(conn);  // the server moved while we dialed
        continue;
      }
      again.links.push_back(Link{conn, epoch});
      return again.links.back();
    }
    if (best != nullptr) return *best;
    dial_done_.Wait(&mu_);
  }
}

void UringChunkTransport::LinkFailed(uint32_t server_id, const Link& failed) {
  absl::MutexLock lock(&mu_);
  Server& server = servers_[server_id];
  std::vector<Link> kept;
  const bool first_report = server.epoch == failed.epoch;
  if (first_report) ++server.epoch;
  for (Link& link : server.links) {
    if (link.conn == failed.conn) continue;
    // Dialed before the failure: likely just as dead (a restart). Those
    // still working finish their calls and close.
    if (first_report && link.epoch <= failed.epoch) {
      loop_->Retire(link.conn);
      continue;
    }
    kept.push_back(std::move(link));
  }
  server.links = std::move(kept);
}

absl::StatusOr<UringChunkTransport::Response> UringChunkTransport::Call(
    uint32_t server_id, data::RequestHeader request, const void* payload, size_t payload_len,
    void* out, size_t out_capacity) {
  absl::Status last;
  int sent_failures = 0;
  bool refreshed = false;
  for (int tries = 0; tries < kMaxTries && sent_failures < kMaxSentFailures; ++tries) {
    auto link = PickLink(server_id);
    if (!link.ok()) {
      last = link.status();
      ++sent_failures;
    } else {
      DataCall call;
      call.request_id = next_request_id_.fetch_add(1, std::memory_order_relaxed);
      request.set_request_id(call.request_id);
      stamp_.Stamp(request);
      const size_t header_len = request.ByteSizeLong();
      call.head.resize(kFramePrefixSize);
      EncodeFramePrefix({static_cast<uint32_t>(header_len), static_cast<uint32_t>(payload_len)},
                        call.head.data());
      if (!request.AppendToString(&call.head)) {
        return ErrnoStatus(EINVAL, "request header failed to serialize");
      }
      call.payload = payload;
      call.payload_len = payload_len;
      call.out = out;
      call.out_capacity = out_capacity;
      call.deadline = absl::Now() + timeout_;
      loop_->Submit(link->conn, &call);
      call.done.WaitForNotification();
      const HostPort& server = link->conn->server();
      if (call.status.ok()) {
        const data::ResponseHeader& reply = call.reply;
        if (reply.error() != 0) {
          return ErrnoStatus(reply.error(), absl::StrCat("storage server ", server.ToString(), ": ",
                                                         reply.message()));
        }
        // The loop checksummed the payload piece by piece as it landed.
        if (call.payload_received > 0 && call.payload_crc32c != reply.payload_crc32c()) {
          return ErrnoStatus(
              EBADMSG,
              absl::StrCat("storage server ", server.ToString(), ": CRC32C mismatch on chunk ",
                           request.chunk_index(), " of inode ", request.ino(), " in transit"));
        }
        return Response{call.reply, call.payload_received};
      }
      last = call.status;
      const bool timed_out = ErrnoFromStatus(last) == ETIMEDOUT;
      // A WRITE that timed out may still be applied by a live server later;
      // sent again, the late original could land after a newer write of the
      // same chunk and undo it.
      if (call.failure == DataCall::Failure::kSent && request.op() == data::WRITE && timed_out) {
        LinkFailed(server_id, *link);
        return last;
      }
      LinkFailed(server_id, *link);
      if (call.failure == DataCall::Failure::kSent || timed_out) ++sent_failures;
    }
    if (!refreshed) {
      refreshed = true;
      CKPTFS_LOG(kInfo) << "storage server " << server_id << ": " << last.message()
                        << "; redialing";
      (void)RefreshServers();
    }
  }
  return last;
}

absl::Status UringChunkTransport::WriteChunk(uint32_t server_id, uint64_t ino, uint64_t chunk_index,
                                             uint32_t offset, const void* data, size_t length,
                                             bool replace, std::optional<uint32_t> crc32c) {
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

absl::Status UringChunkTransport::FillChunk(uint32_t server_id, uint64_t ino, uint64_t chunk_index,
                                            const void* data, size_t length) {
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

absl::Status UringChunkTransport::AdoptChunk(uint32_t server_id, uint64_t ino, uint64_t chunk_index,
                                             const std::string& tmp_name, uint32_t data_length,
                                             uint32_t data_crc32c) {
  data::RequestHeader request;
  request.set_op(data::ADOPT);
  request.set_ino(ino);
  request.set_chunk_index(static_cast<uint32_t>(chunk_index));
  request.set_tmp_name(tmp_name);
  request.set_length(data_length);
  request.set_payload_crc32c(data_crc32c);
  // Not in the chunk request metrics: the local write counters stand for
  // it (client/local_chunk_transport.h).
  auto response = Call(server_id, request, nullptr, 0, nullptr, 0);
  if (response.ok()) NoteStored(server_id, ino, response->header.incarnation());
  return response.status();
}

absl::StatusOr<size_t> UringChunkTransport::ReadChunk(uint32_t server_id, uint64_t ino,
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

absl::Status UringChunkTransport::TrimChunks(uint32_t server_id, uint64_t ino, uint64_t trim_size,
                                             uint32_t chunk_size) {
  data::RequestHeader request;
  request.set_op(data::TRIM);
  request.set_ino(ino);
  request.set_trim_size(trim_size);
  request.set_chunk_size(chunk_size);
  ChunkRequestScope scope(ChunkOp::kTrim);
  return scope.Finish(Call(server_id, request, nullptr, 0, nullptr, 0).status(), 0);
}

absl::Status UringChunkTransport::SyncChunks(uint32_t server_id, uint64_t ino) {
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
