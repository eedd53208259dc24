// Tests of spawning, watching and stopping daemons (tools/process.h), with
// shell scripts standing in for the daemons.
#include "tools/process.h"

#include <signal.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>

#include "absl/status/status.h"
#include "absl/strings/match.h"
#include "absl/time/clock.h"
#include "gtest/gtest.h"

namespace ckptfs::tools {
namespace {

class ProcessTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char pattern[] = "/tmp/ckptfs-process-test-XXXXXX";
    dir_ = ::mkdtemp(pattern);
  }
  void TearDown() override {
    for (pid_t pid : started_) {
      // Only a child nobody has reaped (StopProcesses reaps those it stops):
      // a reaped one's pid may name another process by now.
      if (::waitpid(pid, nullptr, WNOHANG) != 0) continue;
      ::kill(pid, SIGKILL);
      (void)::waitpid(pid, nullptr, 0);
    }
    std::error_code ec;
    std::filesystem::remove_all(dir_, ec);
  }
  std::string Script(const std::string& name, const std::string& body) {
    const std::string path = dir_ + "/" + name;
    std::ofstream(path) << "#!/bin/sh\n" << body << "\n";
    ::chmod(path.c_str(), 0755);
    return path;
  }
  ProcessRecord Spawn(const std::vector<std::string>& argv) {
    auto record = SpawnDetached(argv, dir_ + "/test.log");
    EXPECT_TRUE(record.ok()) << record.status();
    if (!record.ok()) return {};
    started_.push_back(record->pid);
    return *record;
  }
  std::string ReadLog() {
    std::ifstream in(dir_ + "/test.log");
    return std::string(std::istreambuf_iterator<char>(in), {});
  }

  std::string dir_;
  std::vector<pid_t> started_;
};

TEST_F(ProcessTest, SpawnsDetachedWithLogAndRecord) {
  const ProcessRecord record = Spawn({"/bin/sleep", "30"});
  ASSERT_GT(record.pid, 0);
  EXPECT_TRUE(IsRunning(record));
  EXPECT_EQ(::getsid(record.pid), record.pid);  // its own session
  EXPECT_NE(record.exe.find("sleep"), std::string::npos) << record.exe;
  EXPECT_EQ(*ProcessStartTime(record.pid), record.start_time);
  EXPECT_FALSE(ReapIfExited(record.pid).has_value());
  EXPECT_NE(ReadLog().find("ckptfs: starting /bin/sleep 30"), std::string::npos);
}

TEST_F(ProcessTest, OutputGoesToTheLogAndExitIsReported) {
  const ProcessRecord record =
      Spawn({Script("fail.sh", "echo \"daemon says: bad flag $1\" >&2; exit 3"), "--x"});
  std::optional<std::string> how;
  for (int i = 0; i < 100 && !how; ++i) {
    how = ReapIfExited(record.pid);
    if (!how) absl::SleepFor(absl::Milliseconds(20));
  }
  ASSERT_TRUE(how.has_value());
  EXPECT_EQ(*how, "exited with status 3");
  EXPECT_NE(ReadLog().find("daemon says: bad flag --x"), std::string::npos);
  EXPECT_NE(TailFile(dir_ + "/test.log", 1).find("daemon says"), std::string::npos);
}

TEST_F(ProcessTest, ExecFailureIsAnError) {
  auto record = SpawnDetached({dir_ + "/no-such-binary"}, dir_ + "/test.log");
  ASSERT_FALSE(record.ok());
  EXPECT_NE(record.status().message().find("no-such-binary"), std::string::npos);
}

TEST_F(ProcessTest, StopsWithSigtermAndKillsStragglers) {
  const ProcessRecord polite = Spawn({"/bin/sleep", "30"});
  const ProcessRecord stubborn = Spawn(
      {Script("stubborn.sh", "trap '' TERM; touch \"$0.ready\"; while :; do sleep 0.1; done")});
  // The trap is installed once the script says so.
  const std::string ready = dir_ + "/stubborn.sh.ready";
  for (int i = 0; i < 3000 && ::access(ready.c_str(), F_OK) != 0; ++i) {
    absl::SleepFor(absl::Milliseconds(10));
  }
  ASSERT_EQ(::access(ready.c_str(), F_OK), 0) << "the script never started";
  std::vector<StopOutcome> outcomes = StopProcesses({polite, stubborn}, absl::Milliseconds(500));
  ASSERT_EQ(outcomes.size(), 2u);
  EXPECT_EQ(outcomes[0], StopOutcome::kTerminated);
  EXPECT_EQ(outcomes[1], StopOutcome::kKilled);
  EXPECT_FALSE(IsRunning(polite));
  EXPECT_FALSE(IsRunning(stubborn));
  // Stopping again finds nothing to do.
  outcomes = StopProcesses({polite}, absl::Milliseconds(100));
  EXPECT_EQ(outcomes[0], StopOutcome::kNotRunning);
}

TEST_F(ProcessTest, NeverSignalsAProcessThatIsNotTheRecordedOne) {
  const ProcessRecord record = Spawn({"/bin/sleep", "30"});
  ProcessRecord recycled = record;
  recycled.start_time += 1;  // same pid, different process
  ProcessRecord other_exe = record;
  other_exe.exe = "/usr/bin/ckptfs-meta";
  EXPECT_FALSE(IsRunning(recycled));
  EXPECT_FALSE(IsRunning(other_exe));
  EXPECT_EQ(MatchRecord(record), RecordMatch::kSame);
  EXPECT_EQ(MatchRecord(recycled), RecordMatch::kOtherProcess);
  EXPECT_EQ(MatchRecord(other_exe), RecordMatch::kOtherExecutable);
  std::vector<StopOutcome> outcomes = StopProcesses({recycled, other_exe}, absl::Milliseconds(100));
  EXPECT_EQ(outcomes[0], StopOutcome::kNotRunning);
  // Not signalled, but not reported gone either: it started when recorded,
  // so `down` must not claim it stopped (it did, and left daemons running).
  EXPECT_EQ(outcomes[1], StopOutcome::kNotVerified);
  EXPECT_TRUE(IsRunning(record));  // untouched
}

