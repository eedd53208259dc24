// Tests of the ckptfs-meta executable itself: its exit codes and messages
// (busy port, data dir in use, bad flags), clean shutdown on SIGTERM, and
// that a kill -9 loses nothing committed. Every child is killed by PID and
// reaped in teardown, even when a test fails.
#include <fcntl.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <fstream>
#include <optional>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include <grpcpp/grpcpp.h>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "common/tcp.h"
#include "gtest/gtest.h"
#include "proto/meta.grpc.pb.h"
#include "server/meta/keys.h"
#include "tests/meta/meta_test_util.h"

namespace ckptfs::meta {
namespace {

// A ckptfs-meta child with stderr captured to a file. Killed and reaped on
// destruction.
class MetaProcess {
 public:
  MetaProcess(const std::vector<std::string>& flags, const std::string& log_path)
      : log_path_(log_path) {
    std::vector<std::string> argv = {CKPTFS_META_BINARY};
    argv.insert(argv.end(), flags.begin(), flags.end());
    pid_ = ::fork();
    if (pid_ == 0) {
      ::prctl(PR_SET_PDEATHSIG, SIGKILL);
      int fd = ::open(log_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
      if (fd >= 0) {
        ::dup2(fd, STDERR_FILENO);
        ::dup2(fd, STDOUT_FILENO);
      }
      std::vector<char*> args;
      for (std::string& arg : argv) args.push_back(arg.data());
      args.push_back(nullptr);
      ::execv(args[0], args.data());
      ::_exit(127);
    }
  }
  MetaProcess(const MetaProcess&) = delete;
  MetaProcess& operator=(const MetaProcess&) = delete;
  ~MetaProcess() {
    if (pid_ > 0 && !exit_status_.has_value()) {
      ::kill(pid_, SIGKILL);
      int status = 0;
      ::waitpid(pid_, &status, 0);
    }
  }

  // The exit code once the process has exited within `timeout` (-signal if
  // it was killed), nullopt if it is still running.
  std::optional<int> Wait(absl::Duration timeout) {
    const absl::Time deadline = absl::Now() + timeout;
    while (!exit_status_.has_value()) {
      int status = 0;
      pid_t done = ::waitpid(pid_, &status, WNOHANG);
      if (done == pid_) {
        exit_status_ = WIFEXITED(status) ? WEXITSTATUS(status) : -WTERMSIG(status);
        break;
      }
      if (absl::Now() > deadline) break;
      absl::SleepFor(absl::Milliseconds(10));
    }
    return exit_status_;
  }

  void Signal(int signal) {
    if (!exit_status_.has_value()) ::kill(pid_, signal);
  }

  std::string Log() const {
    std::ifstream in(log_path_);
    std::stringstream text;
    text << in.rdbuf();
    return text.str();
  }

  // True once the log says "serving on", false if the process exited first
  // or `timeout` passed.
  bool WaitServing(absl::Duration timeout) {
    const absl::Time deadline = absl::Now() + timeout;
    while (absl::Now() < deadline) {
      if (absl::StrContains(Log(), "ckptfs-meta: serving on")) return true;
      if (Wait(absl::ZeroDuration()).has_value()) return false;
      absl::SleepFor(absl::Milliseconds(20));
    }
    return false;
  }

 private:
  std::string log_path_;
  pid_t pid_ = -1;
  std::optional<int> exit_status_;
};

uint16_t FreePort() {
  auto fd = ListenTcp(HostPort{"127.0.0.1", 0});
  return fd.ok() ? *LocalPort(fd->get()) : 0;
}

class MetaDaemonTest : public ::testing::Test {
 protected:
  std::vector<std::string> Flags(uint16_t port, const std::string& data_dir) {
    return {absl::StrCat("--listen=127.0.0.1:", port), "--data_dir=" + data_dir};
  }
  std::string LogPath(const std::string& name) { return dir_.path() + "/" + name + ".log"; }

