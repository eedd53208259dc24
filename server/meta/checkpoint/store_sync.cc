// See store_sync.h.
#include "server/meta/checkpoint/store_sync.h"

#include <cerrno>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "common/credential.h"
#include "common/data_connection.h"
#include "common/errno_status.h"
#include "common/net.h"
#include "proto/data.pb.h"

namespace ckptfs::meta {
namespace {

absl::Status SyncOne(Membership& membership, uint32_t id, absl::Duration timeout) {
  absl::StatusOr<std::optional<ServerInfo>> server = membership.GetServer(id);
  if (!server.ok()) return server.status();
  if (!server->has_value()) return absl::OkStatus();  // never registered: stores nothing
  absl::StatusOr<HostPort> address = ParseHostPort((*server)->address());
  if (!address.ok()) return address.status();
  absl::StatusOr<std::unique_ptr<DataConnection>> connection =
      DataConnection::Connect(*address, timeout);
  if (!connection.ok()) return connection.status();
  if (absl::Status hello = PresentCredential(**connection, ProcessCredential()); !hello.ok()) {
    return hello;
  }
  data::RequestHeader sync;
  sync.set_op(data::SYNC);
  sync.set_whole_store(true);
  return (*connection)->Call(sync, nullptr, 0, nullptr, 0).status();
}

}  // namespace

absl::Status SyncStorageServers(Membership& membership, const std::set<uint32_t>& servers,
                                absl::Duration timeout) {
  const std::vector<uint32_t> ids(servers.begin(), servers.end());
  std::vector<absl::Status> results(ids.size());
  std::vector<std::thread> threads;
  threads.reserve(ids.size());
  for (size_t i = 0; i < ids.size(); ++i) {
    threads.emplace_back([&, i] { results[i] = SyncOne(membership, ids[i], timeout); });
  }
  for (std::thread& thread : threads) thread.join();
  for (size_t i = 0; i < ids.size(); ++i) {
    if (!results[i].ok()) {
      return ErrnoStatus(EIO, absl::StrCat("sync of storage server ", ids[i],
                                           " failed: ", results[i].message()));
    }
  }
  return absl::OkStatus();
}

}  // namespace ckptfs::meta
