// See up_ports.h.
#include "tools/up_ports.h"

#include <cerrno>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/errno_status.h"
#include "tools/ports.h"

namespace ckptfs::tools {

absl::Status CheckMetricsPorts(const UpConfig& config) {
  if (config.metrics_port == 0) return absl::OkStatus();
  std::vector<uint16_t> busy;
  for (int i = 0; i < config.servers + 2; ++i) {
    const uint16_t port = static_cast<uint16_t>(config.metrics_port + i);
    if (!CheckPortFree(config.host, port).ok()) busy.push_back(port);
  }
  if (busy.empty()) return absl::OkStatus();
  std::vector<uint16_t> taken = {config.meta_port};
  for (int i = 0; i < config.servers; ++i) taken.push_back(config.StoragePort(i));
  std::optional<uint16_t> alt =
      FindFreePortRange(config.host, config.metrics_port, config.servers + 2, taken);
  return absl::FailedPreconditionError(absl::StrCat(
      busy.size() == 1 ? "metrics port " : "metrics ports ", absl::StrJoin(busy, ", "),
      " (--metrics-port ", config.metrics_port, "..", config.metrics_port + config.servers + 1,
      ") on ", config.host, busy.size() == 1 ? " is" : " are", " already in use",
      alt ? absl::StrCat("; pass --metrics-port ", *alt) : "",
      ", or --metrics-port 0 for no metrics endpoints"));
}

absl::Status CheckPorts(const UpConfig& config) {
  absl::Status meta = CheckPortFree(config.host, config.meta_port);
  if (!meta.ok() && ErrnoFromStatus(meta) != EADDRINUSE) {
    return absl::FailedPreconditionError(
        absl::StrCat("cannot listen on ", config.MetaAddress(), ": ", meta.message(),
                     " (is --host ", config.host, " an address of this machine?)"));
  }
  std::vector<uint16_t> busy;
  for (int i = 0; i < config.servers; ++i) {
    if (!CheckPortFree(config.host, config.StoragePort(i)).ok()) {
      busy.push_back(config.StoragePort(i));
    }
  }
  if (meta.ok() && busy.empty()) return absl::OkStatus();

  // Suggest a storage range first, then a meta port outside it, so that
  // passing both suggestions works.
  std::optional<uint16_t> storage_alt = config.storage_port;
  if (!busy.empty()) {
    storage_alt =
        FindFreePortRange(config.host, config.storage_port, config.servers, {config.meta_port});
  }
  std::vector<uint16_t> storage_ports;
  for (int i = 0; storage_alt && i < config.servers; ++i) {
    storage_ports.push_back(static_cast<uint16_t>(*storage_alt + i));
  }
  std::vector<std::string> problems;
  if (!meta.ok()) {
    std::optional<uint16_t> alt =
        FindFreePortRange(config.host, config.meta_port, 1, storage_ports);
    problems.push_back(absl::StrCat("port ", config.meta_port, " (metadata service) on ",
                                    config.host, " is already in use",
                                    alt ? absl::StrCat("; pass --meta-port ", *alt) : ""));
  }
  if (!busy.empty()) {
    problems.push_back(absl::StrCat(
        busy.size() == 1 ? "port " : "ports ", absl::StrJoin(busy, ", "), " (storage servers use ",
        config.storage_port, "..", config.StoragePort(config.servers - 1), ") on ", config.host,
        busy.size() == 1 ? " is" : " are", " already in use",
        storage_alt ? absl::StrCat("; pass --storage-port ", *storage_alt) : ""));
  }
  return absl::FailedPreconditionError(
      absl::StrCat(absl::StrJoin(problems, "\n  "),
                   "\n  (another ckptfs cluster or another program listens there; `ss -ltnp` "
                   "shows which)"));
}

absl::Status CheckEtcdPorts(const UpConfig& config) {
  if (!config.on_etcd) return absl::OkStatus();
  std::vector<std::pair<uint16_t, std::string>> used = {{config.meta_port, "--meta-port"}};
  for (int i = 0; i < config.servers; ++i)
    used.push_back({config.StoragePort(i), "--storage-port"});
  if (config.metrics_port != 0) {
    for (int i = 0; i < config.servers + 2; ++i) {
      used.push_back({static_cast<uint16_t>(config.metrics_port + i), "--metrics-port"});
    }
  }
  std::vector<std::pair<uint16_t, std::string>> mine = {{config.standby_port, "--standby-port"}};
  for (int i = 0; i < kEtcdMembers; ++i) {
    mine.push_back({config.etcd.ClientPort(i), "--etcd-port"});
    mine.push_back({config.etcd.PeerPort(i), "--etcd-port"});
  }
  for (const auto& [port, flag] : mine) {
    for (const auto& [other, other_flag] : used) {
      if (port == other) {
        return absl::InvalidArgumentError(absl::StrCat(
            "port ", port, " (", flag, ") is also used by ", other_flag,
            " (etcd members use --etcd-port..--etcd-port+", 2 * kEtcdMembers - 1, ")"));
      }
    }
    used.push_back({port, flag});
  }
  for (const auto& [port, flag] : mine) {
    if (!CheckPortFree(config.host, port).ok()) {
      return absl::FailedPreconditionError(absl::StrCat(
          "port ", port, " (", flag, ") on ", config.host,
          " is already in use (another etcd or ckptfs cluster? `ss -ltnp` shows which); pass ",
          flag, " with another port"));
    }
  }
  return absl::OkStatus();
}

}  // namespace ckptfs::tools
