// `ckptfs repair`: one pass of the repairer over the whole namespace
// (server/repair/repair_pass.h): missing and corrupt copies of replicated
// chunks are restored from a good copy, and the copies held by a storage
// server dead for --move-after-s are moved onto a live server outside the
// file's stripe. Prints each problem and a summary; exit status 1 when
// something could not be repaired. With --watch it runs a pass every
// --interval-s, and at once when the set of live servers changes (one came
// back or a new one joined) or a dead one passes --move-after-s; `ckptfs up`
// starts it that way in the background. Progress goes to the metadata
// service about once a second (`ckptfs status` shows it).
// Runs on main's thread only.
#include <unistd.h>

#include <algorithm>
#include <iostream>
#include <optional>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "client/blocking_chunk_transport.h"
#include "client/grpc_meta_client.h"
#include "server/repair/repair_meta.h"
#include "server/repair/repair_pass.h"
#include "tools/cluster_address.h"
#include "tools/commands.h"

namespace ckptfs::tools {
namespace {

constexpr absl::Duration kRpcTimeout = absl::Seconds(30);
constexpr absl::Duration kDataTimeout = absl::Seconds(60);
// --watch: how often the live servers are looked at between passes.
constexpr absl::Duration kServerPoll = absl::Seconds(1);

// RepairMeta over the gRPC metadata client.
class MetaClientRepairMeta : public repair::RepairMeta {
 public:
  explicit MetaClientRepairMeta(client::MetaClient* meta) : meta_(meta) {}

  absl::StatusOr<std::vector<meta::ServerInfo>> ListServers() override {
    absl::StatusOr<meta::ListServersReply> reply = meta_->ListServers(meta::Empty());
    if (!reply.ok()) return reply.status();
    return std::vector<meta::ServerInfo>(reply->servers().begin(), reply->servers().end());
  }
  absl::StatusOr<meta::ReadDirReply> ReadDir(uint64_t ino, absl::string_view start_after) override {
    meta::ReadDirRequest request;
    request.set_ino(ino);
    request.set_start_after(std::string(start_after));
    return meta_->ReadDir(request);
  }
  absl::StatusOr<meta::Attr> GetAttr(uint64_t ino) override {
    meta::InodeRequest request;
    request.set_ino(ino);
    absl::StatusOr<meta::AttrReply> reply = meta_->GetAttr(request);
    if (!reply.ok()) return reply.status();
    return reply->attr();
  }
  absl::StatusOr<meta::Attr> MoveStripeServer(uint64_t ino, uint32_t from, uint32_t to) override {
    return meta_->MoveStripeServer(ino, from, to);
  }
  absl::Status ReportRepair(const meta::RepairReport& report) override {
    return meta_->ReportRepair(report);
  }

