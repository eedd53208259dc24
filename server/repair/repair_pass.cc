// See repair_pass.h.
#include "server/repair/repair_pass.h"

#include <cerrno>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "client/client.h"
#include "common/errno_status.h"
#include "common/log.h"
#include "server/repair/file_repair.h"

namespace ckptfs::repair {

RepairPass::RepairPass(RepairMeta* meta, client::ChunkTransport* transport,
                       RepairPassOptions options)
    : meta_(meta), transport_(transport), options_(std::move(options)) {}

absl::StatusOr<meta::RepairReport> RepairPass::Run(uint64_t passes_before) {
  report_ = meta::RepairReport();
  report_.set_repairer(options_.repairer);
  report_.set_passes_completed(passes_before);
  report_.set_pass_started_ms(absl::ToUnixMillis(absl::Now()));
  last_report_ = absl::InfinitePast();
  absl::StatusOr<std::vector<meta::ServerInfo>> servers = meta_->ListServers();
  if (!servers.ok()) return servers.status();
  servers_ = *std::move(servers);
  // last_heartbeat_ms is the service's clock; the service and the repairer
  // are assumed to agree on the time within seconds (move_after is minutes).
  servers_listed_ms_ = absl::ToUnixMillis(absl::Now());
  MaybeReport(/*force=*/true);
  absl::Status walked = Walk(client::kRootIno, "");
  report_.set_passes_completed(passes_before + 1);
  report_.set_pass_ended_ms(absl::ToUnixMillis(absl::Now()));
  MaybeReport(/*force=*/true);
  if (!walked.ok()) return walked;
  return report_;
}

absl::Status RepairPass::Walk(uint64_t ino, const std::string& path) {
  std::string start_after;
  while (true) {
    absl::StatusOr<meta::ReadDirReply> page = meta_->ReadDir(ino, start_after);
    if (!page.ok()) {
      // A directory removed under the walk: nothing left to repair there.
      if (ino != client::kRootIno && ErrnoFromStatus(page.status()) == ENOENT) {
        return absl::OkStatus();
      }
      return ErrnoStatus(ErrnoFromStatus(page.status()),
                         absl::StrCat("listing directory ", path.empty() ? "/" : path, ": ",
                                      page.status().message()));
    }
    for (const meta::DirEntry& entry : page->entries()) {
      const std::string child = absl::StrCat(path, "/", entry.name());
      if (entry.type() == meta::DIRECTORY) {
        if (absl::Status s = Walk(entry.ino(), child); !s.ok()) {
          // One unreadable directory does not stop the pass.
          report_.set_files_unrepairable(report_.files_unrepairable() + 1);
          report_.set_last_problem(std::string(s.message()));
          if (options_.on_problem) options_.on_problem(report_.last_problem());
        }
      } else if (entry.type() == meta::REGULAR) {
        RepairFile(entry.ino(), child);
      }
      start_after = entry.name();
    }
    if (!page->more() || page->entries().empty()) return absl::OkStatus();
  }
}

void RepairPass::RepairFile(uint64_t ino, const std::string& path) {
  report_.set_files_total(report_.files_total() + 1);
  absl::StatusOr<meta::Attr> attr = meta_->GetAttr(ino);
  if (!attr.ok()) {
    if (ErrnoFromStatus(attr.status()) != ENOENT) {
      report_.set_files_unrepairable(report_.files_unrepairable() + 1);
      report_.set_last_problem(absl::StrCat("file ", path, " (inode ", ino,
                                            "): reading its layout: ", attr.status().message()));
      if (options_.on_problem) options_.on_problem(report_.last_problem());
    }
    report_.set_files_checked(report_.files_checked() + 1);
    MaybeReport(false);
    return;
  }
  FileRepairer repairer(meta_, transport_, options_.move_after);
  FileRepairResult result = repairer.Repair(path, *std::move(attr), servers_, servers_listed_ms_);
  report_.set_files_checked(report_.files_checked() + 1);
  report_.set_chunks_checked(report_.chunks_checked() + result.chunks_checked);
  report_.set_copies_rebuilt(report_.copies_rebuilt() + result.copies_rebuilt);
  report_.set_copies_moved(report_.copies_moved() + result.copies_moved);
  report_.set_bytes_written(report_.bytes_written() + result.bytes_written);
  if (result.unrepairable) report_.set_files_unrepairable(report_.files_unrepairable() + 1);
  for (const std::string& problem : result.problems) {
    report_.set_last_problem(problem);
    if (options_.on_problem) options_.on_problem(problem);
  }
  MaybeReport(false);
}

void RepairPass::MaybeReport(bool force) {
  const absl::Time now = absl::Now();
  if (!force && now - last_report_ < options_.report_every) return;
  last_report_ = now;
  absl::Status s = meta_->ReportRepair(report_);
  if (!s.ok() && !report_failed_) {
    // Progress is for people; the repair goes on without it (said once).
    CKPTFS_LOG(kWarning) << "reporting repair progress: " << s.message();
  }
  report_failed_ = !s.ok();
}

}  // namespace ckptfs::repair
