// `ckptfs status`: the storage servers a metadata service knows, from
// ListServers: id, address, alive, capacity, used, last heartbeat.
// Runs on main's thread only.
#include <algorithm>
#include <iostream>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "tools/commands.h"
#include "tools/meta_probe.h"
#include "tools/state_dir.h"
#include "tools/table.h"

namespace ckptfs::tools {

CommandSpec StatusSpec() {
  return CommandSpec{
      "status",
      "List the storage servers of a cluster (id, address, alive, capacity, used).",
      "Give either --meta, or --state-dir of a cluster started with `ckptfs up`.",
      {
          {"meta", "ADDR", "the metadata service, host:port"},
          {"state-dir", "DIR", "read the metadata service's address from DIR/cluster.state"},
      }};
}

int RunStatus(const ParsedFlags& flags) {
  static const CommandSpec spec = StatusSpec();
  std::string address = flags.Get("meta");
  if (flags.Given("meta") == flags.Given("state-dir")) {
    return UsageError(spec, "give exactly one of --meta and --state-dir");
  }
  if (flags.Given("state-dir")) {
    absl::StatusOr<StateDir> dir = StateDir::Open(flags.Get("state-dir"), /*create=*/false);
    if (!dir.ok()) return Failure(spec, std::string(dir.status().message()));
    absl::StatusOr<std::optional<ClusterState>> state = dir->Load();
    if (!state.ok()) return Failure(spec, std::string(state.status().message()));
    if (!state->has_value()) {
      return Failure(spec, absl::StrCat("no cluster is running from ", dir->path()));
    }
    address = (*state)->meta_address;
  }
  MetaProbe probe(address);
  absl::StatusOr<std::vector<meta::ServerInfo>> servers = probe.ListServers(absl::Seconds(5));
  if (!servers.ok()) {
    return Failure(spec, absl::StrCat("cannot reach the metadata service at ", address, ": ",
                                      servers.status().message()));
  }
  std::sort(servers->begin(), servers->end(),
            [](const meta::ServerInfo& a, const meta::ServerInfo& b) { return a.id() < b.id(); });
  const int64_t now_ms = absl::ToUnixMillis(absl::Now());
  std::vector<std::vector<std::string>> rows = {
      {"ID", "ADDRESS", "ALIVE", "CAPACITY", "USED", "LAST HEARTBEAT"}};
  int alive = 0;
  for (const meta::ServerInfo& s : *servers) {
    alive += s.alive() ? 1 : 0;
    rows.push_back({absl::StrCat(s.id()), s.address(), s.alive() ? "yes" : "NO",
                    FormatBytes(s.capacity_bytes()), FormatBytes(s.used_bytes()),
                    s.last_heartbeat_ms() == 0
                        ? "never"
                        : absl::StrCat((now_ms - s.last_heartbeat_ms()) / 1000, "s ago")});
  }
  std::cout << "metadata service " << address << ": " << servers->size()
            << " storage server" << (servers->size() == 1 ? "" : "s") << ", " << alive
            << " alive\n\n"
            << FormatTable(rows);
  return 0;
}

}  // namespace ckptfs::tools