// An older `up` could record the exe of ckptfs itself (read before the
// child's exec had completed). Same pid and start time with the caller's
// own image as the recorded exe is that record, and matches.
TEST_F(ProcessTest, ARecordNamingTheCallersImageIsTheRecordOfTheOldSpawnRace) {
  const ProcessRecord record = Spawn({"/bin/sleep", "30"});
  char self[4096];
  const ssize_t n = ::readlink("/proc/self/exe", self, sizeof(self) - 1);
  ASSERT_GT(n, 0);
  ProcessRecord racy = record;
  racy.exe.assign(self, static_cast<size_t>(n));
  EXPECT_EQ(MatchRecord(racy), RecordMatch::kSame);
  ProcessRecord racy_recycled = racy;
  racy_recycled.start_time += 1;
  EXPECT_EQ(MatchRecord(racy_recycled), RecordMatch::kOtherProcess);
  std::vector<StopOutcome> outcomes = StopProcesses({racy}, absl::Seconds(5));
  EXPECT_EQ(outcomes[0], StopOutcome::kTerminated);
  EXPECT_FALSE(IsRunning(record));
}

// A child that is gone without a trace while its start is awaited (reaped
// elsewhere) is reported as exited during start-up, at once, and not as an
// exec that never completed (whose handling would SIGKILL its pid).
TEST_F(ProcessTest, AChildReapedElsewhereDuringStartUpIsReportedAsExited) {
  const pid_t pid = ::fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) ::_exit(0);
  ASSERT_EQ(::waitpid(pid, nullptr, 0), pid);  // "elsewhere": before the wait below
  const absl::Time start = absl::Now();
  absl::StatusOr<ProcessRecord> record = AwaitSpawnedExec(pid, "stand-in", absl::Seconds(5));
  EXPECT_LT(absl::Now() - start, absl::Seconds(1));
  ASSERT_FALSE(record.ok());
  EXPECT_TRUE(absl::IsUnavailable(record.status())) << record.status();
  EXPECT_TRUE(absl::StrContains(record.status().message(), "exited during start-up"))
      << record.status();
}

// A child whose exec never completes (this one never execs) is killed once
// the limit has passed: it is still our unreaped child, so its pid is its.
TEST_F(ProcessTest, AnExecThatNeverCompletesIsKilledAfterTheLimit) {
  const pid_t pid = ::fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) {
    while (true) ::pause();
  }
  absl::StatusOr<ProcessRecord> record = AwaitSpawnedExec(pid, "stand-in", absl::Milliseconds(300));
  ASSERT_FALSE(record.ok());
  EXPECT_TRUE(absl::IsDeadlineExceeded(record.status())) << record.status();
  int status = 0;
  pid_t r = 0;
  for (int i = 0; i < 200 && (r = ::waitpid(pid, &status, WNOHANG)) == 0; ++i) {
    absl::SleepFor(absl::Milliseconds(10));
  }
  if (r == 0) {
    ::kill(pid, SIGKILL);
    (void)::waitpid(pid, nullptr, 0);
    FAIL() << "the child was left running";
  }
  if (r == pid) {
    EXPECT_TRUE(WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL) << status;
  } else {
    EXPECT_EQ(errno, ECHILD);  // reaped by AwaitSpawnedExec
  }
}

TEST_F(ProcessTest, TheRecordNamesTheStartedImageNotTheCaller) {
  // posix_spawn may return before the child's exec has installed its image,
  // while /proc/<pid>/exe still names this test binary. Whether a spawn hits
  // that window depends on the scheduler, so try a few.
  char self[4096];
  const ssize_t n = ::readlink("/proc/self/exe", self, sizeof(self) - 1);
  ASSERT_GT(n, 0);
  const std::string own_exe(self, static_cast<size_t>(n));
  const std::string sleep_exe = std::filesystem::canonical("/bin/sleep").string();
  for (int i = 0; i < 20; ++i) {
    const ProcessRecord record = Spawn({"/bin/sleep", "30"});
    ASSERT_NE(record.exe, own_exe);
    ASSERT_EQ(record.exe, sleep_exe);
    ASSERT_EQ(*ProcessStartTime(record.pid), record.start_time);
    ASSERT_TRUE(IsRunning(record));
    ::kill(record.pid, SIGKILL);
  }
}

TEST_F(ProcessTest, ZombieCountsAsExited) {
  const ProcessRecord record = Spawn({"/bin/sh", "-c", "exit 0"});
  // Not reaped yet: wait until it is a zombie.
  for (int i = 0; i < 100 && IsRunning(record); ++i) absl::SleepFor(absl::Milliseconds(20));
  EXPECT_FALSE(IsRunning(record));
}

TEST(RunCommandTest, CapturesOutputAndStatus) {
  auto result = RunCommand({"/bin/sh", "-c", "echo out; echo err >&2; exit 4"});
  ASSERT_TRUE(result.ok());
  EXPECT_EQ(result->exit_status, 4);
  EXPECT_NE(result->output.find("out"), std::string::npos);
  EXPECT_NE(result->output.find("err"), std::string::npos);
  EXPECT_FALSE(RunCommand({"/nonexistent/binary"}).ok());
}

}  // namespace
}  // namespace ckptfs::tools
