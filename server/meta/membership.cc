// See membership.h.
#include "server/meta/membership.h"

#include <algorithm>
#include <cerrno>
#include <string>

#include "absl/strings/str_cat.h"
#include "common/credential.h"
#include "common/errno_status.h"
#include "common/log.h"
#include "common/tcp.h"
#include "server/meta/keys.h"
#include "server/meta/meta_txn.h"

namespace ckptfs::meta {
namespace {
constexpr size_t kMaxUuidLength = 128;
constexpr size_t kMaxDataDirLength = 4096;  // PATH_MAX
constexpr size_t kServerScanPage = 1024;
}  // namespace

bool Membership::IsAlive(const ServerInfo& info) {
  const int64_t since = std::max(info.last_heartbeat_ms(), started_ms_);
  return clock_->NowMs() - since <= absl::ToInt64Milliseconds(options_.server_timeout);
}

absl::StatusOr<uint32_t> Membership::Register(const RegisterServerRequest& request) {
  if (!ParseHostPort(request.address()).ok()) {
    return ErrnoStatus(
        EINVAL, absl::StrCat("register: address \"", request.address(), "\" is not host:port"));
  }
  if (request.identity_secret().size() > kMaxUuidLength) {
    return ErrnoStatus(
        EINVAL, absl::StrCat("register: identity secret longer than ", kMaxUuidLength, " bytes"));
  }
  if (request.uuid().empty() || request.uuid().size() > kMaxUuidLength) {
    return ErrnoStatus(EINVAL, absl::StrCat("register: uuid must be 1..", kMaxUuidLength,
                                            " bytes, got ", request.uuid().size()));
  }
  // Only an optimisation hangs on the data directory (clients on the
  // server's host read its chunk files in place): a bad one is dropped, the
  // server still serves.
  std::string data_dir = request.data_dir();
  if (data_dir.size() > kMaxDataDirLength || (!data_dir.empty() && data_dir[0] != '/')) {
    CKPTFS_LOG(kWarning) << "register: storage server at " << request.address()
                         << " sent a data_dir that is not an absolute path of at most "
                         << kMaxDataDirLength << " bytes; clients will read it over TCP only";
    data_dir.clear();
  }
  return RunTxn<uint32_t>(kv_, "register server", [&](MetaTxn& txn) -> absl::StatusOr<uint32_t> {
    absl::StatusOr<std::optional<std::string>> existing = txn.Get(ServerUuidKey(request.uuid()));
    if (!existing.ok()) return existing.status();
    uint32_t id = 0;
    ServerRecord record;
    if (existing->has_value()) {
      std::optional<uint32_t> decoded = DecodeU32(**existing);
      if (!decoded.has_value()) return ErrnoStatus(EIO, "corrupt server uuid index");
      id = *decoded;
      absl::StatusOr<std::optional<ServerRecord>> stored =
          txn.GetRecord<ServerRecord>(ServerKey(id));
      if (!stored.ok()) return stored.status();
      if (stored->has_value()) record = **stored;
      // The uuid is the data directory's that registered it first: only
      // the holder of that directory's secret may register it again (from
      // wherever it runs now). A record from before secrets takes the first.
      if (stored->has_value() && !record.identity_secret().empty() &&
          !CredentialMatches(request.identity_secret(), record.identity_secret())) {
        return ErrnoStatus(
            EPERM, absl::StrCat("register: storage server ", request.uuid(), " (id ", id, ", at ",
                                record.info().address(),
                                ") belongs to the data directory "
                                "holding its server.secret; this registration from ",
                                request.address(),
                                " does not hold it. Two data directories "
                                "with the same server.uuid (a copied directory?) cannot both "
                                "serve: give the copy a fresh directory"));
      }
    } else {
      absl::StatusOr<std::optional<std::string>> next = txn.Get(kNextServerIdKey);
      if (!next.ok()) return next.status();
      id = 1;
      if (next->has_value()) {
        std::optional<uint32_t> decoded = DecodeU32(**next);
        if (!decoded.has_value()) return ErrnoStatus(EIO, "corrupt server id counter");
        id = *decoded;
      }
      txn.PutRaw(kNextServerIdKey, EncodeU32(id + 1));
      txn.PutRaw(ServerUuidKey(request.uuid()), EncodeU32(id));
    }
    ServerInfo* info = record.mutable_info();
    info->set_id(id);
    info->set_address(request.address());
    info->set_uuid(request.uuid());
    info->set_data_dir(data_dir);
    info->set_capacity_bytes(request.capacity_bytes());
    info->set_used_bytes(request.used_bytes());
    info->set_last_heartbeat_ms(clock_->NowMs());
    info->clear_alive();  // computed on read, never stored
    if (record.identity_secret().empty()) record.set_identity_secret(request.identity_secret());
    txn.Put(ServerKey(id), record);
    return id;
  });
}

absl::Status Membership::Heartbeat(const HeartbeatRequest& request) {
  return RunTxn(kv_, "heartbeat", [&](MetaTxn& txn) -> absl::Status {
    absl::StatusOr<std::optional<ServerRecord>> stored =
        txn.GetRecord<ServerRecord>(ServerKey(request.server_id()));
    if (!stored.ok()) return stored.status();
    if (!stored->has_value()) {
      return ErrnoStatus(ENOENT, absl::StrCat("heartbeat: unknown storage server id ",
                                              request.server_id(), "; register again"));
    }
    ServerRecord record = **stored;
    record.mutable_info()->set_capacity_bytes(request.capacity_bytes());
    record.mutable_info()->set_used_bytes(request.used_bytes());
    record.mutable_info()->set_last_heartbeat_ms(clock_->NowMs());
    txn.Put(ServerKey(request.server_id()), record);
    return absl::OkStatus();
  });
}

absl::StatusOr<std::vector<ServerInfo>> Membership::ListServers() {
  std::vector<ServerInfo> servers;
  std::string start_after;
  while (true) {
    absl::StatusOr<std::vector<KeyValue>> page =
        kv_->Scan(kServerPrefix, start_after, kServerScanPage);
    if (!page.ok()) return page.status();
    for (const KeyValue& kv : *page) {
      ServerRecord record;
      if (!record.ParseFromString(kv.value)) return ErrnoStatus(EIO, "corrupt server record");
      ServerInfo info = record.info();
      info.set_alive(IsAlive(info));
      servers.push_back(std::move(info));
    }
    if (page->size() < kServerScanPage) break;
    start_after = page->back().key.substr(kServerPrefix.size());
  }
  return servers;
}

absl::StatusOr<std::vector<ServerInfo>> Membership::AliveServers() {
  absl::StatusOr<std::vector<ServerInfo>> all = ListServers();
  if (!all.ok()) return all.status();
  std::vector<ServerInfo> alive;
  for (ServerInfo& info : *all) {
    if (info.alive()) alive.push_back(std::move(info));
  }
  return alive;
}

absl::StatusOr<std::optional<ServerInfo>> Membership::GetServer(uint32_t id) {
  absl::StatusOr<std::optional<VersionedValue>> stored = kv_->Get(ServerKey(id));
  if (!stored.ok()) return stored.status();
  if (!stored->has_value()) return std::optional<ServerInfo>();
  ServerRecord record;
  if (!record.ParseFromString((*stored)->value)) return ErrnoStatus(EIO, "corrupt server record");
  ServerInfo info = record.info();
  info.set_alive(IsAlive(info));
  return std::optional<ServerInfo>(std::move(info));
}

}  // namespace ckptfs::meta
