// See store_sync.h.
#include "server/meta/checkpoint/store_sync.h"

#include <cerrno>
#include <thread>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "common/credential.h"
#include "common/data_connection.h"
#include "common/errno_status.h"
#include "common/tcp.h"
#include "proto/data.pb.h"

namespace ckptfs::meta {
namespace {

// The SYNC of server `id` (with written_by `incarnations`); its failure
// names the server by id and address.
absl::Status SyncOne(Membership& membership, uint32_t id, const std::set<uint64_t>& incarnations,
                     absl::Duration timeout) {
  absl::StatusOr<std::optional<ServerInfo>> server = membership.GetServer(id);
  if (!server.ok()) {
    return ErrnoStatus(
        EIO, absl::StrCat("sync of storage server ", id, " failed: ", server.status().message()));
  }
  if (!server->has_value()) return absl::OkStatus();  // never registered: stores nothing
  auto failed = [&](const absl::Status& why) {
    return ErrnoStatus(EIO, absl::StrCat("sync of storage server ", id, " (", (*server)->address(),
                                         ") failed: ", why.message()));
  };
  absl::StatusOr<HostPort> address = ParseHostPort((*server)->address());
  if (!address.ok()) return failed(address.status());
  absl::StatusOr<std::unique_ptr<DataConnection>> connection =
      DataConnection::Connect(*address, timeout);
  if (!connection.ok()) return failed(connection.status());
  if (absl::Status hello = PresentCredential(**connection, ProcessCredential()); !hello.ok()) {
    return failed(hello);
  }
  data::RequestHeader sync;
  sync.set_op(data::SYNC);
  sync.set_whole_store(true);
  for (uint64_t incarnation : incarnations) sync.add_written_by(incarnation);
  absl::Status synced = (*connection)->Call(sync, nullptr, 0, nullptr, 0).status();
  return synced.ok() ? synced : failed(synced);
}

}  // namespace

absl::Status SyncStorageServers(Membership& membership,
                                const std::map<uint32_t, std::set<uint64_t>>& servers,
                                absl::Duration timeout) {
  const std::vector<std::pair<uint32_t, std::set<uint64_t>>> targets(servers.begin(),
                                                                     servers.end());
  std::vector<absl::Status> results(targets.size());
  std::vector<std::thread> threads;
  threads.reserve(targets.size());
  for (size_t i = 0; i < targets.size(); ++i) {
    threads.emplace_back(
        [&, i] { results[i] = SyncOne(membership, targets[i].first, targets[i].second, timeout); });
  }
  for (std::thread& thread : threads) thread.join();
  for (const absl::Status& result : results) {
    if (!result.ok()) return result;
  }
  return absl::OkStatus();
}

}  // namespace ckptfs::meta
