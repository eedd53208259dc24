// See cluster_address.h.
#include "tools/cluster_address.h"

#include <sys/types.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <optional>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "common/credential.h"
#include "common/meta_channel.h"
#include "tools/mounts.h"
#include "tools/state_dir.h"

namespace ckptfs::tools {
namespace {

std::string ReadAll(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

// The value of --name=V or --name V in `args`, if present.
std::optional<std::string> FlagValue(const std::vector<std::string>& args,
                                     const std::string& name) {
  for (size_t i = 0; i < args.size(); ++i) {
    if (absl::StartsWith(args[i], "--" + name + "=")) return args[i].substr(name.size() + 3);
    if (args[i] == "--" + name && i + 1 < args.size()) return args[i + 1];
  }
  return std::nullopt;
}

// The FUSE mount whose mount point is the longest prefix of `path`.
std::optional<std::string> FuseMountHolding(const std::string& path) {
  std::string best;
  for (const MountEntry& m : ParseMountInfo(ReadAll("/proc/self/mountinfo"))) {
    if (!m.is_fuse()) continue;
    const bool under =
        path == m.mount_point || (absl::StartsWith(path, m.mount_point) &&
                                  (m.mount_point == "/" || path[m.mount_point.size()] == '/'));
    if (under && m.mount_point.size() > best.size()) best = m.mount_point;
  }
  if (best.empty()) return std::nullopt;
  return best;
}

}  // namespace

FlagSpec MetaFlag() {
  return {"meta", "ADDR", "the metadata service, host:port, or all its metadata servers as A,B"};
}

FlagSpec CredentialFileFlag() {
  return {"credential-file", "FILE",
          "the cluster's credential (default: DIR/credential of --state-dir, or the "
          "mount's)"};
}

FlagSpec StateDirFlag() {
  return {"state-dir", "DIR", "read the metadata service's address from DIR/cluster.state"};
}

namespace {

// The command line of the ckptfs-fuse process serving the FUSE mount that
// holds `path`; NotFound as MetaAddressOfMount says.
absl::StatusOr<std::vector<std::string>> FuseDaemonArgsOfMount(const std::string& path) {
  const std::string absolute = AbsolutePath(path);
  std::optional<std::string> mount = FuseMountHolding(absolute);
  if (!mount) {
    return absl::NotFoundError(absl::StrCat(path, " is not on a ckptfs mount"));
  }
  std::error_code ec;
  for (const auto& entry : std::filesystem::directory_iterator("/proc", ec)) {
    pid_t pid = 0;
    if (!absl::SimpleAtoi(entry.path().filename().string(), &pid)) continue;
    std::vector<std::string> args =
        absl::StrSplit(ReadAll(absl::StrCat("/proc/", pid, "/cmdline")), '\0', absl::SkipEmpty());
    if (args.empty() || !absl::StrContains(args[0], "ckptfs-fuse")) continue;
    std::optional<std::string> mountpoint = FlagValue(args, "mountpoint");
    if (!mountpoint || AbsolutePath(*mountpoint) != *mount) continue;
    return args;
  }
  return absl::NotFoundError(
      absl::StrCat("cannot tell which metadata service the mount at ", *mount,
                   " uses (no ckptfs-fuse process of this machine serves it); pass --meta ADDR"));
}

// LoadCredential(file), its error saying which flag gives `which`
// ("credential" or "server credential").
absl::StatusOr<std::string> LoadCredentialFor(const std::string& file, absl::string_view which) {
  absl::StatusOr<std::string> credential = LoadCredential(file);
  if (!credential.ok()) {
    return absl::Status(
        credential.status().code(),
        absl::StrCat(credential.status().message(),
                     " (pass --credential-file FILE with the cluster's ", which, ")"));
  }
  return credential;
}

}  // namespace

absl::StatusOr<std::string> ResolveCredential(const ParsedFlags& flags, const std::string& path) {
  auto load = [](const std::string& file) { return LoadCredentialFor(file, "credential"); };
  if (flags.Given("credential-file")) return load(flags.Get("credential-file"));
  if (const char* file = std::getenv(kCredentialFileEnv); file != nullptr && *file != '\0') {
    return load(file);
  }
  if (flags.Given("state-dir")) {
    absl::StatusOr<StateDir> dir = StateDir::Open(flags.Get("state-dir"), /*create=*/false);
    if (!dir.ok()) return dir.status();
    if (::access(dir->CredentialFile().c_str(), F_OK) != 0) return std::string();
    return load(dir->CredentialFile());
  }
  if (flags.Given("meta") || path.empty()) return std::string();
  absl::StatusOr<std::vector<std::string>> args = FuseDaemonArgsOfMount(path);
  if (!args.ok()) return std::string();  // ResolveMetaAddress reports it
  std::optional<std::string> file = FlagValue(*args, "credential_file");
  if (!file || file->empty()) return std::string();
  return load(*file);
}

absl::StatusOr<std::string> ResolveServerCredential(const ParsedFlags& flags) {
  if (!flags.Given("credential-file") && flags.Given("state-dir")) {
    absl::StatusOr<StateDir> dir = StateDir::Open(flags.Get("state-dir"), /*create=*/false);
    if (!dir.ok()) return dir.status();
    if (::access(dir->ServerCredentialFile().c_str(), F_OK) == 0) {
      return LoadCredentialFor(dir->ServerCredentialFile(), "server credential");
    }
  }
  return ResolveCredential(flags, "");
}

absl::StatusOr<std::string> MetaAddressOfMount(const std::string& path) {
  absl::StatusOr<std::vector<std::string>> args = FuseDaemonArgsOfMount(path);
  if (!args.ok()) return args.status();
  // ckptfs-fuse's default when --meta is not given.
  return FlagValue(*args, "meta").value_or("127.0.0.1:7000");
}

absl::StatusOr<std::string> ResolveMetaAddress(const ParsedFlags& flags, const std::string& path) {
  if (flags.Given("meta") && flags.Given("state-dir")) {
    return absl::InvalidArgumentError("give at most one of --meta and --state-dir");
  }
  if (flags.Given("meta")) {
    const std::string meta = flags.Get("meta");
    if (absl::StatusOr<std::string> target = MetaChannelTarget(meta); !target.ok()) {
      return target.status();
    }
    return meta;
  }
  if (flags.Given("state-dir")) {
    absl::StatusOr<StateDir> dir = StateDir::Open(flags.Get("state-dir"), /*create=*/false);
    if (!dir.ok()) return dir.status();
    absl::StatusOr<std::optional<ClusterState>> state = dir->Load();
    if (!state.ok()) return state.status();
    if (!state->has_value()) {
      return absl::FailedPreconditionError(absl::StrCat("no cluster is running from ", dir->path(),
                                                        " (start one with `ckptfs up`)"));
    }
    return (*state)->meta_address;
  }
  if (path.empty()) {
    return absl::InvalidArgumentError("give --meta ADDR or --state-dir DIR");
  }
  return MetaAddressOfMount(path);
}

}  // namespace ckptfs::tools
