// PosixRankIo (rank_io.h): plain system calls under a root directory. A
// handle is the file descriptor; the RankIo remembers each one's path for
// error messages and closes any left open when destroyed.
#include <dirent.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <sys/xattr.h>
#include <unistd.h>

#include <cerrno>
#include <string>
#include <utility>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "bench/rank_io.h"
#include "common/errno_status.h"

namespace ckptfs::bench {
namespace {

class PosixRankIo : public RankIo {
 public:
  explicit PosixRankIo(std::string root) : root_(std::move(root)) {
    while (root_.size() > 1 && root_.back() == '/') root_.pop_back();
  }

  ~PosixRankIo() override {
    for (const auto& [fd, path] : open_) ::close(fd);
  }

  absl::StatusOr<int> Create(absl::string_view path) override {
    return Open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, "create");
  }

  absl::StatusOr<int> OpenRead(absl::string_view path) override {
    return Open(path, O_RDONLY | O_CLOEXEC, "open");
  }

  absl::Status Write(int handle, const void* data, size_t size) override {
    const auto* p = static_cast<const char*>(data);
    while (size > 0) {
      const ssize_t n = ::write(handle, p, size);
      if (n < 0) {
        if (errno == EINTR) continue;
        return SyscallError(errno, absl::StrCat("write ", PathOf(handle)));
      }
      if (n == 0) return ErrnoStatus(EIO, absl::StrCat("write ", PathOf(handle), " wrote 0 bytes"));
      p += n;
      size -= static_cast<size_t>(n);
    }
    return absl::OkStatus();
  }

  absl::StatusOr<size_t> Read(int handle, void* data, size_t size) override {
    while (true) {
      const ssize_t n = ::read(handle, data, size);
      if (n >= 0) return static_cast<size_t>(n);
      if (errno != EINTR) return SyscallError(errno, absl::StrCat("read ", PathOf(handle)));
    }
  }

  absl::Status Fsync(int handle) override {
    if (::fsync(handle) != 0) return SyscallError(errno, absl::StrCat("fsync ", PathOf(handle)));
    return absl::OkStatus();
  }

  absl::Status Close(int handle) override {
    auto it = open_.find(handle);
    if (it == open_.end()) {
      return ErrnoStatus(EBADF, absl::StrCat("close of unknown handle ", handle));
    }
    const std::string path = std::move(it->second);
    open_.erase(it);
    // close(2) releases the descriptor even when it reports an error.
    if (::close(handle) != 0) return SyscallError(errno, absl::StrCat("close ", path));
    return absl::OkStatus();
  }

  absl::Status Rename(absl::string_view from, absl::string_view to) override {
    const std::string a = Full(from);
    const std::string b = Full(to);
    if (::rename(a.c_str(), b.c_str()) != 0) {
      return SyscallError(errno, absl::StrCat("rename ", a, " to ", b));
    }
    return absl::OkStatus();
  }

  absl::Status Unlink(absl::string_view path) override {
    const std::string full = Full(path);
    if (::unlink(full.c_str()) != 0) return SyscallError(errno, absl::StrCat("unlink ", full));
    return absl::OkStatus();
  }

  absl::Status MakeDirs(absl::string_view path) override {
    std::string full = root_;
    for (absl::string_view part : absl::StrSplit(path, '/', absl::SkipEmpty())) {
      absl::StrAppend(&full, "/", part);
      if (::mkdir(full.c_str(), 0755) == 0) continue;
      const int err = errno;
      struct stat st;
      if (err == EEXIST && ::stat(full.c_str(), &st) == 0 && S_ISDIR(st.st_mode)) continue;
      return SyscallError(err == EEXIST ? ENOTDIR : err, absl::StrCat("mkdir ", full));
    }
    return absl::OkStatus();
  }

  absl::Status RemoveTree(absl::string_view path) override {
    const std::string full = Full(path);
    struct stat st;
    if (::lstat(full.c_str(), &st) != 0) {
      if (errno == ENOENT) return absl::OkStatus();
      return SyscallError(errno, absl::StrCat("stat ", full));
    }
    return RemoveAt(full, S_ISDIR(st.st_mode));
  }

