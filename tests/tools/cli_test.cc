// Tests of the `ckptfs` executable's behaviour that need no real cluster:
// usage errors, missing daemons, busy ports, a daemon that fails or never
// becomes ready (shell scripts stand in for the daemons via CKPTFS_BIN_DIR),
// a state dir whose cluster still runs, `down` of recorded processes, and
// the argument errors of `ckptfs ckpt`, the help of the operator commands.
// The real end-to-end runs live in tests/integration/cli_test.cc (up, write,
// down, up, read, down) and tests/tools/cluster_scenario_test.cc (every
// command on one cluster).
#include <signal.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <sys/xattr.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/time/clock.h"
#include "common/tcp.h"
#include "gtest/gtest.h"
#include "tools/data_dir_lock_probe.h"
#include "tools/ports.h"
#include "tools/process.h"
#include "tools/state_dir.h"

namespace ckptfs::tools {
namespace {

class CliTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char pattern[] = "/tmp/ckptfs-cli-test-XXXXXX";
    root_ = ::mkdtemp(pattern);
    bin_ = root_ + "/bin";
    state_ = root_ + "/state";
    mnt_ = root_ + "/mnt";
    std::filesystem::create_directories(bin_);
    ::setenv("CKPTFS_BIN_DIR", bin_.c_str(), 1);
    const auto base =
        FindFreePortRange("127.0.0.1",
                          // Spread so that tests started one after another (pids a few apart)
                          // do not probe overlapping ranges.
                          static_cast<uint16_t>(20000 + (::getpid() * 7) % 12000), 6, {});
    ASSERT_TRUE(base.has_value());
    base_ = *base;
  }
  void TearDown() override {
    Run({"down", "--state-dir", state_, "--grace-s", "1"});
    for (pid_t pid : spawned_) {
      // Only a child nobody has reaped: a test that reaped one (ReapIfExited)
      // may have let its pid pass to another process.
      if (::waitpid(pid, nullptr, WNOHANG) != 0) continue;
      ::kill(pid, SIGKILL);
      (void)::waitpid(pid, nullptr, 0);
    }
    ::unsetenv("CKPTFS_BIN_DIR");
    std::error_code ec;
    std::filesystem::remove_all(root_, ec);
  }

  // Runs `ckptfs args...`; returns exit status and combined output.
  CommandResult Run(std::vector<std::string> args) {
    args.insert(args.begin(), CKPTFS_CLI_PATH);
    auto result = RunCommand(args);
    EXPECT_TRUE(result.ok()) << result.status();
    return result.ok() ? *result : CommandResult{-1, ""};
  }
  std::vector<std::string> Up(std::vector<std::string> extra = {}) {
    std::vector<std::string> args = {"up", "--state-dir", state_, "--mountpoint", mnt_,
                                     "--meta-port", absl::StrCat(base_), "--storage-port",
                                     absl::StrCat(base_ + 1), "--servers", "2",
                                     // never the default ports the README demo uses
                                     "--metrics-port", "0"};
    args.insert(args.end(), extra.begin(), extra.end());
    return args;
  }
  // Installs the three stand-in daemons; `meta_body` is the meta script.
  void StandIns(const std::string& meta_body) {
    WriteScript("ckptfs-meta", meta_body);
    WriteScript("ckptfs-storage", "echo storage stand-in; exit 1");
    WriteScript("ckptfs-fuse", "echo fuse stand-in; exit 1");
  }
  void WriteScript(const std::string& name, const std::string& body) {
    const std::string path = bin_ + "/" + name;
    std::ofstream(path) << "#!/bin/sh\n" << body << "\n";
    ::chmod(path.c_str(), 0755);
  }
  bool StateFileExists() { return std::filesystem::exists(state_ + "/cluster.state"); }
  // Starts this build's ckptfs-storage on `data_dir` (a child of the test)
  // and waits until it holds the directory's LOCK.
  std::optional<ProcessRecord> StartStorage(const std::string& data_dir, uint16_t port,
                                            const std::string& log) {
    const std::string storage_bin = std::string(CKPTFS_BUILD_BIN_DIR) + "/ckptfs-storage";
    auto server =
        SpawnDetached({storage_bin, absl::StrCat("--listen=127.0.0.1:", port),
                       "--data_dir=" + data_dir, "--buffer_pool_mb=65", "--scrub_mb_per_s=0"},
                      log);
    EXPECT_TRUE(server.ok()) << server.status();
    if (!server.ok()) return std::nullopt;
    spawned_.push_back(server->pid);
    for (int t = 0; t < 500 && !DataDirLocked(data_dir).value_or(false); ++t) {
      absl::SleepFor(absl::Milliseconds(20));
    }
    EXPECT_TRUE(*DataDirLocked(data_dir)) << "never locked " << data_dir;
    return *server;
  }
  static bool HaveStorageBinary() {
    return ::access((std::string(CKPTFS_BUILD_BIN_DIR) + "/ckptfs-storage").c_str(), X_OK) == 0;
  }

  std::string root_, bin_, state_, mnt_;
  uint16_t base_ = 0;
  std::vector<pid_t> spawned_;
};