  TempDir dir_;
};

TEST_F(MetaDaemonTest, ServesAndExitsCleanlyAndPromptlyOnSigterm) {
  const uint16_t port = FreePort();
  MetaProcess meta(Flags(port, dir_.path() + "/data"), LogPath("meta"));
  ASSERT_TRUE(meta.WaitServing(absl::Seconds(20))) << meta.Log();
  EXPECT_TRUE(absl::StrContains(meta.Log(), absl::StrCat("serving on 127.0.0.1:", port)));
  // A connected client (as mounts and storage servers are) must not hold up
  // the shutdown.
  auto stub = MetaService::NewStub(
      grpc::CreateChannel(absl::StrCat("127.0.0.1:", port), grpc::InsecureChannelCredentials()));
  grpc::ClientContext context;
  context.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(10));
  InodeRequest root;
  root.set_ino(kRootIno);
  AttrReply attr;
  ASSERT_TRUE(stub->GetAttr(&context, root, &attr).ok());
  EXPECT_EQ(attr.attr().type(), DIRECTORY);
  const absl::Time start = absl::Now();
  meta.Signal(SIGTERM);
  EXPECT_EQ(meta.Wait(absl::Seconds(15)), 0) << meta.Log();
  EXPECT_LT(absl::Now() - start, absl::Seconds(10));  // not a 30 s deadline
}

// Started by hand with no --replicas (or from the shipped meta.conf, which
// lists every default commented out), new files get two copies: a cluster
// survives the loss of one storage server without anyone asking for it.
TEST_F(MetaDaemonTest, NewFilesGetTwoCopiesByDefault) {
  const uint16_t port = FreePort();
  MetaProcess meta(Flags(port, dir_.path() + "/data"), LogPath("meta"));
  ASSERT_TRUE(meta.WaitServing(absl::Seconds(20))) << meta.Log();
  EXPECT_TRUE(absl::StrContains(meta.Log(), "2 replicas of each chunk")) << meta.Log();
  meta.Signal(SIGTERM);
  EXPECT_EQ(meta.Wait(absl::Seconds(15)), 0) << meta.Log();
}

TEST_F(MetaDaemonTest, BusyPortAndBusyDataDirExitWithStatusTwo) {
  auto busy = ListenTcp(HostPort{"127.0.0.1", 0});
  ASSERT_TRUE(busy.ok());
  const uint16_t busy_port = *LocalPort(busy->get());
  MetaProcess on_busy_port(Flags(busy_port, dir_.path() + "/a"), LogPath("busy-port"));
  EXPECT_EQ(on_busy_port.Wait(absl::Seconds(20)), 2) << on_busy_port.Log();
  EXPECT_TRUE(absl::StrContains(on_busy_port.Log(), absl::StrCat("127.0.0.1:", busy_port)))
      << on_busy_port.Log();

  MetaProcess first(Flags(FreePort(), dir_.path() + "/shared"), LogPath("first"));
  ASSERT_TRUE(first.WaitServing(absl::Seconds(20))) << first.Log();
  MetaProcess second(Flags(FreePort(), dir_.path() + "/shared"), LogPath("second"));
  EXPECT_EQ(second.Wait(absl::Seconds(20)), 2) << second.Log();
  EXPECT_TRUE(absl::StrContains(second.Log(), "data dir")) << second.Log();
  EXPECT_TRUE(absl::StrContains(second.Log(), "in use")) << second.Log();
}

TEST_F(MetaDaemonTest, BadChunkSizeIsRefused) {
  auto flags = Flags(FreePort(), dir_.path() + "/data");
  flags.push_back("--default_chunk_size=1000");
  MetaProcess meta(flags, LogPath("meta"));
  EXPECT_EQ(meta.Wait(absl::Seconds(20)), 1) << meta.Log();
  EXPECT_TRUE(absl::StrContains(meta.Log(), "default_chunk_size")) << meta.Log();
}

TEST_F(MetaDaemonTest, CommitTimeoutFlagIsCheckedAndApplied) {
  auto flags = Flags(FreePort(), dir_.path() + "/bad");
  flags.push_back("--commit_timeout_s=0");
  MetaProcess bad(flags, LogPath("bad"));
  EXPECT_EQ(bad.Wait(absl::Seconds(20)), 1) << bad.Log();
  EXPECT_TRUE(absl::StrContains(bad.Log(), "commit_timeout_s")) << bad.Log();

  const uint16_t port = FreePort();
  flags = Flags(port, dir_.path() + "/data");
  flags.push_back("--commit_timeout_s=7");
  MetaProcess meta(flags, LogPath("meta"));
  ASSERT_TRUE(meta.WaitServing(absl::Seconds(20))) << meta.Log();
  auto stub = MetaService::NewStub(
      grpc::CreateChannel(absl::StrCat("127.0.0.1:", port), grpc::InsecureChannelCredentials()));
  auto deadline = [] { return std::chrono::system_clock::now() + std::chrono::seconds(10); };
  grpc::ClientContext mkdir_context;
  mkdir_context.set_deadline(deadline());
  MkdirRequest mkdir;
  mkdir.set_parent(kRootIno);
  mkdir.set_name("ckpt");
  mkdir.set_mode(0755);
  AttrReply dir;
  ASSERT_TRUE(stub->Mkdir(&mkdir_context, mkdir, &dir).ok());
  grpc::ClientContext declare_context;
  declare_context.set_deadline(deadline());
  DeclareCheckpointRequest declare;
  declare.set_ino(dir.attr().ino());
  declare.set_ranks(2);
  CheckpointInfo info;
  ASSERT_TRUE(stub->DeclareCheckpoint(&declare_context, declare, &info).ok());
  EXPECT_EQ(info.timeout_s(), 7u);

  // A commit waiting in the barrier does not hold up SIGTERM; it is told
  // UNAVAILABLE without an errno, which clients retry.
  grpc::Status waited;
  std::thread rank0([&] {
    grpc::ClientContext context;
    context.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(60));
    CommitCheckpointRequest commit;
    commit.set_ino(dir.attr().ino());
    commit.set_rank(0);
    commit.set_wait_ms(50000);
    CheckpointInfo reply;
    waited = stub->CommitCheckpoint(&context, commit, &reply);
  });
  // The arrival is stored before the call waits: wait for it to show.
  for (int i = 0; i < 1000; ++i) {
    grpc::ClientContext context;
    context.set_deadline(deadline());
    InodeRequest get;
    get.set_ino(dir.attr().ino());
    CheckpointInfo now;
    if (stub->GetCheckpoint(&context, get, &now).ok() && now.arrived() == 1) break;
    absl::SleepFor(absl::Milliseconds(10));
  }
  const absl::Time start = absl::Now();
  meta.Signal(SIGTERM);
  EXPECT_EQ(meta.Wait(absl::Seconds(15)), 0) << meta.Log();
  EXPECT_LT(absl::Now() - start, absl::Seconds(10));
  rank0.join();
  EXPECT_EQ(waited.error_code(), grpc::StatusCode::UNAVAILABLE) << waited.error_message();
  EXPECT_EQ(waited.error_details(), "");
}

TEST_F(MetaDaemonTest, KillNineLosesNothingCommitted) {
  const uint16_t port = FreePort();
  const std::string data = dir_.path() + "/data";
  uint64_t dir_ino = 0;
  uint64_t file_ino = 0;
  // One copy: the one storage server registered below can hold the file.
  std::vector<std::string> flags = Flags(port, data);
  flags.push_back("--replicas=1");
  {
    MetaProcess meta(flags, LogPath("before"));
    ASSERT_TRUE(meta.WaitServing(absl::Seconds(20))) << meta.Log();
    auto stub = MetaService::NewStub(
        grpc::CreateChannel(absl::StrCat("127.0.0.1:", port), grpc::InsecureChannelCredentials()));
    auto context = [] {
      auto c = std::make_unique<grpc::ClientContext>();
      c->set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(10));
      return c;
    };
    RegisterServerRequest reg;
    reg.set_address("127.0.0.1:9");
    reg.set_uuid("u1");
    RegisterServerReply reg_reply;
    ASSERT_TRUE(stub->RegisterServer(context().get(), reg, &reg_reply).ok());
    MkdirRequest mkdir;
    mkdir.set_parent(kRootIno);
    mkdir.set_name("step-1");
    mkdir.set_mode(0755);
    AttrReply attr;
    ASSERT_TRUE(stub->Mkdir(context().get(), mkdir, &attr).ok());
    dir_ino = attr.attr().ino();
    CreateRequest create;
    create.set_parent(dir_ino);
    create.set_name("rank0.pt");
    CreateReply created;
    ASSERT_TRUE(stub->Create(context().get(), create, &created).ok());
    file_ino = created.attr().ino();
    CommitWriteRequest commit;
    commit.set_ino(file_ino);
    commit.set_size(777777);
    ASSERT_TRUE(stub->CommitWrite(context().get(), commit, &attr).ok());
    meta.Signal(SIGKILL);
    EXPECT_EQ(meta.Wait(absl::Seconds(10)), -SIGKILL);
  }
  MetaProcess meta(flags, LogPath("after"));
  ASSERT_TRUE(meta.WaitServing(absl::Seconds(20))) << meta.Log();
  auto stub = MetaService::NewStub(
      grpc::CreateChannel(absl::StrCat("127.0.0.1:", port), grpc::InsecureChannelCredentials()));
  grpc::ClientContext c1;
  c1.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(10));
  LookupRequest lookup;
  lookup.set_parent(kRootIno);
  lookup.set_name("step-1");
  AttrReply attr;
  ASSERT_TRUE(stub->Lookup(&c1, lookup, &attr).ok());
  EXPECT_EQ(attr.attr().ino(), dir_ino);
  grpc::ClientContext c2;
  c2.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(10));
  lookup.set_parent(dir_ino);
  lookup.set_name("rank0.pt");
  ASSERT_TRUE(stub->Lookup(&c2, lookup, &attr).ok());
  EXPECT_EQ(attr.attr().ino(), file_ino);
  EXPECT_EQ(attr.attr().size(), 777777u);
  meta.Signal(SIGTERM);
  EXPECT_EQ(meta.Wait(absl::Seconds(15)), 0);
}

}  // namespace
}  // namespace ckptfs::meta
