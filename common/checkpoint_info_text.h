// The text form of a checkpoint's description, as the mount serves it in
// user.ckptfs.info (one checkpoint) and user.ckptfs.checkpoints (one line
// per checkpoint): space-separated key=value, `reason` last and free text.
//
//   name=step_1000 state=committed ranks=8 arrived=8 files=9 bytes=123
//   declared_ms=.. first_commit_ms=.. ended_ms=.. timeout_s=600 errno=0 ino=42 reason=
//
// (ino: the checkpoint directory's inode, for CheckpointRemovalValue.) A
// checkpoint being removed (state=removing) also has removing_ms= before
// reason=: when its first name was removed.
//
// Names may hold any byte but '/' and NUL; the bytes that would break the
// line (space, tab, newline, '\\', '=') are escaped as \ooo, as /proc/mounts
// does. The client library formats; the tools and tests parse. Parsing is
// lenient where that keeps old readers working with newer services: unknown
// keys are ignored and absent numbers stay 0, but name= and state= are
// required and every number must be one.
//
// Thread-safety: pure functions.
#ifndef CKPTFS_COMMON_CHECKPOINT_INFO_TEXT_H_
#define CKPTFS_COMMON_CHECKPOINT_INFO_TEXT_H_

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "proto/meta.pb.h"

namespace ckptfs {

// "pending", "committed", "aborted", "removing"; "" for
// CHECKPOINT_STATE_UNSPECIFIED.
std::string CheckpointStateName(meta::CheckpointState state);

// The user.ckptfs.remove value "NAME/INO/STATE": remove checkpoint `name`
// only while it is still inode `ino` in `state` (client/checkpoint_xattr_parsing.h
// parses it).
std::string CheckpointRemovalValue(absl::string_view name, uint64_t ino,
                                   meta::CheckpointState state);

// One line, no newline (a newline in the reason becomes a space).
std::string FormatCheckpointInfo(const meta::CheckpointInfo& info);
// FormatCheckpointInfo of each checkpoint, by name, each line ending in "\n".
std::string FormatCheckpointList(const meta::ListCheckpointsReply& reply);

// One line as FormatCheckpointInfo writes it (a trailing newline allowed).
// EINVAL for a line without name= or a known state=, or with a bad number.
absl::StatusOr<meta::CheckpointInfo> ParseCheckpointInfo(absl::string_view line);
// Every non-blank line of `text`; an empty list for "".
absl::StatusOr<std::vector<meta::CheckpointInfo>> ParseCheckpointList(absl::string_view text);

}  // namespace ckptfs

#endif  // CKPTFS_COMMON_CHECKPOINT_INFO_TEXT_H_
