// `ckptfs mount` and `ckptfs umount`: mount an existing cluster, given its
// metadata service's address (what every other training node runs), and
// unmount it. The mount runs `ckptfs-fuse --foreground` detached, logging to
// --log-file; `mount` returns once the filesystem is mounted.
// Runs on main's thread only.
#include <unistd.h>

#include <cstdlib>
#include <iostream>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_replace.h"
#include "common/credential.h"
#include "common/meta_channel.h"
#include "tools/commands.h"
#include "tools/daemon_binaries.h"
#include "tools/fuse_mount.h"
#include "tools/interruptible_wait.h"
#include "tools/meta_probe.h"
#include "tools/mounts.h"
#include "tools/process.h"
#include "tools/state_dir.h"

namespace ckptfs::tools {
namespace {

constexpr int kLogTailLines = 25;

// /tmp/ckptfs-fuse<mountpoint with each '/' as '_'>.log
std::string DefaultLogPath(const std::string& mountpoint) {
  return absl::StrCat("/tmp/ckptfs-fuse", absl::StrReplaceAll(mountpoint, {{"/", "_"}}), ".log");
}

}  // namespace

CommandSpec MountSpec() {
  return CommandSpec{
      "mount",
      "Mount an existing ckptfs cluster, given its metadata service's address.",
      "Returns once the filesystem is mounted; the FUSE daemon keeps running in the\n"
      "background. Unmount with `ckptfs umount --mountpoint DIR`.",
      {
          {"meta", "ADDR", "the metadata service, host:port, or all its metadata servers as A,B",
           "", true},
          {"mountpoint", "DIR", "where to mount (created if missing)", "", true},
          {"threads", "N", "FUSE worker threads (default: the daemon's)"},
          {"credential-file", "FILE",
           "the cluster's credential, passed to the daemon (--credential_file); default: "
           "$CKPTFS_CREDENTIAL_FILE"},
          {"log-file", "FILE", "the FUSE daemon's log (default /tmp/ckptfs-fuse<mountpoint>.log)"},
          {"timeout-s", "SECONDS", "how long to wait for the mount", "30"},
      }};
}

int RunMount(const ParsedFlags& flags) {
  static const CommandSpec spec = MountSpec();
  absl::StatusOr<int64_t> timeout = flags.GetInt("timeout-s", 1, 3600);
  if (!timeout.ok()) return UsageError(spec, std::string(timeout.status().message()));
  FuseMountOptions options;
  if (flags.Given("threads")) {
    absl::StatusOr<int64_t> threads = flags.GetInt("threads", 1, 1024);
    if (!threads.ok()) return UsageError(spec, std::string(threads.status().message()));
    options.threads = static_cast<int>(*threads);
  }
  options.meta_address = flags.Get("meta");
  if (absl::StatusOr<std::string> target = MetaChannelTarget(options.meta_address); !target.ok()) {
    return UsageError(spec, std::string(target.status().message()));
  }
  options.mountpoint = AbsolutePath(flags.Get("mountpoint"));
  const std::string log_path = flags.Given("log-file") ? AbsolutePath(flags.Get("log-file"))
                                                       : DefaultLogPath(options.mountpoint);
  absl::StatusOr<std::string> binary = FindDaemonBinary(kFuseBinary);
  if (!binary.ok()) return Failure(spec, std::string(binary.status().message()));
  options.fuse_binary = *binary;

  std::string credential;
  const char* env_file = std::getenv(kCredentialFileEnv);
  if (flags.Given("credential-file") || (env_file != nullptr && *env_file != '\0')) {
    options.credential_file =
        AbsolutePath(flags.Given("credential-file") ? flags.Get("credential-file") : env_file);
    absl::StatusOr<std::string> loaded = LoadCredential(options.credential_file);
    if (!loaded.ok()) return Failure(spec, std::string(loaded.status().message()));
    credential = *loaded;
  }

  // Fail fast, with the service's own words, when it is not reachable.
  MetaProbe probe(options.meta_address, credential);
  if (absl::StatusOr<std::vector<meta::ServerInfo>> servers = probe.ListServers(absl::Seconds(5));
      !servers.ok()) {
    return Failure(spec, absl::StrCat("cannot reach the metadata service at ", options.meta_address,
                                      ": ", servers.status().message(),
                                      " (is ckptfs-meta running there, and is --meta its "
                                      "host:port? `ckptfs up` starts a local cluster)"));
  }
  if (absl::Status s = PrepareMountpoint(options.mountpoint); !s.ok()) {
    return Failure(spec, std::string(s.message()));
  }
  InstallInterruptHandler();
  absl::StatusOr<ProcessRecord> process = SpawnDetached(FuseArgv(options), log_path);
  if (!process.ok()) return Failure(spec, std::string(process.status().message()));
  if (absl::Status s = WaitForMount(process->pid, options.mountpoint, absl::Seconds(*timeout));
      !s.ok()) {
    std::cerr << "ckptfs mount: " << s.message() << "\n---- last lines of " << log_path << " ----\n"
              << TailFile(log_path, kLogTailLines) << "\n----" << std::endl;
    (void)UnmountWithRetries(options.mountpoint, 1, /*lazy=*/true, [](const std::string&) {});
    StopProcesses({*process}, absl::Seconds(5));
    return 1;
  }
  std::cout << "mounted ckptfs (metadata service " << options.meta_address << ") at "
            << options.mountpoint << "\n  ckptfs-fuse pid " << process->pid << ", log " << log_path
            << "\n  unmount with: ckptfs umount --mountpoint " << options.mountpoint << std::endl;
  return 0;
}

CommandSpec UmountSpec() {
  return CommandSpec{"umount",
                     "Unmount a ckptfs mount (the FUSE daemon then exits).",
                     "While the mount is busy it retries for a few seconds and then names the\n"
                     "processes holding it; with --lazy it then detaches the mount anyway.",
                     {
                         {"mountpoint", "DIR", "the mounted directory", "", true},
                         {"lazy", "", "if still busy, detach lazily (fusermount3 -u -z)"},
                     }};
}

int RunUmount(const ParsedFlags& flags) {
  static const CommandSpec spec = UmountSpec();
  const std::string mountpoint = AbsolutePath(flags.Get("mountpoint"));
  std::optional<MountEntry> mount = FindMount(mountpoint);
  if (!mount.has_value()) {
    std::cout << "nothing is mounted at " << mountpoint << std::endl;
    return 0;
  }
  if (!mount->is_fuse()) {
    return Failure(spec, absl::StrCat(mountpoint, " is a ", mount->fs_type,
                                      " mount, not a ckptfs (FUSE) mount"));
  }
  const bool lazy = flags.GetBool("lazy");
  absl::StatusOr<UnmountResult> result =
      UnmountWithRetries(mountpoint, /*attempts=*/5, lazy,
                         [](const std::string& line) { std::cerr << line << std::endl; });
  if (!result.ok()) {
    return Failure(spec, absl::StrCat(result.status().message(),
                                      lazy ? "" : "\n  (--lazy detaches it anyway)"));
  }
  if (*result == UnmountResult::kDetachedLazily) {
    std::cout << "detached " << mountpoint << " (lazily)" << std::endl;
    return 0;
  }
  std::cout << "unmounted " << mountpoint << std::endl;
  return 0;
}

}  // namespace ckptfs::tools