  absl::Status SetXattr(absl::string_view path, absl::string_view name,
                        absl::string_view value) override {
    const std::string full = Full(path);
    const std::string key(name);
    if (::setxattr(full.c_str(), key.c_str(), value.data(), value.size(), 0) != 0) {
      return SyscallError(errno, absl::StrCat("setxattr ", key, " on ", full));
    }
    return absl::OkStatus();
  }

  absl::StatusOr<std::string> GetXattr(absl::string_view path, absl::string_view name) override {
    const std::string full = Full(path);
    const std::string key(name);
    while (true) {
      const ssize_t size = ::getxattr(full.c_str(), key.c_str(), nullptr, 0);
      if (size < 0) return SyscallError(errno, absl::StrCat("getxattr ", key, " on ", full));
      std::string value(static_cast<size_t>(size), '\0');
      const ssize_t n = ::getxattr(full.c_str(), key.c_str(), value.data(), value.size());
      if (n >= 0) {
        value.resize(static_cast<size_t>(n));
        return value;
      }
      if (errno != ERANGE) return SyscallError(errno, absl::StrCat("getxattr ", key, " on ", full));
      // The value grew between the calls: ask again.
    }
  }

 private:
  std::string Full(absl::string_view path) const {
    while (!path.empty() && path.front() == '/') path.remove_prefix(1);
    if (path.empty()) return root_;
    return absl::StrCat(root_, "/", path);
  }

  std::string PathOf(int handle) const {
    auto it = open_.find(handle);
    return it == open_.end() ? absl::StrCat("handle ", handle) : it->second;
  }

  absl::StatusOr<int> Open(absl::string_view path, int flags, absl::string_view what) {
    std::string full = Full(path);
    const int fd = ::open(full.c_str(), flags, 0644);
    if (fd < 0) return SyscallError(errno, absl::StrCat(what, " ", full));
    open_.emplace(fd, std::move(full));
    return fd;
  }

  // Removes `full` (a directory when `is_dir`) and everything under it.
  absl::Status RemoveAt(const std::string& full, bool is_dir) {
    if (!is_dir) {
      if (::unlink(full.c_str()) != 0 && errno != ENOENT) {
        return SyscallError(errno, absl::StrCat("unlink ", full));
      }
      return absl::OkStatus();
    }
    DIR* dir = ::opendir(full.c_str());
    if (dir == nullptr) {
      if (errno == ENOENT) return absl::OkStatus();
      return SyscallError(errno, absl::StrCat("opendir ", full));
    }
    std::vector<std::pair<std::string, bool>> children;
    while (dirent* entry = ::readdir(dir)) {
      const absl::string_view name = entry->d_name;
      if (name == "." || name == "..") continue;
      bool child_is_dir = entry->d_type == DT_DIR;
      if (entry->d_type == DT_UNKNOWN) {
        struct stat st;
        const std::string child = absl::StrCat(full, "/", name);
        child_is_dir = ::lstat(child.c_str(), &st) == 0 && S_ISDIR(st.st_mode);
      }
      children.emplace_back(std::string(name), child_is_dir);
    }
    ::closedir(dir);
    for (const auto& [name, child_is_dir] : children) {
      absl::Status status = RemoveAt(absl::StrCat(full, "/", name), child_is_dir);
      if (!status.ok()) return status;
    }
    if (::rmdir(full.c_str()) != 0 && errno != ENOENT) {
      return SyscallError(errno, absl::StrCat("rmdir ", full));
    }
    return absl::OkStatus();
  }

  std::string root_;
  absl::flat_hash_map<int, std::string> open_;
};

}  // namespace

std::unique_ptr<RankIo> MakePosixRankIo(std::string root) {
  return std::make_unique<PosixRankIo>(std::move(root));
}

}  // namespace ckptfs::bench
