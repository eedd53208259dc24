// RepairPass: one pass of the repairer over the whole namespace.
//
// Walks the directory tree from the root (RepairMeta::ReadDir, every page),
// and repairs each regular file it finds (file_repair.h) against the storage
// servers listed once at the start of the pass. Progress goes to the
// metadata service (RepairMeta::ReportRepair) about once every
// `report_every` during the pass and once at its end, as a RepairReport
// (proto/meta.proto) whose totals are this pass's; `ckptfs status` shows
// the last one. Files removed while the pass runs are skipped quietly.
//
// Thread-safety: one Run at a time per RepairPass (the caller's thread).
#ifndef CKPTFS_SERVER_REPAIR_REPAIR_PASS_H_
#define CKPTFS_SERVER_REPAIR_REPAIR_PASS_H_

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "client/chunk_transport.h"
#include "proto/meta.pb.h"
#include "server/repair/repair_meta.h"

namespace ckptfs::repair {

struct RepairPassOptions {
  // A stripe server dead at least this long has its copies moved.
  absl::Duration move_after = absl::Minutes(10);
  // Progress reports to the service during a pass.
  absl::Duration report_every = absl::Seconds(1);
  // RepairReport.repairer: who reports, "<host> pid <pid>".
  std::string repairer;
  // Called with each problem line as it is found (may be empty).
  std::function<void(const std::string&)> on_problem;
};

class RepairPass {
 public:
  // `meta` and `transport` are borrowed and must outlive this.
  RepairPass(RepairMeta* meta, client::ChunkTransport* transport, RepairPassOptions options);

  // Runs one pass; `passes_before` is the count of passes this repairer
  // completed before it (the final report says passes_before + 1). The
  // final report, also sent to the service; an error only when the pass
  // could not start (ListServers) or the walk from the root failed.
  absl::StatusOr<meta::RepairReport> Run(uint64_t passes_before);

 private:
  // Repairs the files under directory `ino` (named `path`), recursively.
  absl::Status Walk(uint64_t ino, const std::string& path);
  void RepairFile(uint64_t ino, const std::string& path);
  // Sends the report if `force` or report_every passed since the last.
  void MaybeReport(bool force);

  RepairMeta* const meta_;
  client::ChunkTransport* const transport_;
  const RepairPassOptions options_;
  // Per Run.
  meta::RepairReport report_;
  std::vector<meta::ServerInfo> servers_;
  int64_t servers_listed_ms_ = 0;
  absl::Time last_report_ = absl::InfinitePast();
  bool report_failed_ = false;  // the last ReportRepair failed (logged)
};

}  // namespace ckptfs::repair

#endif  // CKPTFS_SERVER_REPAIR_REPAIR_PASS_H_
