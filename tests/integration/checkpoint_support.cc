// See checkpoint_support.h.
#include "tests/integration/checkpoint_support.h"

#include <dirent.h>
#include <signal.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/xattr.h>

#include <algorithm>
#include <cerrno>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "absl/time/clock.h"
#include "common/errno_status.h"
#include "tests/integration/posix_io.h"

#ifndef CKPTFS_PYTHON_DIR
#error "CKPTFS_PYTHON_DIR (python/) must be defined by the build"
#endif
#ifndef CKPTFS_RANK_SCRIPT
#error "CKPTFS_RANK_SCRIPT (checkpoint_rank.py) must be defined by the build"
#endif

namespace ckptfs::testing {
namespace {

constexpr char kPython[] = "/usr/bin/python3";

std::string ReadAll(const std::string& path) {
  std::ifstream in(path);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

// The value of `key=` in a RESULT line ("" if absent); message= is last.
std::string Field(absl::string_view line, absl::string_view key) {
  for (absl::string_view word : absl::StrSplit(line, ' ')) {
    if (absl::StartsWith(word, absl::StrCat(key, "="))) {
      return std::string(word.substr(key.size() + 1));
    }
  }
  return "";
}

}  // namespace

bool RankProcess::Ready() const { return absl::StrContains(child_->LogTail(1 << 20), "READY\n"); }

bool RankProcess::WaitReady(absl::Duration timeout) {
  return WaitFor([&] { return Ready() || !child_->Running(); }, timeout) && Ready();
}

RankResult RankProcess::Wait(absl::Duration timeout) {
  RankResult r;
  std::optional<int> status = child_->Wait(timeout);
  r.log = child_->LogTail(1 << 20);
  if (!status.has_value()) return r;
  r.finished = true;
  r.exit_status = WIFEXITED(*status) ? WEXITSTATUS(*status) : -1;
  for (absl::string_view line : absl::StrSplit(r.log, '\n')) {
    if (!absl::StartsWith(line, "RESULT ")) continue;
    const absl::string_view rest = line.substr(7);
    r.result = std::string(rest.substr(0, rest.find(' ')));
    r.errname = Field(rest, "errno");
    r.state = Field(rest, "state");
  }
  return r;
}

void RankProcess::Kill() { child_->Stop(SIGKILL, absl::Seconds(10)); }

std::unique_ptr<SyscallTrace> SyscallTrace::Attach(pid_t pid, const std::string& syscalls,
                                                   const std::string& dir, std::string* why) {
  constexpr char kStrace[] = "/usr/bin/strace";
  if (::access(kStrace, X_OK) != 0) {
    *why = "no /usr/bin/strace (scripts/install-deps.sh installs it)";
    return nullptr;
  }
  const std::string out = absl::StrCat(dir, "/strace-", pid, ".out");
  const std::string log = absl::StrCat(dir, "/strace-", pid, ".log");
  auto child = ChildProcess::Start(
      {kStrace, "-f", "-e", "trace=" + syscalls, "-o", out, "-p", absl::StrCat(pid)}, log);
  if (!child.ok()) {
    *why = std::string(child.status().message());
    return nullptr;
  }
  ChildProcess* strace = child->get();
  // "Process N attached with T threads" once all of them are traced (one
  // "Process N attached" for a single thread).
  auto attached = [&] { return strace->LogTail(1 << 20).find(" attached") != std::string::npos; };
  if (!WaitFor([&] { return attached() || !strace->Running(); }, absl::Seconds(20)) ||
      !attached()) {
    *why = absl::StrCat("strace did not attach to ", pid, ": ", strace->LogTail());
    return nullptr;
  }
  return std::unique_ptr<SyscallTrace>(new SyscallTrace(*std::move(child), out));
}

int SyscallTrace::StopAndCount(const std::string& name) {
  strace_->Stop(SIGINT, absl::Seconds(10));
  const std::string text = ReadAll(out_);
  int count = 0;
  for (absl::string_view line : absl::StrSplit(text, '\n')) {
    // "1234  syncfs(5) = 0", or "<... syncfs resumed>) = 0" for a call
    // interrupted by another thread's line (counted once, at its start).
    if (absl::StrContains(line, absl::StrCat(" ", name, "(")) ||
        absl::StartsWith(line, absl::StrCat(name, "("))) {
      ++count;
    }
  }
  return count;
}

bool BlockedInCommit(pid_t pid) {
  std::string text = ReadAll(absl::StrCat("/proc/", pid, "/syscall"));
  return absl::StartsWith(text, absl::StrCat(SYS_getxattr, " ")) ||
         absl::StartsWith(text, absl::StrCat(SYS_setxattr, " "));
}

bool WaitFor(const std::function<bool()>& done, absl::Duration timeout) {
  const absl::Time deadline = absl::Now() + timeout;
  while (!done()) {
    if (absl::Now() > deadline) return false;
    absl::SleepFor(absl::Milliseconds(20));
  }
  return true;
}

namespace {

std::string XattrOrErrno(const std::string& path, const char* name) {
  absl::StatusOr<std::string> value = tools::ReadXattr(path, name);
  if (value.ok()) return *value;
  const int err = ErrnoFromStatus(value.status());
  if (err == ENODATA) return "";
  const char* errname = ::strerrorname_np(err);
  return absl::StrCat("errno ", errname != nullptr ? errname : absl::StrCat(err));
}

}  // namespace

std::string StateOf(const std::string& dir) { return XattrOrErrno(dir, kStateXattr); }

std::string LatestOf(const std::string& dir) { return XattrOrErrno(dir, kLatestXattr); }

std::optional<meta::CheckpointInfo> InfoOf(const std::string& dir) {
  absl::StatusOr<std::string> text = tools::ReadXattr(dir, kInfoXattr);
  if (!text.ok()) return std::nullopt;
  absl::StatusOr<meta::CheckpointInfo> info = ParseCheckpointInfo(*text);
  if (!info.ok()) {
    ADD_FAILURE() << "unparsable user.ckptfs.info of " << dir << ": " << info.status();
    return std::nullopt;
  }
  return *info;
}

int SetXattrErrno(const std::string& path, const char* name, const std::string& value) {
  return ::setxattr(path.c_str(), name, value.data(), value.size(), 0) == 0 ? 0 : errno;
}

int GetXattrErrno(const std::string& path, const std::string& name) {
  char value[256];
  return ::getxattr(path.c_str(), name.c_str(), value, sizeof(value)) >= 0 ? 0 : errno;
}

std::vector<std::string> ListNames(const std::string& dir) {
  std::vector<std::string> names;
  DIR* d = ::opendir(dir.c_str());
  if (d == nullptr) return names;
  while (struct dirent* e = ::readdir(d)) {
    const std::string name = e->d_name;
    if (name != "." && name != "..") names.push_back(name);
  }
  ::closedir(d);
  std::sort(names.begin(), names.end());
  return names;
}

uint64_t InoOf(const std::string& path) {
  struct stat st {};
  return ::lstat(path.c_str(), &st) == 0 ? st.st_ino : 0;
}

int ChunkFilesOf(const LocalCluster& cluster, uint64_t ino) {
  int count = 0;
  for (int i = 0; i < cluster.storage_servers(); ++i) {
    const std::string dir = absl::StrCat(cluster.storage_dir(i), "/chunks/", ino);
    for (const std::string& name : ListNames(dir)) {
      (void)name;
      ++count;
    }
  }
  return count;
}

uint64_t StorageDiskBytes(const LocalCluster& cluster) {
  uint64_t bytes = 0;
  for (int i = 0; i < cluster.storage_servers(); ++i) {
    std::error_code ec;
    const std::string chunks = cluster.storage_dir(i) + "/chunks";
    for (auto it = std::filesystem::recursive_directory_iterator(chunks, ec);
         !ec && it != std::filesystem::recursive_directory_iterator(); it.increment(ec)) {
      struct stat st {};
      if (::lstat(it->path().c_str(), &st) == 0 && S_ISREG(st.st_mode)) {
        bytes += static_cast<uint64_t>(st.st_blocks) * 512;
      }
    }
  }
  return bytes;
}

absl::Status CommitFiles(const std::string& dir, const CheckpointFiles& files) {
  if (::mkdir(dir.c_str(), 0755) != 0) return ErrnoStatus(errno, "mkdir " + dir);
  if (absl::Status declared = tools::WriteXattr(dir, kRanksXattr, "1"); !declared.ok()) {
    return declared;
  }
  for (const auto& [name, data] : files) {
    const size_t slash = name.rfind('/');
    if (slash != std::string::npos) {
      const std::string sub = absl::StrCat(dir, "/", name.substr(0, slash));
      if (::mkdir(sub.c_str(), 0755) != 0 && errno != EEXIST) {
        return ErrnoStatus(errno, "mkdir " + sub);
      }
    }
    if (absl::Status written = WriteWholeFile(absl::StrCat(dir, "/", name), data); !written.ok()) {
      return written;
    }
  }
  return tools::CommitRank(dir, 0);
}

void CheckpointTest::SetUp() {
  if (::access(kPython, X_OK) != 0) GTEST_SKIP() << "no " << kPython;
  ::setenv("PYTHONPATH", CKPTFS_PYTHON_DIR, 1);
  ::setenv("PYTHONDONTWRITEBYTECODE", "1", 1);
  LocalClusterOptions options;
  options.storage_servers = kStorageServers;
  options.meta_flags = {"--reclaim_interval_s=1", "--default_chunk_size=1048576"};
  options.meta_flags.insert(options.meta_flags.end(), extra_meta_flags_.begin(),
                            extra_meta_flags_.end());
  options.storage_disk_mib = storage_disk_mib_;
  auto cluster = LocalCluster::Start(options);
  ASSERT_TRUE(cluster.ok()) << cluster.status();
  cluster_ = *std::move(cluster);
  auto mnt = cluster_->Mount("mnt");
  ASSERT_TRUE(mnt.ok()) << mnt.status() << "\n" << cluster_->DescribeLogs();
  mnt_ = *mnt;
  ASSERT_EQ(::mkdir(RunDir().c_str(), 0755), 0) << strerror(errno);
}

void CheckpointTest::TearDown() {
  if (HasFailure() && cluster_) std::cerr << Logs();
  cluster_.reset();
}

std::unique_ptr<RankProcess> CheckpointTest::StartRank(const std::vector<std::string>& args) {
  std::vector<std::string> argv = {kPython, CKPTFS_RANK_SCRIPT};
  argv.insert(argv.end(), args.begin(), args.end());
  const std::string log = absl::StrCat(cluster_->root(), "/rank-", ranks_started_++, ".log");
  rank_logs_.push_back(log);
  auto child = ChildProcess::Start(argv, log);
  EXPECT_TRUE(child.ok()) << child.status();
  if (!child.ok()) return nullptr;
  return std::make_unique<RankProcess>(*std::move(child));
}

std::unique_ptr<RankProcess> CheckpointTest::StartSave(const std::string& dir, int rank,
                                                       const std::vector<std::string>& extra) {
  std::vector<std::string> args = {"save", dir, absl::StrCat(rank)};
  args.insert(args.end(), extra.begin(), extra.end());
  return StartRank(args);
}

std::string CheckpointTest::Verify(const std::string& dir, const std::vector<std::string>& extra) {
  std::vector<std::string> args = {"verify", dir};
  args.insert(args.end(), extra.begin(), extra.end());
  std::unique_ptr<RankProcess> p = StartRank(args);
  if (p == nullptr) return "";
  return p->Wait().log;
}

std::string CheckpointTest::CallModule(const std::vector<std::string>& func_and_args) {
  std::vector<std::string> args = {"call"};
  args.insert(args.end(), func_and_args.begin(), func_and_args.end());
  std::unique_ptr<RankProcess> p = StartRank(args);
  if (p == nullptr) return "";
  return p->Wait().log;
}

bool CheckpointTest::SaveCheckpoint(const std::string& dir, int ranks,
                                    const std::vector<std::string>& extra) {
  std::vector<std::unique_ptr<RankProcess>> procs;
  for (int r = 0; r < ranks; ++r) {
    std::vector<std::string> args = {"--declare", absl::StrCat(ranks)};
    args.insert(args.end(), extra.begin(), extra.end());
    procs.push_back(StartSave(dir, r, args));
    if (procs.back() == nullptr) return false;
  }
  bool all_ok = true;
  for (auto& p : procs) {
    RankResult r = p->Wait();
    EXPECT_EQ(r.result, "ok") << r.log;
    all_ok = all_ok && r.result == "ok";
  }
  return all_ok;
}

int CheckpointTest::Ckptfs(const std::string& args, std::string* output) {
  return RunShell(absl::StrCat(BinDir(), "/ckptfs ", args), output);
}

std::string CheckpointTest::Logs() {
  std::string out = cluster_->DescribeLogs();
  for (const std::string& log : rank_logs_) {
    std::string text = ReadAll(log);
    if (text.size() > 4096) text = text.substr(text.size() - 4096);
    absl::StrAppend(&out, "==> ", log, " <==\n", text, "\n");
  }
  return out;
}

}  // namespace ckptfs::testing
