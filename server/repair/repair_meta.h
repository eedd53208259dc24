// RepairMeta: what the repairer (`ckptfs repair`, repair_pass.h) needs of
// the metadata service — the namespace walk, a file's layout, the storage
// servers, moving a file's copies off a dead server, and its progress
// report — as one small interface, so the repair logic is tested over an
// in-memory service (tests/repair/repair_test.cc) and runs over gRPC through
// client::MetaClient (tools/repair_cmd.cc).
//
// Thread-safety: implementations must allow calls from any thread (the
// repairer calls from one thread at a time).
#ifndef CKPTFS_SERVER_REPAIR_REPAIR_META_H_
#define CKPTFS_SERVER_REPAIR_REPAIR_META_H_

#include <cstdint>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "proto/meta.pb.h"

namespace ckptfs::repair {

class RepairMeta {
 public:
  virtual ~RepairMeta() = default;

  // The storage servers the service knows, with their alive flag and last
  // heartbeat (the service's wall clock, ms).
  virtual absl::StatusOr<std::vector<meta::ServerInfo>> ListServers() = 0;
  // One page of directory `ino`'s entries after `start_after`.
  virtual absl::StatusOr<meta::ReadDirReply> ReadDir(uint64_t ino,
                                                     absl::string_view start_after) = 0;
  // Size and layout of inode `ino`; ENOENT once it is gone.
  virtual absl::StatusOr<meta::Attr> GetAttr(uint64_t ino) = 0;
  // Every `from` in the file's stripe becomes `to` (proto/meta.proto,
  // MoveStripeServerRequest): the new attributes; ESTALE when the stripe no
  // longer holds `from`, EINVAL when `to` is unknown or already in it.
  virtual absl::StatusOr<meta::Attr> MoveStripeServer(uint64_t ino, uint32_t from, uint32_t to) = 0;
  // Hands the service the repairer's progress (`ckptfs status` shows it).
  virtual absl::Status ReportRepair(const meta::RepairReport& report) = 0;
};

}  // namespace ckptfs::repair

#endif  // CKPTFS_SERVER_REPAIR_REPAIR_META_H_
