// See local_cluster.h.
#include "tests/integration/local_cluster.h"

#include <fcntl.h>
#include <grpcpp/grpcpp.h>
#include <signal.h>
#include <stdlib.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <iterator>
#include <random>
#include <set>
#include <sstream>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/clock.h"
#include "common/credential.h"
#include "common/errno_status.h"
#include "common/tcp.h"
#include "proto/meta.grpc.pb.h"

#ifndef CKPTFS_BIN_DIR
#error "CKPTFS_BIN_DIR must be defined by the build"
#endif

namespace ckptfs::testing {
namespace {

constexpr absl::Duration kStartTimeout = absl::Seconds(30);

absl::Status WaitUntil(absl::Duration timeout, const std::string& what,
                       const std::function<bool()>& done) {
  const absl::Time deadline = absl::Now() + timeout;
  while (!done()) {
    if (absl::Now() > deadline) {
      return absl::DeadlineExceededError(absl::StrCat("timed out waiting for ", what));
    }
    absl::SleepFor(absl::Milliseconds(20));
  }
  return absl::OkStatus();
}

// Unescapes the octal escapes (\040 for space) of /proc/self/mountinfo.
std::string UnescapeMountPath(const std::string& in) {
  std::string out;
  for (size_t i = 0; i < in.size(); ++i) {
    if (in[i] == '\\' && i + 3 < in.size()) {
      out += static_cast<char>(std::stoi(in.substr(i + 1, 3), nullptr, 8));
      i += 3;
    } else {
      out += in[i];
    }
  }
  return out;
}

int RunCommand(const std::vector<std::string>& argv) {
  const pid_t pid = ::fork();
  if (pid == 0) {
    std::vector<char*> args;
    for (const auto& a : argv) args.push_back(const_cast<char*>(a.c_str()));
    args.push_back(nullptr);
    const int null_fd = ::open("/dev/null", O_WRONLY);
    if (null_fd >= 0) {
      ::dup2(null_fd, STDOUT_FILENO);
      ::dup2(null_fd, STDERR_FILENO);
    }
    ::execvp(args[0], args.data());
    ::_exit(127);
  }
  int status = 0;
  ::waitpid(pid, &status, 0);
  return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

// The first port of the kernel's ephemeral range (32768 if unreadable).
uint16_t EphemeralPortsStart() {
  std::ifstream in("/proc/sys/net/ipv4/ip_local_port_range");
  int low = 0;
  if (!(in >> low) || low <= 0 || low > 65535) return 32768;
  return static_cast<uint16_t>(low);
}

}  // namespace

std::string BinDir() {
  if (const char* env = std::getenv("CKPTFS_BIN_DIR")) return env;
  return CKPTFS_BIN_DIR;
}

absl::StatusOr<uint16_t> PickFreePort() {
  // Ports are picked before the daemons bind them, seconds later for a
  // standby metadata server that binds only when it takes over. A port the
  // kernel offers for port 0 comes from the ephemeral range, which every
  // outgoing connection of every test running meanwhile draws from too (a
  // standby once found its port in use at takeover, most likely so). So
  // ports are drawn at random below that range, checked free by binding,
  // and never handed out twice by this process (a cluster's meta and a
  // storage server once got the same one).
  static absl::Mutex mu(absl::kConstInit);
  static std::set<uint16_t>* handed_out = new std::set<uint16_t>();
  const uint16_t below = EphemeralPortsStart();
  constexpr uint16_t kLowest = 10000;
  static std::mt19937* random = new std::mt19937(std::random_device{}());
  for (int attempt = 0; attempt < 1000; ++attempt) {
    uint16_t wanted = 0;  // the kernel's choice, when no range is left below
    if (below > kLowest + 1000) {
      absl::MutexLock lock(&mu);
      wanted =
          static_cast<uint16_t>(std::uniform_int_distribution<int>(kLowest, below - 1)(*random));
    }
    auto fd = ListenTcp(HostPort{"127.0.0.1", wanted});
    if (!fd.ok()) {
      if (wanted != 0) continue;  // in use: draw again
      return fd.status();
    }
    absl::StatusOr<uint16_t> port = LocalPort(fd->get());
    if (!port.ok()) return port.status();
    absl::MutexLock lock(&mu);
    if (handed_out->insert(*port).second) return *port;
  }
  return absl::ResourceExhaustedError("no free port that was not handed out already");
}

absl::StatusOr<std::string> MakeTempDir(const std::string& prefix) {
  const char* tmp = std::getenv("TMPDIR");
  std::string templ = absl::StrCat(tmp ? tmp : "/tmp", "/", prefix, "XXXXXX");
  if (::mkdtemp(templ.data()) == nullptr) return SyscallError(errno, "mkdtemp");
  return templ;
}

void RemoveTree(const std::string& path) {
  std::error_code ec;
  std::filesystem::remove_all(path, ec);
}

bool IsCkptfsMount(const std::string& path) {
  std::ifstream in("/proc/self/mountinfo");
  std::string line;
  while (std::getline(in, line)) {
    // id parent major:minor root mountpoint options ... - fstype source ...
    std::vector<std::string> fields = absl::StrSplit(line, ' ');
    if (fields.size() < 5) continue;
    if (UnescapeMountPath(fields[4]) != path) continue;
    for (size_t i = 5; i + 1 < fields.size(); ++i) {
      if (fields[i] == "-") return fields[i + 1] == "fuse.ckptfs";
    }
  }
  return false;
}

absl::StatusOr<std::unique_ptr<LocalCluster>> LocalCluster::Start(LocalClusterOptions options) {
  std::unique_ptr<LocalCluster> cluster(new LocalCluster(std::move(options)));
  auto root = MakeTempDir("ckptfs-it-");
  if (!root.ok()) return root.status();
  cluster->root_ = *root;
  if (cluster->options_.storage_disk_mib > 0) {
    const std::string disk = *root + "/disk";
    if (::mkdir(disk.c_str(), 0755) != 0) return SyscallError(errno, "mkdir " + disk);
    const std::string size = absl::StrCat("size=", cluster->options_.storage_disk_mib, "m");
    if (::mount("tmpfs", disk.c_str(), "tmpfs", 0, size.c_str()) != 0) {
      const int err = errno;
      return absl::FailedPreconditionError(
          absl::StrCat("mounting a tmpfs (", size, ") for the storage servers at ", disk, ": ",
                       std::strerror(err), " (storage_disk_mib needs root)"));
    }
    cluster->storage_disk_ = disk;
  }
  if (cluster->options_.credential) {
    cluster->credential_file_ = *root + "/credential";
    absl::StatusOr<std::string> secret = CreateCredential(cluster->credential_file_);
    if (!secret.ok()) return secret.status();
    cluster->credential_ = *secret;
    cluster->server_credential_file_ = *root + "/server-credential";
    absl::StatusOr<std::string> server_secret = CreateCredential(cluster->server_credential_file_);
    if (!server_secret.ok()) return server_secret.status();
    cluster->server_credential_ = *server_secret;
    if (const char* previous = std::getenv(kCredentialFileEnv)) {
      cluster->previous_env_ = previous;
    }
    ::setenv(kCredentialFileEnv, cluster->credential_file_.c_str(), 1);
    cluster->env_set_ = true;
  }
  auto meta_port = PickFreePort();
  if (!meta_port.ok()) return meta_port.status();
  cluster->meta_port_ = *meta_port;
  for (int i = 0; i < cluster->options_.storage_servers; ++i) {
    auto port = PickFreePort();
    if (!port.ok()) return port.status();
    cluster->storage_ports_.push_back(*port);
  }
  cluster->storage_.resize(cluster->options_.storage_servers);
  if (absl::Status s = cluster->StartMeta(); !s.ok()) return s;
  for (int i = 0; i < cluster->options_.storage_servers; ++i) {
    if (absl::Status s = cluster->StartStorage(i); !s.ok()) return s;
  }
  if (absl::Status s = cluster->WaitServersAlive(cluster->options_.storage_servers); !s.ok()) {
    return absl::Status(s.code(), absl::StrCat(s.message(), "\n", cluster->DescribeLogs()));
  }
  return cluster;
}

LocalCluster::~LocalCluster() {
  for (auto& [mountpoint, daemon] : mounts_) {
    RunCommand({"fusermount3", "-u", "-q", mountpoint});
    if (daemon->Wait(absl::Seconds(5)) == std::nullopt) {
      RunCommand({"fusermount3", "-u", "-z", "-q", mountpoint});
      daemon->Stop(SIGKILL, absl::Seconds(5));
    }
  }
  mounts_.clear();
  for (auto& s : storage_) {
    if (s) s->Stop(SIGKILL, absl::Seconds(5));
  }
  if (meta_) meta_->Stop(SIGKILL, absl::Seconds(5));
  if (!storage_disk_.empty()) ::umount2(storage_disk_.c_str(), MNT_DETACH);
  if (env_set_) {
    if (previous_env_.has_value()) {
      ::setenv(kCredentialFileEnv, previous_env_->c_str(), 1);
    } else {
      ::unsetenv(kCredentialFileEnv);
    }
  }
  if (!root_.empty() && std::getenv("CKPTFS_KEEP_TEST_DIR") == nullptr) RemoveTree(root_);
}

std::string LocalCluster::meta_address() const { return absl::StrCat("127.0.0.1:", meta_port_); }

std::string LocalCluster::storage_address(int i) const {
  return absl::StrCat("127.0.0.1:", storage_ports_[i]);
}

std::string LocalCluster::storage_dir(int i) const {
  return absl::StrCat(storage_disk_.empty() ? root_ : storage_disk_, "/storage-", i);
}

pid_t LocalCluster::meta_pid() const { return meta_ ? meta_->pid() : 0; }

pid_t LocalCluster::storage_pid(int i) const { return storage_[i] ? storage_[i]->pid() : 0; }

absl::Status LocalCluster::StartMeta() {
  const std::string dir = absl::StrCat(root_, "/meta");
  ::mkdir(dir.c_str(), 0755);
  std::vector<std::string> argv = {BinDir() + "/ckptfs-meta", "--listen=" + meta_address(),
                                   "--data_dir=" + dir};
  if (!credential_file_.empty()) {
    argv.push_back("--credential_file=" + credential_file_);
    argv.push_back("--server_credential_file=" + server_credential_file_);
  }
  // One copy unless the test says: what each test inspects on the servers
  // (chunk files, a server killed) assumes it.
  const bool replicas_given =
      std::any_of(options_.meta_flags.begin(), options_.meta_flags.end(),
                  [](const std::string& f) { return absl::StartsWith(f, "--replicas="); });
  if (!replicas_given) argv.push_back("--replicas=1");
  for (const auto& f : options_.meta_flags) argv.push_back(f);
  auto child = ChildProcess::Start(argv, absl::StrCat(root_, "/meta.log"));
  if (!child.ok()) return child.status();
  meta_ = *std::move(child);
  const HostPort addr{"127.0.0.1", meta_port_};
  absl::Status s = WaitUntil(kStartTimeout, "the metadata server to listen", [&] {
    return !meta_->Running() || ConnectTcp(addr, absl::Seconds(1)).ok();
  });
  if (!s.ok() || !meta_->Running()) {
    return absl::UnavailableError(absl::StrCat("ckptfs-meta did not start:\n", meta_->LogTail()));
  }
  return absl::OkStatus();
}

absl::Status LocalCluster::StopMeta(int signal) {
  if (!meta_) return absl::OkStatus();
  if (meta_->Stop(signal, absl::Seconds(15)) == std::nullopt) {
    return absl::DeadlineExceededError("ckptfs-meta did not exit");
  }
  return absl::OkStatus();
}

absl::Status LocalCluster::StartStorage(int i) {
  const std::string dir = storage_dir(i);
  ::mkdir(dir.c_str(), 0755);
  // A port picked earlier may have been taken meanwhile by another program
  // (tests run in parallel): then the server exits saying so, and it gets
  // another port (it registers its address, so the cluster follows).
  for (int attempt = 0;; ++attempt) {
    std::vector<std::string> argv = {BinDir() + "/ckptfs-storage", "--listen=" + storage_address(i),
                                     "--data_dir=" + dir, "--meta=" + meta_address(),
                                     "--heartbeat_interval_s=1"};
    if (!credential_file_.empty()) {
      argv.push_back("--credential_file=" + credential_file_);
      argv.push_back("--server_credential_file=" + server_credential_file_);
    }
    for (const auto& f : options_.storage_flags) argv.push_back(f);
    const std::string log = absl::StrCat(root_, "/storage-", i, ".log");
    // The log is appended to across restarts: read only this start's part.
    std::error_code ec;
    const uintmax_t log_start =
        std::filesystem::exists(log, ec) ? std::filesystem::file_size(log, ec) : 0;
    auto this_start = [&] {
      std::ifstream in(log, std::ios::binary);
      in.seekg(static_cast<std::streamoff>(log_start));
      return std::string(std::istreambuf_iterator<char>(in), {});
    };
    auto child = ChildProcess::Start(argv, log);
    if (!child.ok()) return child.status();
    storage_[i] = *std::move(child);
    // Wait until it says it listens (not merely until the port accepts: that
    // could be whoever took it): a server killed a moment ago still counts
    // as alive in ListServers until its heartbeat times out, so
    // WaitServersAlive alone does not say that the new process serves yet.
    ChildProcess* server = storage_[i].get();
    const std::string listening = "listening on " + storage_address(i);
    absl::Status s = WaitUntil(kStartTimeout, "the storage server to listen", [&] {
      return !server->Running() || absl::StrContains(this_start(), listening);
    });
    if (s.ok() && server->Running()) return absl::OkStatus();
    if (attempt < 3 && absl::StrContains(this_start(), "already in use")) {
      absl::StatusOr<uint16_t> port = PickFreePort();
      if (!port.ok()) return port.status();
      storage_ports_[i] = *port;
      continue;
    }
    return absl::UnavailableError(
        absl::StrCat("ckptfs-storage ", i, " did not start:\n", server->LogTail()));
  }
}

absl::Status LocalCluster::StopStorage(int i, int signal) {
  if (!storage_[i]) return absl::OkStatus();
  if (storage_[i]->Stop(signal, absl::Seconds(15)) == std::nullopt) {
    return absl::DeadlineExceededError(absl::StrCat("ckptfs-storage ", i, " did not exit"));
  }
  return absl::OkStatus();
}

absl::Status LocalCluster::WaitServersAlive(int n, absl::Duration timeout) {
  auto channel = grpc::CreateChannel(meta_address(), grpc::InsecureChannelCredentials());
  auto stub = meta::MetaService::NewStub(channel);
  int alive = 0;
  absl::Status s = WaitUntil(timeout, absl::StrCat(n, " storage servers to be alive"), [&] {
    grpc::ClientContext ctx;
    ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(2));
    AttachCredential(ctx, credential_);
    meta::Empty req;
    meta::ListServersReply reply;
    if (!stub->ListServers(&ctx, req, &reply).ok()) return false;
    alive = 0;
    for (const auto& server : reply.servers()) alive += server.alive() ? 1 : 0;
    return alive >= n;
  });
  if (!s.ok()) return absl::Status(s.code(), absl::StrCat(s.message(), " (", alive, " alive)"));
  return s;
}

absl::StatusOr<std::string> LocalCluster::Mount(const std::string& name,
                                                std::vector<std::string> extra_flags) {
  const std::string mountpoint = absl::StrCat(root_, "/", name);
  ::mkdir(mountpoint.c_str(), 0755);
  std::vector<std::string> argv = {BinDir() + "/ckptfs-fuse", "--meta=" + meta_address(),
                                   "--mountpoint=" + mountpoint, "--foreground"};
  const bool own_credential =
      std::any_of(extra_flags.begin(), extra_flags.end(),
                  [](const std::string& f) { return absl::StartsWith(f, "--credential_file="); });
  if (!credential_file_.empty() && !own_credential) {
    argv.push_back("--credential_file=" + credential_file_);
  }
  // Extra flags may override these.
  if (!options_.local_reads) argv.push_back("--local_reads=false");
  if (!options_.local_writes) argv.push_back("--local_writes=false");
  for (auto& f : extra_flags) argv.push_back(std::move(f));
  auto child = ChildProcess::Start(argv, absl::StrCat(root_, "/fuse-", name, ".log"));
  if (!child.ok()) return child.status();
  ChildProcess* daemon = child->get();
  mounts_[mountpoint] = *std::move(child);
  absl::Status s = WaitUntil(kStartTimeout, "the mount",
                             [&] { return !daemon->Running() || IsCkptfsMount(mountpoint); });
  if (!s.ok() || !daemon->Running()) {
    return absl::UnavailableError(
        absl::StrCat("ckptfs-fuse did not mount ", mountpoint, ":\n", daemon->LogTail()));
  }
  return mountpoint;
}

absl::Status LocalCluster::Unmount(const std::string& mountpoint) {
  auto it = mounts_.find(mountpoint);
  if (it == mounts_.end()) return absl::NotFoundError(absl::StrCat("not mounted: ", mountpoint));
  const int rc = RunCommand({"fusermount3", "-u", mountpoint});
  if (rc != 0) return absl::InternalError(absl::StrCat("fusermount3 -u ", mountpoint, " failed"));
  if (it->second->Wait(absl::Seconds(10)) == std::nullopt) {
    return absl::DeadlineExceededError("ckptfs-fuse did not exit after unmount");
  }
  mounts_.erase(it);
  return absl::OkStatus();
}

std::string LocalCluster::DescribeLogs() const {
  std::string out;
  auto add = [&](const ChildProcess* p) {
    if (p) absl::StrAppend(&out, "==> ", p->log_path(), " <==\n", p->LogTail(2048), "\n");
  };
  add(meta_.get());
  for (const auto& s : storage_) add(s.get());
  for (const auto& [mp, d] : mounts_) add(d.get());
  return out;
}

}  // namespace ckptfs::testing