// A live (non-zombie) process?
bool Alive(pid_t pid) {
  std::ifstream in(absl::StrCat("/proc/", pid, "/stat"));
  std::string line;
  if (!std::getline(in, line)) return false;
  const size_t close = line.rfind(')');
  return close != std::string::npos && close + 2 < line.size() && line[close + 2] != 'Z';
}

TEST_F(CliTest, UsageErrorsExitWithTwo) {
  EXPECT_EQ(Run({}).exit_status, 2);
  CommandResult r = Run({"frobnicate"});
  EXPECT_EQ(r.exit_status, 2);
  EXPECT_NE(r.output.find("unknown command"), std::string::npos) << r.output;
  r = Run({"up", "--state-dir", state_, "--mountpoint", mnt_, "--sever", "3"});
  EXPECT_EQ(r.exit_status, 2);
  EXPECT_NE(r.output.find("did you mean --servers?"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("usage: ckptfs up"), std::string::npos) << r.output;
  r = Run({"up", "--mountpoint", mnt_});
  EXPECT_EQ(r.exit_status, 2);
  EXPECT_NE(r.output.find("--state-dir"), std::string::npos) << r.output;
  EXPECT_EQ(Run(Up({"--servers", "0"})).exit_status, 2);
  EXPECT_EQ(Run({"up", "--state-dir", state_, "--mountpoint", mnt_, "--meta-port", "7002",
                 "--storage-port", "7001"})
                .exit_status,
            2);  // meta port inside the storage range
  EXPECT_EQ(Run({"status"}).exit_status, 2);
  // An erasure code needs a server per fragment, and says so.
  r = Run(Up({"--ec", "4+2"}));  // Up() has --servers 2
  EXPECT_EQ(r.exit_status, 2);
  EXPECT_NE(r.output.find("needs at least 6 storage servers"), std::string::npos) << r.output;
  for (const char* bad : {"4", "1+1", "4+0", "4+x", "30+3"}) {
    r = Run(Up({"--ec", bad}));
    EXPECT_EQ(r.exit_status, 2) << bad;
    EXPECT_NE(r.output.find("want K+M"), std::string::npos) << bad << ": " << r.output;
  }
}

TEST_F(CliTest, HelpExitsWithZero) {
  CommandResult r = Run({"help"});
  EXPECT_EQ(r.exit_status, 0);
  for (const char* command : {"up", "down", "mount", "umount", "status"}) {
    EXPECT_NE(r.output.find(absl::StrCat("  ", command, " ")), std::string::npos) << command;
  }
  r = Run({"down", "--help"});
  EXPECT_EQ(r.exit_status, 0);
  EXPECT_NE(r.output.find("usage: ckptfs down --state-dir DIR"), std::string::npos);
  EXPECT_EQ(Run({"help", "mount"}).exit_status, 0);
}

TEST_F(CliTest, DownWithNothingRunningIsFine) {
  CommandResult r = Run({"down", "--state-dir", state_});
  EXPECT_EQ(r.exit_status, 0) << r.output;
  EXPECT_NE(r.output.find("nothing to stop"), std::string::npos) << r.output;
  std::filesystem::create_directories(state_);
  r = Run({"down", "--state-dir", state_});
  EXPECT_EQ(r.exit_status, 0) << r.output;
  EXPECT_NE(r.output.find("nothing to stop"), std::string::npos) << r.output;
}

TEST_F(CliTest, MissingDaemonsAreNamed) {
  CommandResult r = Run(Up());
  EXPECT_EQ(r.exit_status, 1);
  EXPECT_NE(r.output.find("cannot find the executable ckptfs-meta in " + bin_), std::string::npos)
      << r.output;
}

TEST_F(CliTest, BusyPortsAreNamedWithAFreeAlternative) {
  StandIns("touch " + root_ + "/meta-started; exit 1");
  {
    auto blocker = ListenTcp(HostPort{"127.0.0.1", base_});
    ASSERT_TRUE(blocker.ok());
    CommandResult r = Run(Up());
    EXPECT_EQ(r.exit_status, 1);
    EXPECT_NE(r.output.find(absl::StrCat("port ", base_, " (metadata service)")), std::string::npos)
        << r.output;
    EXPECT_NE(r.output.find("pass --meta-port "), std::string::npos) << r.output;
  }
  {
    auto blocker = ListenTcp(HostPort{"127.0.0.1", static_cast<uint16_t>(base_ + 2)});
    ASSERT_TRUE(blocker.ok());
    CommandResult r = Run(Up());
    EXPECT_EQ(r.exit_status, 1);
    EXPECT_NE(r.output.find(absl::StrCat("port ", base_ + 2, " (storage servers")),
              std::string::npos)
        << r.output;
    EXPECT_NE(r.output.find("pass --storage-port "), std::string::npos) << r.output;
  }
  EXPECT_FALSE(std::filesystem::exists(root_ + "/meta-started"));  // nothing started
  EXPECT_FALSE(StateFileExists());
}

TEST_F(CliTest, FailingDaemonShowsItsLogAndNothingIsLeft) {
  StandIns("echo \"meta stand-in: cannot open data dir ($*)\" >&2; exit 3");
  CommandResult r = Run(Up());
  EXPECT_EQ(r.exit_status, 1);
  EXPECT_NE(r.output.find("exited with status 3"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("meta stand-in: cannot open data dir"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find(absl::StrCat("--listen=127.0.0.1:", base_)), std::string::npos)
      << r.output;  // the daemon got its flags
  EXPECT_FALSE(StateFileExists());
  EXPECT_TRUE(std::filesystem::exists(state_ + "/logs/meta.log"));
}

TEST_F(CliTest, DaemonThatNeverAnswersIsStopped) {
  StandIns("echo $$ > " + root_ +
           "/meta.pid\n"
           "trap 'exit 0' TERM\nwhile :; do sleep 0.1; done");
  CommandResult r = Run(Up({"--timeout-s", "5"}));
  EXPECT_EQ(r.exit_status, 1);
  EXPECT_NE(r.output.find("timed out"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("meta (pid"), std::string::npos) << r.output;
  std::ifstream in(root_ + "/meta.pid");
  pid_t pid = 0;
  ASSERT_TRUE(in >> pid);
  EXPECT_FALSE(Alive(pid));
  EXPECT_FALSE(StateFileExists());
}

TEST_F(CliTest, BadMountpointIsRefusedBeforeAnythingStarts) {
  StandIns("touch " + root_ + "/meta-started; exit 1");
  std::ofstream(root_ + "/a-file") << "x";
  CommandResult r =
      Run({"up", "--state-dir", state_, "--mountpoint", root_ + "/a-file", "--meta-port",
           absl::StrCat(base_), "--storage-port", absl::StrCat(base_ + 1)});
  EXPECT_EQ(r.exit_status, 1);
  EXPECT_NE(r.output.find(root_ + "/a-file"), std::string::npos) << r.output;
  EXPECT_FALSE(std::filesystem::exists(root_ + "/meta-started"));
}

TEST_F(CliTest, InterruptedUpStopsWhatItStarted) {
  StandIns("echo $$ > " + root_ +
           "/meta.pid\n"
           "trap 'exit 0' TERM\nwhile :; do sleep 0.1; done");
  std::vector<std::string> args = Up();
  args.insert(args.begin(), CKPTFS_CLI_PATH);
  auto up = SpawnDetached(args, root_ + "/up.out");
  ASSERT_TRUE(up.ok());
  spawned_.push_back(up->pid);
  auto pid_written = [&] {
    std::ifstream in(root_ + "/meta.pid");
    pid_t pid = 0;
    return static_cast<bool>(in >> pid);
  };
  for (int i = 0; i < 500 && !pid_written(); ++i) absl::SleepFor(absl::Milliseconds(20));
  ASSERT_TRUE(pid_written()) << "the stand-in never ran";
  absl::SleepFor(absl::Milliseconds(100));
  ASSERT_EQ(::kill(up->pid, SIGINT), 0);
  std::optional<std::string> how;
  for (int i = 0; i < 200 && !how; ++i) {
    how = ReapIfExited(up->pid);
    if (!how) absl::SleepFor(absl::Milliseconds(50));
  }
  ASSERT_TRUE(how.has_value());
  EXPECT_EQ(*how, "exited with status 1");
  std::ifstream out_file(root_ + "/up.out");
  const std::string out(std::istreambuf_iterator<char>(out_file), {});
  EXPECT_NE(out.find("interrupted"), std::string::npos) << out;
  std::ifstream in(root_ + "/meta.pid");
  pid_t pid = 0;
  ASSERT_TRUE(in >> pid);
  EXPECT_FALSE(Alive(pid));
  EXPECT_FALSE(StateFileExists());
}

TEST_F(CliTest, RunningClusterIsRefusedAndDownStopsOnlyRecordedProcesses) {
  auto dir = StateDir::Open(state_, /*create=*/true);
  ASSERT_TRUE(dir.ok());
  auto daemon = SpawnDetached({"/bin/sleep", "60"}, dir->LogPath("meta"));
  auto bystander = SpawnDetached({"/bin/sleep", "60"}, dir->LogPath("other"));
  ASSERT_TRUE(daemon.ok() && bystander.ok());
  spawned_ = {daemon->pid, bystander->pid};
  ClusterState state;
  state.meta_address = absl::StrCat("127.0.0.1:", base_);
  state.daemons.push_back(
      {"meta", state.meta_address, dir->MetaDir(), dir->LogPath("meta"), *daemon});
  // A recorded pid that now belongs to another process must be left alone.
  ProcessRecord recycled = *bystander;
  recycled.start_time += 7;
  state.daemons.push_back({"storage-0", "127.0.0.1:1", "", "", recycled});
  ASSERT_TRUE(dir->Save(state).ok());

  StandIns("exit 1");
  CommandResult r = Run(Up());
  EXPECT_EQ(r.exit_status, 1);
  EXPECT_NE(r.output.find("still running"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("ckptfs down --state-dir"), std::string::npos) << r.output;
  EXPECT_TRUE(StateFileExists());

  r = Run({"down", "--state-dir", state_});
  EXPECT_EQ(r.exit_status, 0) << r.output;
  EXPECT_NE(r.output.find("stopped"), std::string::npos) << r.output;
  ReapIfExited(daemon->pid);
  EXPECT_FALSE(Alive(daemon->pid));
  EXPECT_TRUE(Alive(bystander->pid));
  EXPECT_FALSE(StateFileExists());

  r = Run({"down", "--state-dir", state_});
  EXPECT_EQ(r.exit_status, 0) << r.output;
  EXPECT_NE(r.output.find("nothing to stop"), std::string::npos) << r.output;
}

// What `down` must do when a storage server's record does not name it: a
// record with another executable, or a pid that now belongs to someone
// else. (The record an older `up` wrote while the exec was still in flight,
// the exe of ckptfs itself, matches: DownStopsADaemonRecordedWithTheCliAsItsImage.)
// A real ckptfs-storage
// holds its data directory's LOCK; `down` must stop it by that and not report
// it "not running" (it did, leaving servers that held their ports and metrics
// ports after the test removed their directories).
TEST_F(CliTest, DownStopsStorageServersThatStillHoldTheirDataDirectories) {
  const std::string storage_bin = std::string(CKPTFS_BUILD_BIN_DIR) + "/ckptfs-storage";
  if (::access(storage_bin.c_str(), X_OK) != 0) GTEST_SKIP() << "no " << storage_bin;
  auto dir = StateDir::Open(state_, /*create=*/true);
  ASSERT_TRUE(dir.ok());
  ClusterState state;
  state.meta_address = absl::StrCat("127.0.0.1:", base_);
  std::vector<ProcessRecord> servers;
  for (int i = 0; i < 2; ++i) {
    const std::string data_dir = dir->StorageDir(i);
    const std::string address = absl::StrCat("127.0.0.1:", base_ + 1 + i);
    auto server = SpawnDetached({storage_bin, "--listen=" + address, "--data_dir=" + data_dir,
                                 "--buffer_pool_mb=65", "--scrub_mb_per_s=0"},
                                dir->LogPath(absl::StrCat("storage-", i)));
    ASSERT_TRUE(server.ok()) << server.status();
    spawned_.push_back(server->pid);
    servers.push_back(*server);
    ProcessRecord recorded = *server;
    if (i == 0) {
      recorded.exe = "/opt/ckptfs/bin/ckptfs-storage";  // not what runs
    } else {
      recorded.start_time += 7;  // the pid is taken for another process
    }
    state.daemons.push_back({absl::StrCat("storage-", i), address, data_dir,
                             dir->LogPath(absl::StrCat("storage-", i)), recorded});
  }
  auto bystander = SpawnDetached({"/bin/sleep", "60"}, dir->LogPath("other"));
  ASSERT_TRUE(bystander.ok());
  spawned_.push_back(bystander->pid);
  ASSERT_TRUE(dir->Save(state).ok());
  for (int i = 0; i < 2; ++i) {  // each has claimed its directory
    const std::string data_dir = dir->StorageDir(i);
    for (int t = 0; t < 500 && !DataDirLocked(data_dir).value_or(false); ++t) {
      absl::SleepFor(absl::Milliseconds(20));
    }
    ASSERT_TRUE(*DataDirLocked(data_dir)) << "storage-" << i << " never locked " << data_dir;
  }

  // `up` sees them running and refuses.
  StandIns("exit 1");
  CommandResult r = Run(Up());
  EXPECT_EQ(r.exit_status, 1) << r.output;
  EXPECT_NE(r.output.find("still running"), std::string::npos) << r.output;

  r = Run({"down", "--state-dir", state_, "--grace-s", "5"});
  EXPECT_EQ(r.exit_status, 0) << r.output;
  EXPECT_NE(r.output.find(absl::StrCat("found holding ", dir->StorageDir(0), "/LOCK as pid ",
                                       servers[0].pid)),
            std::string::npos)
      << r.output;
  EXPECT_NE(r.output.find(absl::StrCat("found holding ", dir->StorageDir(1), "/LOCK as pid ",
                                       servers[1].pid)),
            std::string::npos)
      << r.output;
  for (const ProcessRecord& server : servers) {
    ReapIfExited(server.pid);
    EXPECT_FALSE(Alive(server.pid)) << "pid " << server.pid << " left running: " << r.output;
  }
  EXPECT_FALSE(*DataDirLocked(dir->StorageDir(0)));
  EXPECT_FALSE(*DataDirLocked(dir->StorageDir(1)));
  EXPECT_TRUE(Alive(bystander->pid));
  EXPECT_FALSE(StateFileExists());
}

// Starts a stand-in meta daemon (sleep) and saves a cluster.state whose
// record of it names `exe` as its executable. Returns its pid (0 on failure,
// with the test failed).
pid_t SaveDaemonRecordedAs(const std::string& state_dir, int base, std::vector<pid_t>& spawned,
                           const std::string& exe) {
  auto dir = StateDir::Open(state_dir, /*create=*/true);
  EXPECT_TRUE(dir.ok());
  if (!dir.ok()) return 0;
  auto daemon = SpawnDetached({"/bin/sleep", "60"}, dir->LogPath("meta"));
  EXPECT_TRUE(daemon.ok());
  if (!daemon.ok()) return 0;
  spawned.push_back(daemon->pid);
  ClusterState state;
  state.meta_address = absl::StrCat("127.0.0.1:", base);
  ProcessRecord recorded = *daemon;
  recorded.exe = exe;
  state.daemons.push_back({"meta", state.meta_address, "", dir->LogPath("meta"), recorded});
  EXPECT_TRUE(dir->Save(state).ok());
  return daemon->pid;
}

// A pid that started when recorded but runs another executable is not
// signalled, and `down` does not call it gone: it fails and keeps it.
TEST_F(CliTest, DownFailsOnARecordItCannotVerify) {
  const pid_t pid = SaveDaemonRecordedAs(state_, base_, spawned_, "/opt/ckptfs/bin/ckptfs-meta");
  ASSERT_GT(pid, 0);

  CommandResult r = Run({"down", "--state-dir", state_, "--grace-s", "1"});
  EXPECT_EQ(r.exit_status, 1) << r.output;
  EXPECT_NE(r.output.find(absl::StrCat("NOT STOPPED: pid ", pid)), std::string::npos) << r.output;
  EXPECT_TRUE(Alive(pid));
  EXPECT_TRUE(StateFileExists());  // kept for another try
}

// cluster.state files an older `up` wrote may name ckptfs itself as a
// daemon's executable (read before the daemon's exec had completed). With
// the recorded pid and start time that is the daemon, and `down` stops it
// rather than fail on it every time.
TEST_F(CliTest, DownStopsADaemonRecordedWithTheCliAsItsImage) {
  const pid_t pid = SaveDaemonRecordedAs(  // the CLI's image as /proc shows it
      state_, base_, spawned_, std::filesystem::canonical(CKPTFS_CLI_PATH).string());
  ASSERT_GT(pid, 0);

  CommandResult r = Run({"down", "--state-dir", state_, "--grace-s", "1"});
  EXPECT_EQ(r.exit_status, 0) << r.output;
  EXPECT_NE(r.output.find("stopped"), std::string::npos) << r.output;
  ReapIfExited(pid);
  EXPECT_FALSE(Alive(pid));
  EXPECT_FALSE(StateFileExists());
}

// A ckptfs-storage that `up` did not start (its cluster.state is gone) still
// holds a data directory `up` would use: `up` says so in the server's own
// words, starts nothing and leaves that server alone.
TEST_F(CliTest, UpRefusesADataDirectoryAnotherStorageServerHolds) {
  if (!HaveStorageBinary()) GTEST_SKIP() << "no ckptfs-storage in " << CKPTFS_BUILD_BIN_DIR;
  auto dir = StateDir::Open(state_, /*create=*/true);
  ASSERT_TRUE(dir.ok());
  std::optional<ProcessRecord> leftover =
      StartStorage(dir->StorageDir(1), static_cast<uint16_t>(base_ + 4), root_ + "/leftover.log");
  ASSERT_TRUE(leftover.has_value());
  StandIns("touch " + root_ + "/meta-started; exit 1");
  CommandResult r = Run(Up());
  EXPECT_EQ(r.exit_status, 1) << r.output;
  EXPECT_NE(r.output.find(absl::StrCat("data directory ", dir->StorageDir(1),
                                       " is in use by another ckptfs-storage (pid ", leftover->pid,
                                       "): it holds ", dir->StorageDir(1), "/LOCK")),
            std::string::npos)
      << r.output;
  EXPECT_FALSE(std::filesystem::exists(root_ + "/meta-started"));  // nothing started
  EXPECT_TRUE(IsRunning(*leftover));
  EXPECT_TRUE(*DataDirLocked(dir->StorageDir(1)));
}

// When `up` gives up after its storage servers started, whatever still holds
// their data directories' LOCKs is stopped, and named with the reason, not
// stopped silently. Here each storage stand-in leaves a process behind that
// holds its LOCK (flock(1)); the real ckptfs-meta lets `up` get that far.
TEST_F(CliTest, AnAbortedUpNamesTheLockHoldersItStops) {
  const std::string meta_bin = std::string(CKPTFS_BUILD_BIN_DIR) + "/ckptfs-meta";
  if (::access(meta_bin.c_str(), X_OK) != 0) GTEST_SKIP() << "no " << meta_bin;
  if (::access("/usr/bin/flock", X_OK) != 0) GTEST_SKIP() << "no /usr/bin/flock";
  auto dir = StateDir::Open(state_, /*create=*/true);
  ASSERT_TRUE(dir.ok());
  StandIns("exit 1");
  std::filesystem::remove(bin_ + "/ckptfs-meta");
  std::filesystem::create_symlink(meta_bin, bin_ + "/ckptfs-meta");
  WriteScript("ckptfs-storage",
              "for a in \"$@\"; do case \"$a\" in --data_dir=*) d=\"${a#--data_dir=}\";; esac; "
              "done\n"
              "/usr/bin/flock -n \"$d/LOCK\" sleep 60 &\n"
              "echo $! >> " +
                  root_ +
                  "/holders\n"
                  "sleep 1; echo storage stand-in gives up; exit 1");
  CommandResult r = Run(Up({"--timeout-s", "30"}));
  EXPECT_EQ(r.exit_status, 1) << r.output;
  EXPECT_NE(r.output.find("storage stand-in gives up"), std::string::npos) << r.output;
  std::ifstream in(root_ + "/holders");
  std::vector<pid_t> holders;
  for (pid_t pid = 0; in >> pid;) holders.push_back(pid);
  ASSERT_EQ(holders.size(), 2u) << r.output;
  for (int i = 0; i < 2; ++i) {
    const std::string lock = dir->StorageDir(i) + "/LOCK";
    EXPECT_NE(r.output.find(absl::StrCat("storage-", i, ": stopped pid ")), std::string::npos)
        << r.output;
    EXPECT_NE(
        r.output.find(absl::StrCat(", which held ", lock, ": a process this `up` did not start")),
        std::string::npos)
        << r.output;
    EXPECT_FALSE(*DataDirLocked(dir->StorageDir(i)));
  }
  for (pid_t pid : holders) EXPECT_FALSE(Alive(pid)) << pid;
  EXPECT_FALSE(StateFileExists());
}

TEST_F(CliTest, StatusOfAnUnreachableServiceFails) {
  CommandResult r = Run({"status", "--meta", absl::StrCat("127.0.0.1:", base_)});
  EXPECT_EQ(r.exit_status, 1);
  EXPECT_NE(r.output.find("cannot reach the metadata service"), std::string::npos) << r.output;
}

TEST_F(CliTest, CkptGroupHelpAndUnknownCommands) {
  CommandResult r = Run({"ckpt"});
  EXPECT_EQ(r.exit_status, 2);
  for (const char* command : {"declare", "commit", "state", "ls", "keep", "rm"}) {
    EXPECT_NE(r.output.find(absl::StrCat("  ckpt ", command, " ")), std::string::npos)
        << command << "\n"
        << r.output;
  }
  EXPECT_EQ(Run({"ckpt", "--help"}).exit_status, 0);
  EXPECT_EQ(Run({"help", "ckpt"}).exit_status, 0);
  r = Run({"help", "ckpt", "commit"});
  EXPECT_EQ(r.exit_status, 0);
  EXPECT_NE(r.output.find("usage: ckptfs ckpt commit DIR RANK"), std::string::npos) << r.output;
  r = Run({"ckpt", "ls", "--help"});
  EXPECT_EQ(r.exit_status, 0);
  EXPECT_NE(r.output.find("usage: ckptfs ckpt ls RUN_DIR [--all]"), std::string::npos) << r.output;
  r = Run({"ckpt", "frob", "x"});
  EXPECT_EQ(r.exit_status, 2);
  EXPECT_NE(r.output.find("unknown command \"ckpt frob\""), std::string::npos) << r.output;
  r = Run({"help"});
  EXPECT_NE(r.output.find("  ckpt commit "), std::string::npos) << r.output;
}

TEST_F(CliTest, OperatorCommandsDescribeThemselves) {
  CommandResult r = Run({"help"});
  EXPECT_EQ(r.exit_status, 0);
  for (const char* name : {"ckpt show", "ckpt verify", "ckpt gc", "ckpt ls", "ckpt rm", "status"}) {
    EXPECT_NE(r.output.find(name), std::string::npos) << name << "\n" << r.output;
  }
  r = Run({"ckpt", "verify", "--help"});
  EXPECT_EQ(r.exit_status, 0);
  EXPECT_NE(r.output.find("CRC32C"), std::string::npos) << r.output;
  r = Run({"ckpt", "gc", "--help"});
  EXPECT_EQ(r.exit_status, 0);
  EXPECT_NE(r.output.find("--keep"), std::string::npos) << r.output;
  r = Run({"status", "--help"});
  EXPECT_EQ(r.exit_status, 0);
  EXPECT_NE(r.output.find("--json"), std::string::npos) << r.output;
  r = Run({"up", "--help"});
  EXPECT_NE(r.output.find("--metrics-port"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("--orphan-grace-s"), std::string::npos) << r.output;
  // verify without a service to reach: exit 1 with what to pass.
  r = Run({"ckpt", "verify", "/"});
  EXPECT_EQ(r.exit_status, 1) << r.output;
  EXPECT_NE(r.output.find("not on a ckptfs mount"), std::string::npos) << r.output;
}

TEST_F(CliTest, UnknownMetaBackendIsAUsageError) {
  CommandResult r =
      Run({"up", "--state-dir", state_, "--mountpoint", mnt_, "--meta-backend", "zookeeper"});
  EXPECT_EQ(r.exit_status, 2) << r.output;
  EXPECT_NE(r.output.find("rocksdb or etcd"), std::string::npos) << r.output;
  EXPECT_FALSE(StateFileExists());
}

TEST_F(CliTest, CkptArgumentErrorsExitWithTwoAndTouchNothing) {
  const std::string dir = root_ + "/run/step_1";
  struct Case {
    std::vector<std::string> args;
    std::string message;
  };
  const std::vector<Case> cases = {
      {{"ckpt", "declare", dir}, "missing N"},
      {{"ckpt", "declare", dir, "0"}, "N must be a number of ranks in [1, 1048576]"},
      {{"ckpt", "declare", dir, "abc"}, "got \"abc\""},
      {{"ckpt", "declare", dir, "-1"}, "got \"-1\""},
      {{"ckpt", "declare", dir, "8x"}, "got \"8x\""},
      {{"ckpt", "declare", dir, "1048577"}, "got \"1048577\""},
      {{"ckpt", "declare", dir, "4", "--timeout-s", "0"}, "--timeout-s must be"},
      {{"ckpt", "declare", dir, "4", "--timeout_s", "soon"}, "got \"soon\""},
      {{"ckpt", "declare", dir, "4", "5"}, "unexpected argument \"5\""},
      {{"ckpt", "commit", dir}, "missing RANK"},
      {{"ckpt", "commit", dir, "-1"}, "RANK must be a number in [0, 1048575]"},
      {{"ckpt", "commit", dir, "nan"}, "got \"nan\""},
      {{"ckpt", "commit", dir, "1048576"}, "got \"1048576\""},
      {{"ckpt", "state"}, "missing DIR"},
      {{"ckpt", "ls", dir, "--everything"}, "unknown flag --everything"},
      {{"ckpt", "keep", root_ + "/run", "0"}, "K must be a number"},
      {{"ckpt", "rm", "/"}, "DIR must name a checkpoint directory"},
  };
  for (const Case& c : cases) {
    CommandResult r = Run(c.args);
    EXPECT_EQ(r.exit_status, 2) << absl::StrJoin(c.args, " ") << "\n" << r.output;
    EXPECT_NE(r.output.find(c.message), std::string::npos) << absl::StrJoin(c.args, " ") << "\n"
                                                           << r.output;
    EXPECT_NE(r.output.find("usage: ckptfs ckpt "), std::string::npos) << r.output;
  }
  EXPECT_FALSE(std::filesystem::exists(root_ + "/run"));
}

TEST_F(CliTest, CkptOffAMountFailsClearly) {
  // A plain directory would take the attributes and "commit" at once; the
  // command refuses instead of pretending.
  const std::string dir = root_ + "/plain/step_1";
  CommandResult r = Run({"ckpt", "declare", dir, "2"});
  EXPECT_EQ(r.exit_status, 1) << r.output;
  EXPECT_NE(r.output.find("is not on a ckptfs mount"), std::string::npos) << r.output;
  EXPECT_FALSE(std::filesystem::exists(dir));
  std::filesystem::create_directories(dir);
  r = Run({"ckpt", "commit", dir, "0"});
  EXPECT_EQ(r.exit_status, 1) << r.output;
  EXPECT_NE(r.output.find("is not on a ckptfs mount"), std::string::npos) << r.output;
  r = Run({"ckpt", "commit", root_ + "/missing", "0"});
  EXPECT_EQ(r.exit_status, 1) << r.output;
  EXPECT_NE(r.output.find("No such file or directory (ENOENT)"), std::string::npos) << r.output;
  r = Run({"ckpt", "state", dir});
  EXPECT_EQ(r.exit_status, 1) << r.output;
  EXPECT_NE(r.output.find("is not a checkpoint"), std::string::npos) << r.output;
  r = Run({"ckpt", "ls", root_ + "/plain"});
  EXPECT_EQ(r.exit_status, 0) << r.output;
  EXPECT_NE(r.output.find("no committed checkpoints"), std::string::npos) << r.output;
}

// `ckpt ls` and `ckpt state` only read attributes; a plain directory given
// the attributes a mount would serve shows how they are formatted.
TEST_F(CliTest, CkptLsAndStateFormatTheMountsAttributes) {
  const std::string run = root_ + "/run";
  std::filesystem::create_directories(run + "/step_2");
  const int64_t now_ms = absl::ToUnixMillis(absl::Now());
  const std::string list = absl::StrCat(
      "name=step_1 state=committed ranks=4 arrived=4 files=8 bytes=3145728 declared_ms=",
      now_ms - 3'600'000, " first_commit_ms=", now_ms - 3'000'000, " ended_ms=", now_ms - 1'830'000,
      " timeout_s=600 errno=0 reason=\n",
      "name=step_2 state=aborted ranks=4 arrived=3 files=0 bytes=0 declared_ms=",
      now_ms - 1'000'000, " first_commit_ms=", now_ms - 900'000, " ended_ms=", now_ms - 630'000,
      " timeout_s=30 errno=110 reason=rank 3 did not commit within 30 s\n",
      "name=step_3 state=pending ranks=4 arrived=1 files=0 bytes=0 declared_ms=",
      now_ms - 19'800'000, " first_commit_ms=0 ended_ms=0 timeout_s=600 errno=0 reason=\n");
  // Ages far from a unit's edge (30m, 10m, 5h) read the same for 30 s.
  if (::setxattr(run.c_str(), "user.ckptfs.checkpoints", list.data(), list.size(), 0) != 0) {
    GTEST_SKIP() << "no user xattrs on " << root_ << ": " << strerror(errno);
  }
  ASSERT_EQ(::setxattr(run.c_str(), "user.ckptfs.latest", "step_1", 6, 0), 0);
  const std::string info = list.substr(list.find("name=step_2"),
                                       list.find("name=step_3") - list.find("name=step_2") - 1);
  ASSERT_EQ(::setxattr((run + "/step_2").c_str(), "user.ckptfs.info", info.data(), info.size(), 0),
            0);

  CommandResult r = Run({"ckpt", "ls", run});
  EXPECT_EQ(r.exit_status, 0) << r.output;
  EXPECT_NE(r.output.find("NAME    STATE      RANKS  SIZE     AGE"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("step_1  committed  4/4    3.0 MiB  30m  latest"), std::string::npos)
      << r.output;
  EXPECT_EQ(r.output.find("step_2"), std::string::npos) << r.output;
  EXPECT_EQ(r.output.find("step_3"), std::string::npos) << r.output;

  r = Run({"ckpt", "ls", run, "--all"});
  EXPECT_EQ(r.exit_status, 0) << r.output;
  EXPECT_NE(r.output.find("step_2  aborted    3/4    0 B      10m  Connection timed out "
                          "(ETIMEDOUT): rank 3 did not commit within 30 s"),
            std::string::npos)
      << r.output;
  EXPECT_NE(r.output.find("step_3  pending    1/4    -        5h"), std::string::npos) << r.output;

  r = Run({"ckpt", "state", run + "/step_2"});
  EXPECT_EQ(r.exit_status, 0) << r.output;
  EXPECT_EQ(r.output.substr(0, 8), "aborted\n") << r.output;
  EXPECT_NE(r.output.find("ranks         3/4 arrived"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("error         Connection timed out (ETIMEDOUT): rank 3"),
            std::string::npos)
      << r.output;
}

TEST_F(CliTest, CkptLatestNameChecksItsArgumentsAndNeedsAMount) {
  CommandResult r = Run({"ckpt"});
  EXPECT_NE(r.output.find("  ckpt latest-name "), std::string::npos) << r.output;
  r = Run({"ckpt", "latest-name", "--help"});
  EXPECT_EQ(r.exit_status, 0) << r.output;
  EXPECT_NE(r.output.find("usage: ckptfs ckpt latest-name RUN_DIR"), std::string::npos) << r.output;
  const std::string run = root_ + "/run";
  std::filesystem::create_directories(run);
  struct Case {
    std::vector<std::string> args;
    std::string message;
  };
  const std::vector<Case> cases = {
      {{"ckpt", "latest-name", run, "--set", "a/b"}, "NAME must be a file name"},
      {{"ckpt", "latest-name", run, "--set", ".."}, "NAME must be a file name"},
      {{"ckpt", "latest-name", run, "--set", ""}, "--none keeps no symlink"},
      {{"ckpt", "latest-name", run, "--none", "--default"}, "at most one of"},
      {{"ckpt", "latest-name", run, "--set", "x", "--none"}, "at most one of"},
      {{"ckpt", "latest-name"}, "missing RUN_DIR"},
  };
  for (const Case& c : cases) {
    r = Run(c.args);
    EXPECT_EQ(r.exit_status, 2) << absl::StrJoin(c.args, " ") << "\n" << r.output;
    EXPECT_NE(r.output.find(c.message), std::string::npos) << absl::StrJoin(c.args, " ") << "\n"
                                                           << r.output;
  }
  // A plain directory would just store the attribute: refused, not set.
  r = Run({"ckpt", "latest-name", run, "--set", "ptr"});
  EXPECT_EQ(r.exit_status, 1) << r.output;
  EXPECT_NE(r.output.find("is not on a ckptfs mount"), std::string::npos) << r.output;
  char value[64];
  EXPECT_LT(::getxattr(run.c_str(), "user.ckptfs.latest_name", value, sizeof(value)), 0);
}

TEST_F(CliTest, CkptLsAndStateShowACheckpointBeingRemoved) {
  const std::string run = root_ + "/run";
  std::filesystem::create_directories(run + "/step_1");
  const int64_t now_ms = absl::ToUnixMillis(absl::Now());
  const std::string line = absl::StrCat(
      "name=step_1 state=removing ranks=2 arrived=2 files=4 bytes=3145728 declared_ms=",
      now_ms - 3'600'000, " first_commit_ms=", now_ms - 3'000'000, " ended_ms=", now_ms - 1'830'000,
      " timeout_s=600 errno=0 ino=7 removing_ms=", now_ms - 630'000, " reason=\n");
  if (::setxattr(run.c_str(), "user.ckptfs.checkpoints", line.data(), line.size(), 0) != 0) {
    GTEST_SKIP() << "no user xattrs on " << root_ << ": " << strerror(errno);
  }
  ASSERT_EQ(
      ::setxattr((run + "/step_1").c_str(), "user.ckptfs.info", line.data(), line.size() - 1, 0),
      0);
  CommandResult r = Run({"ckpt", "ls", run});
  EXPECT_EQ(r.exit_status, 0) << r.output;
  EXPECT_NE(r.output.find("no committed checkpoints"), std::string::npos) << r.output;
  r = Run({"ckpt", "ls", run, "--all"});
  EXPECT_EQ(r.exit_status, 0) << r.output;
  EXPECT_NE(r.output.find("step_1  removing  2/2    -     30m  names in it were removed; no "
                          "longer valid"),
            std::string::npos)
      << r.output;
  r = Run({"ckpt", "state", run + "/step_1"});
  EXPECT_EQ(r.exit_status, 0) << r.output;
  EXPECT_EQ(r.output.substr(0, 9), "removing\n") << r.output;
  EXPECT_NE(r.output.find("since 10m ago (a name in it was removed; no longer valid)"),
            std::string::npos)
      << r.output;
}

}  // namespace
}  // namespace ckptfs::tools
