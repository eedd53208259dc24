// FileSystem: the storage server's seam over the operating system's file
// calls — every call of ChunkStore's that creates, names, removes or makes
// durable a file or directory, and the few lookups around them.
//
// FileSystem::Default() is the real one: each method is the syscall(s) it
// names, nothing more (no extra syscalls, no copies), so the hot path costs
// what it did before the seam. Tests pass another implementation to
// ChunkStore::Open, e.g. testing/fault_injection_file_system.h, which models
// what a power loss keeps.
//
// Data moves through the caller's io_uring Ring on the fds Open() returns,
// not through this interface: an implementation that models durability
// learns a file's contents when it is synced (SyncFiles, SyncFileSystem), by
// reading the file then.
//
// Errors: absl::Status with the errno attached (common/errno_status.h) and a
// message naming the call and path, e.g. "rename /d/tmp/1.0.7 to
// /d/chunks/1/0: No such file or directory".
//
// Thread-safety: implementations must allow every method from any thread at
// once. The default one is stateless and lives for the whole process.
#ifndef CKPTFS_SERVER_STORAGE_FILE_SYSTEM_H_
#define CKPTFS_SERVER_STORAGE_FILE_SYSTEM_H_

#include <sys/stat.h>
#include <sys/statvfs.h>
#include <sys/types.h>

#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "common/unique_fd.h"
#include "common/uring.h"

namespace ckptfs::storage {

class FileSystem {
 public:
  // The real file system (syscalls). Never destroyed.
  static FileSystem& Default();

  virtual ~FileSystem() = default;

  // open(2) with O_CLOEXEC added; `mode` applies with O_CREAT.
  virtual absl::StatusOr<UniqueFd> Open(const std::string& path, int flags, mode_t mode = 0644) = 0;
  // rename(2): atomically replaces `to` if it exists.
  virtual absl::Status Rename(const std::string& from, const std::string& to) = 0;
  // unlink(2).
  virtual absl::Status Unlink(const std::string& path) = 0;
  // mkdir(2) with mode 0700: chunk data is for the server's user alone (and
  // a mount on the same node running as that user: local reads). EEXIST
  // when `path` exists.
  virtual absl::Status MakeDir(const std::string& path) = 0;
  // rmdir(2). ENOTEMPTY while it holds anything.
  virtual absl::Status RemoveDir(const std::string& path) = 0;
  // The names in directory `path`, except "." and "..", in no order.
  virtual absl::StatusOr<std::vector<std::string>> ListDir(const std::string& path) = 0;
  // stat(2).
  virtual absl::StatusOr<struct stat> Stat(const std::string& path) = 0;
  // statvfs(3) of the file system holding `path`.
  virtual absl::StatusOr<struct statvfs> StatFileSystem(const std::string& path) = 0;

  // Makes the data of each file in `paths` durable (fdatasync), opening
  // them and syncing them in batches through `ring`. A path that no longer
  // exists (ENOENT at open) is skipped. Does not make the names durable:
  // that is SyncDir of the directories holding them. Returns the first
  // error, naming its path.
  virtual absl::Status SyncFiles(Ring& ring, absl::Span<const std::string> paths) = 0;
  // Makes directory `path`'s entries durable (fsync of the directory,
  // through `ring`): the names created, renamed in and removed there. Not
  // its parent's entry for it. ENOENT when it does not exist.
  virtual absl::Status SyncDir(Ring& ring, const std::string& path) = 0;
  // Makes everything on the file system holding `path` durable: every
  // file's data and every directory's entries (syncfs(2)). Blocks for the
  // whole writeback.
  virtual absl::Status SyncFileSystem(const std::string& path) = 0;
};

}  // namespace ckptfs::storage

#endif  // CKPTFS_SERVER_STORAGE_FILE_SYSTEM_H_
