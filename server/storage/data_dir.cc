// See data_dir.h.
#include "server/storage/data_dir.h"

#include <fcntl.h>
#include <sys/file.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <string>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "common/credential.h"
#include "common/errno_status.h"
#include "common/log.h"

namespace ckptfs::storage {

absl::Status CreateDirectories(const std::string& path) {
  if (path.empty()) return ErrnoStatus(EINVAL, "empty directory path");
  for (size_t slash = path.find('/', 1);; slash = path.find('/', slash + 1)) {
    const std::string prefix = path.substr(0, slash);
    if (::mkdir(prefix.c_str(), 0755) != 0 && errno != EEXIST) {
      return SyscallError(errno, absl::StrCat("mkdir ", prefix));
    }
    if (slash == std::string::npos) break;
  }
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0) return SyscallError(errno, absl::StrCat("stat ", path));
  if (!S_ISDIR(st.st_mode)) return ErrnoStatus(ENOTDIR, absl::StrCat(path, " is not a directory"));
  return absl::OkStatus();
}

namespace {

// Takes the group's and others' write permission off the data directory,
// so that no other user can replace its LOCK file or add files to it.
absl::Status KeepOthersFromWriting(const std::string& data_dir) {
  struct stat st {};
  if (::stat(data_dir.c_str(), &st) != 0) return SyscallError(errno, "stat " + data_dir);
  if ((st.st_mode & 022) == 0) return absl::OkStatus();
  const mode_t mode = st.st_mode & 07755;
  if (::chmod(data_dir.c_str(), mode) != 0) {
    const int err = errno;
    return ErrnoStatus(err, absl::StrFormat("data directory %s is writable by other users (mode "
                                            "%04o) and cannot be changed (%s): make it 0755 or "
                                            "stricter, owned by the user that runs ckptfs-storage",
                                            data_dir, st.st_mode & 07777, std::strerror(err)));
  }
  CKPTFS_LOG(kWarning) << "data directory " << data_dir << " was writable by other users: mode "
                       << absl::StrFormat("%04o -> %04o", st.st_mode & 07777, mode);
  return absl::OkStatus();
}

// Opens (creating) the LOCK file as this user's alone (0600): another user
// who could open it could hold a lock on it, keeping the server from
// starting or making a dead server look alive to the clients that probe
// it. A LOCK another user owns (left from when the directory was open to
// others), or a symbolic link, is replaced, unless a process holds it: it
// may be a server of this directory running as that user, so EBUSY then.
absl::StatusOr<UniqueFd> OpenPrivateLockFile(const std::string& path) {
  constexpr int kFlags = O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW;
  UniqueFd fd(::open(path.c_str(), kFlags, 0600));
  if (!fd.valid() && errno != ELOOP) return SyscallError(errno, absl::StrCat("open ", path));
  struct stat st {};
  if (!fd.valid() || ::fstat(fd.get(), &st) != 0 || st.st_uid != ::geteuid()) {
    if (fd.valid() && ::flock(fd.get(), LOCK_EX | LOCK_NB) != 0) {
      if (errno != EWOULDBLOCK) return SyscallError(errno, absl::StrCat("flock ", path));
      return ErrnoStatus(
          EBUSY, absl::StrFormat("%s belongs to user %d and a running process holds it: another "
                                 "ckptfs-storage may use this data directory; stop it, or remove "
                                 "the file if none does",
                                 path, st.st_uid));
    }
    CKPTFS_LOG(kWarning) << path << " is not this user's own file: replacing it";
    fd = UniqueFd();
    if (::unlink(path.c_str()) != 0 && errno != ENOENT) {
      return SyscallError(errno, absl::StrCat("unlink ", path));
    }
    fd = UniqueFd(::open(path.c_str(), kFlags | O_EXCL, 0600));
    if (!fd.valid()) return SyscallError(errno, absl::StrCat("open ", path));
    return fd;
  }
  if ((st.st_mode & 077) != 0 && ::fchmod(fd.get(), 0600) != 0) {
    return SyscallError(errno, absl::StrCat("chmod 0600 ", path));
  }
  return fd;
}

}  // namespace