 private:
  client::MetaClient* const meta_;
};

std::string ThisRepairer() {
  char host[256] = {};
  if (::gethostname(host, sizeof(host) - 1) != 0) host[0] = '\0';
  return absl::StrCat(host[0] == '\0' ? "unknown" : host, " pid ", ::getpid());
}

std::string Summary(const meta::RepairReport& r) {
  return absl::StrCat("repair pass ", r.passes_completed(), ": ", r.files_checked(), " files, ",
                      r.chunks_checked(), " chunks compared, ", r.copies_rebuilt(),
                      " copies rebuilt, ", r.copies_moved(), " copies moved, ", r.bytes_written(),
                      " bytes written, ", r.files_unrepairable(), " files unrepairable");
}

// What makes --watch start a pass at once when it changes: the live
// servers, and the dead ones whose copies are due to move.
std::pair<std::set<uint32_t>, std::set<uint32_t>> ServerSignature(
    const std::vector<meta::ServerInfo>& servers, absl::Duration move_after) {
  std::set<uint32_t> alive;
  std::set<uint32_t> due;
  const int64_t now_ms = absl::ToUnixMillis(absl::Now());
  for (const meta::ServerInfo& s : servers) {
    if (s.alive()) {
      alive.insert(s.id());
    } else if (s.last_heartbeat_ms() <= 0 ||
               now_ms - s.last_heartbeat_ms() >= absl::ToInt64Milliseconds(move_after)) {
      due.insert(s.id());
    }
  }
  return {alive, due};
}

}  // namespace

CommandSpec RepairSpec() {
  return CommandSpec{
      "repair",
      "Restore missing and corrupt copies of replicated chunks; move copies off dead servers.",
      "One pass over every regular file of the cluster (give --meta, or --state-dir of a\n"
      "cluster started with `ckptfs up`). Each chunk of a file with 2 or more copies is\n"
      "read from every copy on a live server: a missing copy (also one the storage\n"
      "server's scrubber set aside) is filled from a good one, never over bytes a writer\n"
      "stored meanwhile; a corrupt one (failing its CRC32C) is rewritten. Copies that\n"
      "are all readable but differ are left as they are and reported. A storage server\n"
      "dead for --move-after-s has its copies written onto a live server outside the\n"
      "file's stripe (the one with the most free bytes), which then takes its place in\n"
      "the stripe. Exit status 0 when nothing is left unrepaired, 1 otherwise.\n"
      "--watch: a pass every --interval-s, and at once when a server comes back, a new\n"
      "one joins, or a dead one passes --move-after-s (`ckptfs up` runs this). Progress\n"
      "is reported to the metadata service about once a second: `ckptfs status`.",
      {
          MetaFlag(),
          StateDirFlag(),
          {"credential-file", "FILE",
           "the cluster's server credential (default: DIR/server-credential of --state-dir)"},
          {"watch", "", "keep running: a pass every --interval-s and when servers change"},
          {"interval-s", "N", "--watch: seconds between passes", "60"},
          {"move-after-s", "N",
           "move the copies of a server dead for this many seconds (0: at once)", "600"},
      }};
}

int RunRepair(const ParsedFlags& flags) {
  static const CommandSpec spec = RepairSpec();
  if (flags.Given("meta") == flags.Given("state-dir")) {
    return UsageError(spec, "give exactly one of --meta and --state-dir");
  }
  absl::StatusOr<int64_t> interval_s = flags.GetInt("interval-s", 1, 7 * 24 * 3600);
  if (!interval_s.ok()) return UsageError(spec, std::string(interval_s.status().message()));
  absl::StatusOr<int64_t> move_after_s = flags.GetInt("move-after-s", 0, 365LL * 24 * 3600);
  if (!move_after_s.ok()) return UsageError(spec, std::string(move_after_s.status().message()));
  absl::StatusOr<std::string> address = ResolveMetaAddress(flags, "");
  if (!address.ok()) return Failure(spec, std::string(address.status().message()));
  absl::StatusOr<std::string> credential = ResolveServerCredential(flags);
  if (!credential.ok()) return Failure(spec, std::string(credential.status().message()));

  client::GrpcMetaClient meta(*address, kRpcTimeout, *credential);
  client::BlockingChunkTransport transport(&meta, kDataTimeout, *credential);
  if (absl::Status s = transport.RefreshServers(); !s.ok()) {
    return Failure(spec, absl::StrCat("cannot list the storage servers of the metadata service at ",
                                      *address, ": ", s.message()));
  }
  MetaClientRepairMeta repair_meta(&meta);
  repair::RepairPassOptions options;
  options.move_after = absl::Seconds(*move_after_s);
  options.repairer = ThisRepairer();
  options.on_problem = [](const std::string& problem) {
    std::cout << "ckptfs repair: " << problem << std::endl;
  };
  repair::RepairPass pass(&repair_meta, &transport, options);

  if (!flags.GetBool("watch")) {
    absl::StatusOr<meta::RepairReport> report = pass.Run(0);
    if (!report.ok()) return Failure(spec, std::string(report.status().message()));
    std::cout << Summary(*report) << std::endl;
    return report->files_unrepairable() == 0 ? 0 : 1;
  }
  uint64_t passes = 0;
  while (true) {
    absl::StatusOr<meta::RepairReport> report = pass.Run(passes);
    if (report.ok()) {
      passes = report->passes_completed();
      std::cout << absl::FormatTime("%Y-%m-%d %H:%M:%S ", absl::Now(), absl::LocalTimeZone())
                << Summary(*report) << std::endl;
    } else {
      std::cout << "ckptfs repair: pass failed: " << report.status().message() << std::endl;
    }
    // Wait for the next pass, looking at the servers meanwhile.
    auto servers = repair_meta.ListServers();
    std::optional<std::pair<std::set<uint32_t>, std::set<uint32_t>>> before;
    if (servers.ok()) before = ServerSignature(*servers, options.move_after);
    const absl::Time next = absl::Now() + absl::Seconds(*interval_s);
    while (absl::Now() < next) {
      absl::SleepFor(std::min(kServerPoll, next - absl::Now()));
      servers = repair_meta.ListServers();
      if (!servers.ok()) continue;
      auto now = ServerSignature(*servers, options.move_after);
      if (!before.has_value()) {
        before = now;
      } else if (now != *before) {
        std::cout << "ckptfs repair: the storage servers changed; a pass now" << std::endl;
        break;
      }
    }
  }
}

}  // namespace ckptfs::tools
