// See state_dir.h.
#include "tools/state_dir.h"

#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "common/errno_status.h"

namespace ckptfs::tools {
namespace fs = std::filesystem;

std::string AbsolutePath(const std::string& path) {
  std::error_code ec;
  fs::path p = fs::weakly_canonical(fs::absolute(path, ec), ec);
  if (ec) p = fs::absolute(path, ec).lexically_normal();
  std::string out = p.string();
  while (out.size() > 1 && out.back() == '/') out.pop_back();
  return out;
}

std::string SerializeClusterState(const ClusterState& state) {
  std::string out = "# ckptfs local cluster: written by `ckptfs up`, read by `ckptfs down`.\n";
  absl::StrAppend(&out, "meta_address=", state.meta_address, "\n");
  absl::StrAppend(&out, "mountpoint=", state.mountpoint, "\n");
  absl::StrAppend(&out, "daemons=", state.daemons.size(), "\n");
  for (size_t i = 0; i < state.daemons.size(); ++i) {
    const DaemonRecord& d = state.daemons[i];
    const std::string prefix = absl::StrCat("daemon.", i, ".");
    absl::StrAppend(&out, prefix, "role=", d.role, "\n");
    absl::StrAppend(&out, prefix, "address=", d.address, "\n");
    absl::StrAppend(&out, prefix, "pid=", d.process.pid, "\n");
    absl::StrAppend(&out, prefix, "start_time=", d.process.start_time, "\n");
    absl::StrAppend(&out, prefix, "exe=", d.process.exe, "\n");
    absl::StrAppend(&out, prefix, "data_dir=", d.data_dir, "\n");
    absl::StrAppend(&out, prefix, "log=", d.log_path, "\n");
    if (!d.metrics_address.empty()) {
      absl::StrAppend(&out, prefix, "metrics=", d.metrics_address, "\n");
    }
  }
  return out;
}

absl::StatusOr<ClusterState> ParseClusterState(absl::string_view text) {
  std::map<std::string, std::string> kv;
  int line_no = 0;
  for (absl::string_view line : absl::StrSplit(text, '\n')) {
    ++line_no;
    if (line.empty() || line[0] == '#') continue;
    const size_t eq = line.find('=');
    if (eq == absl::string_view::npos) {
      return absl::DataLossError(
          absl::StrCat("cluster.state line ", line_no, ": no '=' in \"", line, "\""));
    }
    kv[std::string(line.substr(0, eq))] = std::string(line.substr(eq + 1));
  }
  ClusterState state;
  state.meta_address = kv["meta_address"];
  state.mountpoint = kv["mountpoint"];
  size_t count = 0;
  if (!absl::SimpleAtoi(kv["daemons"], &count) || count > 10000) {
    return absl::DataLossError("cluster.state: bad or missing daemons=");
  }
  for (size_t i = 0; i < count; ++i) {
    const std::string prefix = absl::StrCat("daemon.", i, ".");
    DaemonRecord d;
    d.role = kv[prefix + "role"];
    d.address = kv[prefix + "address"];
    d.data_dir = kv[prefix + "data_dir"];
    d.log_path = kv[prefix + "log"];
    d.metrics_address = kv[prefix + "metrics"];
    d.process.exe = kv[prefix + "exe"];
    if (d.role.empty() || !absl::SimpleAtoi(kv[prefix + "pid"], &d.process.pid) ||
        !absl::SimpleAtoi(kv[prefix + "start_time"], &d.process.start_time)) {
      return absl::DataLossError(absl::StrCat("cluster.state: daemon ", i, " is incomplete"));
    }
    state.daemons.push_back(std::move(d));
  }
  return state;
}

absl::StatusOr<StateDir> StateDir::Open(const std::string& path, bool create) {
  StateDir dir(AbsolutePath(path));
  if (create) {
    for (const std::string& sub : {dir.path_, dir.MetaDir(), dir.path_ + "/logs"}) {
      std::error_code ec;
      fs::create_directories(sub, ec);
      if (ec) return SyscallError(ec.value(), absl::StrCat("create directory ", sub));
    }
    // It holds the cluster's credential: a directory another user owns or
    // may write to would let them replace it.
    struct stat st {};
    if (::stat(dir.path_.c_str(), &st) != 0) {
      return SyscallError(errno, absl::StrCat("state directory ", dir.path_));
    }
    if (st.st_uid != ::geteuid() || (st.st_mode & (S_IWGRP | S_IWOTH)) != 0) {
      return ErrnoStatus(EACCES,
                         absl::StrFormat("state directory %s belongs to uid %u with mode %04o: it "
                                         "holds the cluster's credential, so it must be yours "
                                         "and writable by you only (chmod go-w, or choose "
                                         "another --state-dir)",
                                         dir.path_, st.st_uid, st.st_mode & 07777));
    }
  }
  return dir;
}

std::string StateDir::StorageDir(int index) const {
  return absl::StrCat(path_, "/storage-", index);
}

std::string StateDir::LogPath(absl::string_view role) const {
  return absl::StrCat(path_, "/logs/", role, ".log");
}

absl::Status StateDir::Lock() {
  const std::string lock_path = path_ + "/.lock";
  UniqueFd fd(::open(lock_path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644));
  if (!fd.valid()) return SyscallError(errno, absl::StrCat("open ", lock_path));
  if (::flock(fd.get(), LOCK_EX | LOCK_NB) != 0) {
    if (errno == EWOULDBLOCK) {
      return absl::FailedPreconditionError(
          absl::StrCat("another `ckptfs up` or `ckptfs down` is working on ", path_));
    }
    return SyscallError(errno, absl::StrCat("flock ", lock_path));
  }
  lock_fd_ = std::move(fd);
  return absl::OkStatus();
}

absl::StatusOr<std::optional<ClusterState>> StateDir::Load() const {
  if (::access(StateFile().c_str(), F_OK) != 0) {
    if (errno == ENOENT) return std::optional<ClusterState>();
    return SyscallError(errno, absl::StrCat("access ", StateFile()));
  }
  std::ifstream in(StateFile());
  if (!in) return absl::UnavailableError(absl::StrCat("cannot read ", StateFile()));
  std::stringstream text;
  text << in.rdbuf();
  absl::StatusOr<ClusterState> state = ParseClusterState(text.str());
  if (!state.ok()) {
    return absl::DataLossError(absl::StrCat(StateFile(), ": ", state.status().message()));
  }
  return std::optional<ClusterState>(std::move(*state));
}

absl::Status StateDir::Save(const ClusterState& state) const {
  const std::string tmp = StateFile() + ".tmp";
  const std::string text = SerializeClusterState(state);
  UniqueFd fd(::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644));
  if (!fd.valid()) return SyscallError(errno, absl::StrCat("create ", tmp));
  size_t done = 0;
  while (done < text.size()) {
    const ssize_t n = ::write(fd.get(), text.data() + done, text.size() - done);
    if (n < 0) {
      if (errno == EINTR) continue;
      return SyscallError(errno, absl::StrCat("write ", tmp));
    }
    done += static_cast<size_t>(n);
  }
  if (::fsync(fd.get()) != 0) return SyscallError(errno, absl::StrCat("fsync ", tmp));
  fd.Reset();
  if (::rename(tmp.c_str(), StateFile().c_str()) != 0) {
    return SyscallError(errno, absl::StrCat("rename ", tmp));
  }
  return absl::OkStatus();
}

absl::Status StateDir::Remove() const {
  if (::unlink(StateFile().c_str()) != 0 && errno != ENOENT) {
    return SyscallError(errno, absl::StrCat("remove ", StateFile()));
  }
  return absl::OkStatus();
}

}  // namespace ckptfs::tools