absl::StatusOr<DataDirLock> DataDirLock::Acquire(const std::string& data_dir) {
  if (absl::Status s = KeepOthersFromWriting(data_dir); !s.ok()) return s;
  const std::string path = absl::StrCat(data_dir, "/LOCK");
  absl::StatusOr<UniqueFd> opened = OpenPrivateLockFile(path);
  if (!opened.ok()) return opened.status();
  UniqueFd fd = *std::move(opened);
  if (::flock(fd.get(), LOCK_EX | LOCK_NB) != 0) {
    if (errno == EWOULDBLOCK) {
      char pid[32] = {};
      const ssize_t n = ::pread(fd.get(), pid, sizeof(pid) - 1, 0);
      const std::string holder =
          n > 0 ? absl::StrCat(" (pid ", absl::StripAsciiWhitespace(pid), ")") : "";
      return ErrnoStatus(
          EBUSY, absl::StrCat("data directory ", data_dir, " is in use by another ckptfs-storage",
                              holder, ": it holds ", path));
    }
    return SyscallError(errno, absl::StrCat("flock ", path));
  }
  // The running-lock clients on this host check before reading chunk
  // files in place (client/local_chunk_transport.h). Without it they only
  // read over TCP, so a file system that refuses it is no reason to stop.
  struct flock running {};
  running.l_type = F_RDLCK;
  running.l_whence = SEEK_SET;
  if (::fcntl(fd.get(), F_OFD_SETLK, &running) != 0) {
    CKPTFS_LOG(kWarning) << "cannot take the running-lock on " << path << " ("
                         << std::strerror(errno)
                         << "): clients on this host will read its chunks over TCP";
  }
  const std::string pid = absl::StrCat(::getpid(), "\n");
  if (::ftruncate(fd.get(), 0) == 0) {
    const ssize_t ignored = ::pwrite(fd.get(), pid.data(), pid.size(), 0);
    (void)ignored;  // the pid is only a hint for the message above
  }
  return DataDirLock(std::move(fd));
}

absl::StatusOr<std::string> LoadOrCreateServerUuid(const std::string& data_dir) {
  const std::string path = absl::StrCat(data_dir, "/server.uuid");
  if (FILE* f = std::fopen(path.c_str(), "re")) {
    char text[128] = {};
    const size_t n = std::fread(text, 1, sizeof(text) - 1, f);
    std::fclose(f);
    const std::string uuid(absl::StripAsciiWhitespace(absl::string_view(text, n)));
    if (uuid.size() != 36) {
      return ErrnoStatus(EIO, absl::StrCat(path, " does not hold a server UUID (\"", uuid,
                                           "\"); remove it only if this data directory "
                                           "is empty"));
    }
    return uuid;
  } else if (errno != ENOENT) {
    return SyscallError(errno, absl::StrCat("open ", path));
  }
  unsigned char b[16];
  if (::getrandom(b, sizeof(b), 0) != static_cast<ssize_t>(sizeof(b))) {
    return SyscallError(errno, "getrandom");
  }
  b[6] = static_cast<unsigned char>((b[6] & 0x0f) | 0x40);  // version 4
  b[8] = static_cast<unsigned char>((b[8] & 0x3f) | 0x80);  // RFC 4122 variant
  const std::string uuid = absl::StrFormat(
      "%02x%02x%02x%02x-%02x%02x-%02x%02x-%02x%02x-%02x%02x%02x%02x%02x%02x", b[0], b[1], b[2],
      b[3], b[4], b[5], b[6], b[7], b[8], b[9], b[10], b[11], b[12], b[13], b[14], b[15]);
  // Written aside, synced and renamed: the file exists complete or not at all.
  const std::string tmp = absl::StrCat(path, ".tmp");
  {
    UniqueFd fd(::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644));
    if (!fd.valid()) return SyscallError(errno, absl::StrCat("create ", tmp));
    const std::string line = uuid + "\n";
    if (::write(fd.get(), line.data(), line.size()) != static_cast<ssize_t>(line.size()) ||
        ::fsync(fd.get()) != 0) {
      return SyscallError(errno, absl::StrCat("write ", tmp));
    }
  }
  if (::rename(tmp.c_str(), path.c_str()) != 0) {
    return SyscallError(errno, absl::StrCat("rename ", tmp, " to ", path));
  }
  UniqueFd dir(::open(data_dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC));
  if (dir.valid()) ::fsync(dir.get());
  return uuid;
}

absl::StatusOr<std::string> LoadOrCreateServerSecret(const std::string& data_dir) {
  return LoadOrCreateCredential(absl::StrCat(data_dir, "/server.secret"));
}

}  // namespace ckptfs::storage
