// See file_system.h. The real file system: each method is its syscalls.
#include "server/storage/file_system.h"

#include <dirent.h>
#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>

#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"
#include "common/errno_status.h"

namespace ckptfs::storage {
namespace {

// Files opened at once by SyncFiles (bounded so fds stay well under limits).
constexpr size_t kSyncBatch = 64;

class RealFileSystem final : public FileSystem {
 public:
  absl::StatusOr<UniqueFd> Open(const std::string& path, int flags, mode_t mode) override {
    const int fd = ::open(path.c_str(), flags | O_CLOEXEC, mode);
    if (fd < 0) return SyscallError(errno, absl::StrCat("open ", path));
    return UniqueFd(fd);
  }

  absl::Status Rename(const std::string& from, const std::string& to) override {
    if (::rename(from.c_str(), to.c_str()) != 0) {
      return SyscallError(errno, absl::StrCat("rename ", from, " to ", to));
    }
    return absl::OkStatus();
  }

  absl::Status Unlink(const std::string& path) override {
    if (::unlink(path.c_str()) != 0) return SyscallError(errno, absl::StrCat("unlink ", path));
    return absl::OkStatus();
  }

  absl::Status MakeDir(const std::string& path) override {
    if (::mkdir(path.c_str(), 0700) != 0) {
      return SyscallError(errno, absl::StrCat("mkdir ", path));
    }
    return absl::OkStatus();
  }

  absl::Status RemoveDir(const std::string& path) override {
    if (::rmdir(path.c_str()) != 0) return SyscallError(errno, absl::StrCat("rmdir ", path));
    return absl::OkStatus();
  }

  absl::StatusOr<std::vector<std::string>> ListDir(const std::string& path) override {
    DIR* dir = ::opendir(path.c_str());
    if (dir == nullptr) return SyscallError(errno, absl::StrCat("opendir ", path));
    std::vector<std::string> names;
    errno = 0;
    while (dirent* entry = ::readdir(dir)) {
      const absl::string_view name(entry->d_name);
      if (name != "." && name != "..") names.emplace_back(name);
    }
    const int err = errno;
    ::closedir(dir);
    if (err != 0) return SyscallError(err, absl::StrCat("readdir ", path));
    return names;
  }

  absl::StatusOr<struct stat> Stat(const std::string& path) override {
    struct stat st {};
    if (::stat(path.c_str(), &st) != 0) return SyscallError(errno, absl::StrCat("stat ", path));
    return st;
  }

  absl::StatusOr<struct statvfs> StatFileSystem(const std::string& path) override {
    struct statvfs vfs {};
    if (::statvfs(path.c_str(), &vfs) != 0) {
      return SyscallError(errno, absl::StrCat("statvfs ", path));
    }
    return vfs;
  }

  absl::Status SyncFiles(Ring& ring, absl::Span<const std::string> paths) override {
    for (size_t first = 0; first < paths.size(); first += kSyncBatch) {
      std::vector<UniqueFd> files;
      std::vector<Ring::Op> ops;
      std::vector<const std::string*> synced;
      for (size_t i = first; i < std::min(paths.size(), first + kSyncBatch); ++i) {
        UniqueFd fd(::open(paths[i].c_str(), O_RDONLY | O_CLOEXEC));
        if (!fd.valid()) {
          if (errno == ENOENT) continue;  // removed meanwhile: nothing to sync
          return SyscallError(errno, absl::StrCat("open ", paths[i], " to sync"));
        }
        ops.push_back({Ring::OpKind::kFdatasync, fd.get(), nullptr, 0, 0, 0});
        files.push_back(std::move(fd));
        synced.push_back(&paths[i]);
      }
      if (absl::Status s = ring.Run(ops); !s.ok()) return s;
      for (size_t i = 0; i < ops.size(); ++i) {
        if (ops[i].result < 0) {
          return SyscallError(static_cast<int>(-ops[i].result),
                              absl::StrCat("fdatasync ", *synced[i]));
        }
      }
    }
    return absl::OkStatus();
  }

  absl::Status SyncDir(Ring& ring, const std::string& path) override {
    UniqueFd fd(::open(path.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC));
    if (!fd.valid()) return SyscallError(errno, absl::StrCat("open ", path, " to sync"));
    if (absl::Status s = ring.Fdatasync(fd.get()); !s.ok()) {
      return ErrnoStatus(ErrnoFromStatus(s), absl::StrCat("fsync ", path, ": ", s.message()));
    }
    return absl::OkStatus();
  }

  absl::Status SyncFileSystem(const std::string& path) override {
    UniqueFd fd(::open(path.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC));
    if (!fd.valid()) return SyscallError(errno, absl::StrCat("open ", path, " to sync"));
    if (::syncfs(fd.get()) != 0) return SyscallError(errno, absl::StrCat("syncfs ", path));
    return absl::OkStatus();
  }
};

}  // namespace

FileSystem& FileSystem::Default() {
  static FileSystem* const real = new RealFileSystem();
  return *real;
}

}  // namespace ckptfs::storage
