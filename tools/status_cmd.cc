// `ckptfs status`: one look at a cluster, from the metadata service's
// ClusterStatus: the storage servers (up/down, capacity, use, load, scrub
// totals, last heartbeat), the redundancy state, the repairer's last report,
// the clients (mounts, tools, jobs) that announced themselves, and the
// pending checkpoints with ranks arrived.
// --json prints the same reply as one JSON object (protobuf's JSON
// mapping: 64-bit numbers are strings). A service of an older build without
// ClusterStatus gets the servers table from ListServers only.
// Runs on main's thread only.
#include <google/protobuf/util/json_util.h>

#include <algorithm>
#include <cerrno>
#include <iostream>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "common/errno_status.h"
#include "tools/cluster_address.h"
#include "tools/commands.h"
#include "tools/meta_probe.h"
#include "tools/mount_transactions.h"
#include "tools/table.h"

namespace ckptfs::tools {
namespace {

constexpr absl::Duration kDeadline = absl::Seconds(5);

std::string Ago(int64_t now_ms, int64_t then_ms) {
  return then_ms == 0 ? "never" : FormatAge(now_ms - then_ms) + " ago";
}

std::string ServerTable(const google::protobuf::RepeatedPtrField<meta::ServerStatus>& servers,
                        int64_t now_ms) {
  std::vector<std::vector<std::string>> rows = {
      {"ID", "ADDRESS", "STATE", "CAPACITY", "USED", "CONNS", "READ/S", "WRITE/S"}};
  for (std::string& header : ScrubHeaders()) rows[0].push_back(std::move(header));
  rows[0].push_back("LAST HEARTBEAT");
  for (const meta::ServerStatus& s : servers) {
    const meta::ServerInfo& i = s.info();
    const bool load = s.load_reported() && i.alive();
    std::vector<std::string> row = {absl::StrCat(i.id()),
                                    i.address(),
                                    i.alive() ? "up" : "DOWN",
                                    FormatBytes(i.capacity_bytes()),
                                    FormatBytes(i.used_bytes()),
                                    load ? absl::StrCat(s.connections()) : "-",
                                    load ? FormatBytes(s.read_bytes_per_s()) : "-",
                                    load ? FormatBytes(s.write_bytes_per_s()) : "-"};
    // A down server's last totals still say what its scrubber found.
    for (std::string& cell : ScrubCells(s)) row.push_back(std::move(cell));
    row.push_back(Ago(now_ms, i.last_heartbeat_ms()));
    rows.push_back(std::move(row));
  }
  return FormatTable(rows);
}

void PrintText(const meta::ClusterStatusReply& status) {
  const int64_t now_ms = status.now_ms();
  int up = 0;
  for (const meta::ServerStatus& s : status.servers()) up += s.info().alive() ? 1 : 0;
  const int down = status.servers_size() - up;
  std::cout << "metadata service " << status.service_address() << " (" << status.version()
            << "): " << status.servers_size() << " storage server"
            << (status.servers_size() == 1 ? "" : "s") << ", " << up << " up";
  if (down > 0) std::cout << ", " << down << " DOWN";
  std::cout << "\n\nstorage servers\n" << ServerTable(status.servers(), now_ms);

  const uint32_t copies = std::max<uint32_t>(1, status.copies());
  std::cout << "\nredundancy: " << status.redundancy()
            << " (of new files; a directory's user.ckptfs.replicas or user.ckptfs.ec may say "
               "otherwise)\n";
  if (down > 0 && status.ec_data() > 0) {
    const uint32_t pieces = status.ec_data() + status.ec_parity();
    std::cout << "  " << down << " server" << (down == 1 ? " is" : "s are")
              << " down: a chunk stays readable (decoded) while at most " << status.ec_parity()
              << " of its " << pieces << " fragments are on servers that are down; writes to a "
              << "file with a fragment there fail until "
              << (down == 1 ? "it returns" : "they return")
              << (status.has_repair()
                      ? ", and the repairer rebuilds the fragments missed meanwhile, or moves "
                        "them to another server if it stays down"
                      : ", and no repairer has reported to this service to rebuild the "
                        "fragments missed meanwhile (`ckptfs repair`)")
              << " (a new file avoids down servers)\n";
  } else if (down > 0 && copies > 1) {
    std::cout << "  " << down << " server" << (down == 1 ? " is" : "s are")
              << " down: a chunk stays readable while one of its " << copies
              << " copies is on a server that is up; writes to a file with a copy there "
                 "fail until "
              << (down == 1 ? "it returns" : "they return")
              << (status.has_repair()
                      ? ", and the repairer rebuilds the copies missed meanwhile, or moves "
                        "them to another server if it stays down"
                      : ", and no repairer has reported to this service to rebuild the "
                        "copies missed meanwhile (`ckptfs repair`)")
              << " (a new file avoids down servers)\n";
  } else if (down > 0) {
    std::cout << "  " << down << " server" << (down == 1 ? " is" : "s are")
              << " down: every file with a chunk there cannot be read until "
              << (down == 1 ? "it returns" : "they return")
              << " (a new file avoids down servers)\n";
  } else {
    std::cout << "  every chunk is readable (all servers up)\n";
  }

  // Like the clients below, the report of the repairer that reports to the
  // metadata server answering (with --etcd_shared, each server has its own).
  if (status.has_repair()) {
    std::cout << "\n" << FormatRepairReport(status.repair(), status.repair_reported_ms(), now_ms);
  } else {
    std::cout << "\nrepair: no report from a repairer since the metadata service started\n";
  }

  // Clients heartbeat to the metadata server they use, and a barrier's
  // waiters wait on theirs: with several servers serving at once
  // (--etcd_shared) these two lists are the answering server's own.
  std::cout << "\nclients seen (" << status.clients_size() << ", by " << status.service_address()
            << ")\n";
  if (status.clients_size() > 0) {
    std::vector<std::vector<std::string>> rows = {
        {"HOST", "PID", "PROGRAM", "MOUNTPOINT", "VERSION", "STARTED", "LAST HEARTBEAT"}};
    for (const meta::ClientInfo& c : status.clients()) {
      rows.push_back({c.hostname(), absl::StrCat(c.pid()), c.program(),
                      c.mountpoint().empty() ? "-" : c.mountpoint(), c.version(),
                      Ago(now_ms, c.started_ms()), Ago(now_ms, c.last_heartbeat_ms())});
    }
    std::cout << FormatTable(rows);
  }

  std::cout << "\npending checkpoints (" << status.pending_checkpoints_size() << ")\n";
  if (status.pending_checkpoints_size() > 0) {
    std::vector<std::vector<std::string>> rows = {
        {"NAME", "INODE", "RANKS", "DECLARED", "FIRST COMMIT", "TIMEOUT"}};
    for (const meta::CheckpointInfo& c : status.pending_checkpoints()) {
      rows.push_back({c.name(), absl::StrCat(c.ino()),
                      absl::StrCat(c.arrived(), "/", c.ranks(), " arrived"),
                      Ago(now_ms, c.declared_ms()), Ago(now_ms, c.first_commit_ms()),
                      absl::StrCat(c.timeout_s(), "s")});
    }
    std::cout << FormatTable(rows);
  }
}

}  // namespace

CommandSpec StatusSpec() {
  return CommandSpec{
      "status",
      "Show a cluster: servers, load, scrubbing, redundancy, repair, clients, pending checkpoints.",
      "Give either --meta, or --state-dir of a cluster started with `ckptfs up`.\n"
      "Servers: up or DOWN (no heartbeat within the service's --server_timeout_s),\n"
      "capacity and use of their data directory, open data connections and bytes/s\n"
      "read and written (between their last two heartbeats), and their scrubber's\n"
      "chunks checked, corrupt chunks found and whole passes since they started\n"
      "(\"-\": not reported). Repair: the last report of the repairer (`ckptfs up`\n"
      "starts one), its pass and what it rebuilt and moved. Clients: every mount,\n"
      "tool and program using libckptfs that sent a heartbeat in the last 15 s.\n"
      "Pending checkpoints: those the service has seen since it started, with\n"
      "ranks arrived/declared. Exit status 1 if the service cannot be reached.",
      {
          MetaFlag(),
          StateDirFlag(),
          CredentialFileFlag(),
          {"json", "", "print one JSON object (protobuf JSON mapping) instead of tables"},
      }};
}

int RunStatus(const ParsedFlags& flags) {
  static const CommandSpec spec = StatusSpec();
  if (flags.Given("meta") == flags.Given("state-dir")) {
    return UsageError(spec, "give exactly one of --meta and --state-dir");
  }
  absl::StatusOr<std::string> address = ResolveMetaAddress(flags, "");
  if (!address.ok()) return Failure(spec, std::string(address.status().message()));
  absl::StatusOr<std::string> credential = ResolveCredential(flags, "");
  if (!credential.ok()) return Failure(spec, std::string(credential.status().message()));
  MetaProbe probe(*address, *credential);
  absl::StatusOr<meta::ClusterStatusReply> status = probe.ClusterStatus(kDeadline);
  if (!status.ok() && status.status().code() == absl::StatusCode::kUnimplemented) {
    // An older service: the servers are all it can tell.
    absl::StatusOr<std::vector<meta::ServerInfo>> servers = probe.ListServers(kDeadline);
    if (servers.ok()) {
      status = meta::ClusterStatusReply();
      status->set_now_ms(absl::ToUnixMillis(absl::Now()));
      status->set_version("unknown (a service without ClusterStatus: servers only)");
      status->set_copies(1);
      status->set_redundancy("none (1 copy)");
      for (const meta::ServerInfo& s : *servers) *status->add_servers()->mutable_info() = s;
    } else {
      status = servers.status();
    }
  }
  if (!status.ok() && ErrnoFromStatus(status.status()) == EACCES) {
    // Reached, but it wants the cluster's credential (or another one).
    return Failure(spec, absl::StrCat("the metadata service at ", *address,
                                      " refused: ", status.status().message(),
                                      " (ckptfs status: --credential-file FILE, or --state-dir "
                                      "DIR of the cluster)"));
  }
  if (!status.ok()) {
    return Failure(spec, absl::StrCat("cannot reach the metadata service at ", *address, ": ",
                                      status.status().message(),
                                      " (is it running? `ckptfs up` starts a local cluster)"));
  }
  status->set_service_address(*address);
  std::sort(status->mutable_servers()->begin(), status->mutable_servers()->end(),
            [](const meta::ServerStatus& a, const meta::ServerStatus& b) {
              return a.info().id() < b.info().id();
            });
  if (flags.GetBool("json")) {
    google::protobuf::util::JsonPrintOptions options;
    options.add_whitespace = true;
    options.always_print_primitive_fields = true;
    options.preserve_proto_field_names = true;
    std::string json;
    if (auto s = google::protobuf::util::MessageToJsonString(*status, &json, options); !s.ok()) {
      return Failure(spec, absl::StrCat("cannot write JSON: ", s.ToString()));
    }
    std::cout << json;
    if (json.empty() || json.back() != '\n') std::cout << "\n";
    return 0;
  }
  PrintText(*status);
  return 0;
}

}  // namespace ckptfs::tools
