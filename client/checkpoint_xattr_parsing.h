// The checkpoint extended attributes of ckptfs (docs/checkpoints.md):
// their names, the parsing of the values written to them and
// the formatting of the values read from them. The Client routes these names
// (client_checkpoints.cc), so the FUSE mount and programs using libckptfs
// behave the same.
//
//   set user.ckptfs.ranks  "N"     declare the directory a checkpoint of N ranks
//   set user.ckptfs.commit "R"     rank R commits (blocks until all N did)
//   get user.ckptfs.commit.R       the same commit of rank R, as a read; its
//                                  value is "committed" (see below)
//   set user.ckptfs.remove "NAME"  on a run directory: remove checkpoint NAME
//   get user.ckptfs.state          "pending" | "committed" | "aborted" |
//                                  "removing" (committed, then a name in it
//                                  was unlinked or rmdir'ed: no longer valid)
//   get user.ckptfs.ranks          "N"
//   get user.ckptfs.info           one line of key=value (FormatCheckpointInfo)
//   get user.ckptfs.checkpoints    on a run directory: one info line per
//                                  checkpoint, each ending in "\n"
//   get user.ckptfs.latest         on a run directory: the latest committed name
//
// Numbers are plain decimal digits, optionally followed by one "\n" (what
// `echo` writes); anything else is EINVAL.
//
// Why a commit can also be a read: Linux holds a directory's inode lock for
// the whole of a setxattr on it, so through one mount only one setxattr of
// user.ckptfs.commit on a given checkpoint directory can be waiting at a
// time; the other ranks of that node queue in the kernel before reaching
// the FUSE daemon, and the barrier cannot complete. getxattr takes no lock,
// so any number of local ranks can wait in getxattr(dir,
// "user.ckptfs.commit.R") at once. A commit is idempotent, so the size
// query some tools make before the read is harmless.
//
// Thread-safety: pure functions.
#ifndef CKPTFS_CLIENT_CHECKPOINT_XATTR_PARSING_H_
#define CKPTFS_CLIENT_CHECKPOINT_XATTR_PARSING_H_

#include <cstdint>
#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "common/checkpoint_info_text.h"
#include "common/reserved_xattrs.h"
#include "proto/meta.pb.h"

namespace ckptfs::client {

// The checkpoint attribute `name` stands for; kNone for every other name
// (stored ones such as user.ckptfs.keep included).
enum class CheckpointXattr {
  kNone,
  kRanks,
  kCommit,
  kCommitRank,  // user.ckptfs.commit.R (any suffix: a bad R is EINVAL later)
  kRemove,
  kState,
  kInfo,
  kCheckpoints,
  kLatest,
};
CheckpointXattr ClassifyCheckpointXattr(absl::string_view name);

// N of user.ckptfs.ranks: 1..kMaxCheckpointRanks, else EINVAL.
absl::StatusOr<uint32_t> ParseCheckpointRanks(absl::string_view value);
// R of user.ckptfs.commit: any uint32 (the service checks R < N), else EINVAL.
absl::StatusOr<uint32_t> ParseCheckpointRank(absl::string_view value);
// R of a user.ckptfs.commit.R name: digits only, else EINVAL.
absl::StatusOr<uint32_t> ParseCommitRankXattr(absl::string_view name);
// NAME of user.ckptfs.remove: a valid file name, one trailing "\n" allowed.
absl::StatusOr<std::string> ParseCheckpointName(absl::string_view value);

// The value of user.ckptfs.remove: "NAME", or "NAME/INO/STATE" to remove it
// only while NAME is still checkpoint inode INO in STATE ("pending",
// "committed", "aborted", "removing"; '/' cannot occur in a name). One
// trailing "\n" allowed. EINVAL naming what is wrong otherwise.
struct CheckpointRemoval {
  std::string name;
  uint64_t expected_ino = 0;  // 0: whatever the entry is
  meta::CheckpointState expected_state = meta::CHECKPOINT_STATE_UNSPECIFIED;
};
// (CheckpointRemovalValue, common/checkpoint_info_text.h, writes one.)
absl::StatusOr<CheckpointRemoval> ParseCheckpointRemoval(absl::string_view value);

// The info line and list are formatted by common/checkpoint_info_text.h
// (FormatCheckpointInfo, FormatCheckpointList).

}  // namespace ckptfs::client

#endif  // CKPTFS_CLIENT_CHECKPOINT_XATTR_PARSING_H_
