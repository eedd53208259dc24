// RankIo: the file operations one benchmark rank performs, against one
// target. Two targets: a mounted directory through POSIX calls (any
// filesystem: ckptfs, a local disk, NFS, another FUSE mount), and libckptfs
// directly (--native, where thousands of ranks are threads of one process
// sharing one Client).
//
// Paths are relative to the target's root (no leading '/'). Handles are
// small integers owned by the RankIo that returned them; each is closed
// exactly once with Close. Errors are absl::Status carrying the errno
// (common/errno_status.h) and a message naming the path.
//
// Thread-safety: a RankIo is used by one rank (one thread) at a time;
// separate RankIo objects may share a Client (native) concurrently.
#ifndef CKPTFS_BENCH_RANK_IO_H_
#define CKPTFS_BENCH_RANK_IO_H_

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace ckptfs::client {
class Client;
}

namespace ckptfs::bench {

// A failed status that says the path no longer exists: ENOENT, or ESTALE
// (a directory on it was removed while the operation ran, which a remove of
// a whole tree by several ranks at once causes).
bool IsGone(const absl::Status& status);

class RankIo {
 public:
  virtual ~RankIo() = default;

  // Creates or truncates `path` for writing (O_WRONLY|O_CREAT|O_TRUNC, 0644).
  virtual absl::StatusOr<int> Create(absl::string_view path) = 0;
  virtual absl::StatusOr<int> OpenRead(absl::string_view path) = 0;
  // Writes all `size` bytes at the handle's position (short writes retried).
  virtual absl::Status Write(int handle, const void* data, size_t size) = 0;
  // Reads up to `size` bytes at the handle's position; 0 at end of file.
  virtual absl::StatusOr<size_t> Read(int handle, void* data, size_t size) = 0;
  virtual absl::Status Fsync(int handle) = 0;
  virtual absl::Status Close(int handle) = 0;
  // rename(2): atomically replaces `to`.
  virtual absl::Status Rename(absl::string_view from, absl::string_view to) = 0;
  // NotFound (ENOENT) when `path` does not exist.
  virtual absl::Status Unlink(absl::string_view path) = 0;
  // mkdir -p.
  virtual absl::Status MakeDirs(absl::string_view path) = 0;
  // Removes `path` and everything under it; OK if it does not exist.
  virtual absl::Status RemoveTree(absl::string_view path) = 0;
  // setxattr/getxattr on a path (the ckptfs commit barrier speaks xattrs).
  // A setxattr may block (a checkpoint commit waits for every rank).
  virtual absl::Status SetXattr(absl::string_view path, absl::string_view name,
                                absl::string_view value) = 0;
  virtual absl::StatusOr<std::string> GetXattr(absl::string_view path, absl::string_view name) = 0;
};

// POSIX calls under `root`, an existing directory.
std::unique_ptr<RankIo> MakePosixRankIo(std::string root);

// libckptfs calls under `root` (a path inside the filesystem, "" or "/" for
// its root). `client` is borrowed, shared and must outlive the RankIo.
std::unique_ptr<RankIo> MakeNativeRankIo(client::Client* client, std::string root);

}  // namespace ckptfs::bench

#endif  // CKPTFS_BENCH_RANK_IO_H_
