// Authentication on a real cluster (LocalCluster, which requires its
// credential by default): callers without the credential, or with another
// one, are refused on the metadata path (UNAUTHENTICATED) and on the data
// path (EACCES, connection closed), each refusal logged once by the daemon
// that refused it, and the cluster goes on serving those that present it;
// the client credential cannot register a storage server or heartbeat for
// one, and no credential takes a server's identity without the secret in
// its data directory;
// the right credential works end to end through a mount; a credential file
// other users may read stops a daemon at start; a stranger opening 10,000
// data connections in a loop does not stop four writers' saves; and on a
// mount, permission bits hold against another user (as root: a child that
// setuid()s to nobody).
#include <fcntl.h>
#include <grpcpp/grpcpp.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <limits>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "client/client.h"
#include "common/credential.h"
#include "common/data_connection.h"
#include "common/errno_status.h"
#include "common/tcp.h"
#include "gtest/gtest.h"
#include "proto/data.pb.h"
#include "proto/meta.grpc.pb.h"
#include "tests/integration/as_nobody.h"
#include "tests/integration/child_process.h"
#include "tests/integration/local_cluster.h"
#include "tests/integration/posix_io.h"

namespace ckptfs::testing {
namespace {

std::string ReadLog(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

size_t Count(const std::string& text, const std::string& what) {
  size_t n = 0;
  for (size_t at = text.find(what); at != std::string::npos; at = text.find(what, at + 1)) ++n;
  return n;
}

// How many descriptors process `pid` has open; the most a size_t holds
// when they cannot be counted (so that a check of the count fails).
size_t OpenDescriptors(pid_t pid) {
  std::error_code error;
  std::filesystem::directory_iterator it("/proc/" + std::to_string(pid) + "/fd", error);
  if (error) return std::numeric_limits<size_t>::max();
  return static_cast<size_t>(std::distance(it, std::filesystem::directory_iterator()));
}

class AuthTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    LocalClusterOptions options;
    options.storage_servers = 2;
    auto cluster = LocalCluster::Start(options);
    ASSERT_TRUE(cluster.ok()) << cluster.status();
    cluster_ = *std::move(cluster);
    ASSERT_FALSE(cluster_->credential().empty());
  }
  static void TearDownTestSuite() { cluster_.reset(); }

  static grpc::Status ListServers(const std::shared_ptr<grpc::Channel>& channel,
                                  const std::string& credential) {
    auto stub = meta::MetaService::NewStub(channel);
    grpc::ClientContext context;
    context.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(10));
    AttachCredential(context, credential);
    meta::Empty request;
    meta::ListServersReply reply;
    return stub->ListServers(&context, request, &reply);
  }

  static HostPort Storage(int i) { return *ParseHostPort(cluster_->storage_address(i)); }

  static absl::Status Ping(DataConnection& c) {
    data::RequestHeader ping;
    ping.set_op(data::PING);
    return c.Call(ping, nullptr, 0, nullptr, 0).status();
  }

  static std::unique_ptr<LocalCluster> cluster_;
};

std::unique_ptr<LocalCluster> AuthTest::cluster_;

TEST_F(AuthTest, MetadataCallsWithoutTheCredentialAreRefusedAndLoggedOncePerPeer) {
  const std::string meta_log = cluster_->root() + "/meta.log";
  const size_t logged_before = Count(ReadLog(meta_log), "refused metadata calls from");
  auto channel = grpc::CreateChannel(cluster_->meta_address(), grpc::InsecureChannelCredentials());
  for (int i = 0; i < 5; ++i) {
    const grpc::Status status = ListServers(channel, "");
    EXPECT_EQ(status.error_code(), grpc::StatusCode::UNAUTHENTICATED);
    EXPECT_EQ(status.error_details(), absl::StrCat(EACCES));
    EXPECT_TRUE(absl::StrContains(status.error_message(), "--credential_file"))
        << status.error_message();
  }
  const grpc::Status wrong = ListServers(channel, std::string(64, 'a'));
  EXPECT_EQ(wrong.error_code(), grpc::StatusCode::UNAUTHENTICATED);
  // Six refusals on one connection (one peer): one log line.
  const std::string log = ReadLog(meta_log);
  EXPECT_EQ(Count(log, "refused metadata calls from"), logged_before + 1) << log;
  EXPECT_TRUE(absl::StrContains(log, "no credential presented")) << log;
  // The service goes on serving callers that present it.
  EXPECT_TRUE(ListServers(channel, cluster_->credential()).ok());
}

TEST_F(AuthTest, TheClientCredentialCannotPoseAsAStorageServer) {
  auto stub = meta::MetaService::NewStub(
      grpc::CreateChannel(cluster_->meta_address(), grpc::InsecureChannelCredentials()));
  auto call = [&](const std::string& credential, auto rpc) {
    grpc::ClientContext context;
    context.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(10));
    AttachCredential(context, credential);
    return rpc(context);
  };
  meta::ListServersReply before;
  ASSERT_TRUE(call(cluster_->credential(), [&](grpc::ClientContext& c) {
                return stub->ListServers(&c, meta::Empty(), &before);
              }).ok());
  ASSERT_GE(before.servers_size(), 1);
  const meta::ServerInfo victim = before.servers(0);

  // A mount's credential: refused before anything happens.
  meta::RegisterServerRequest impostor;
  impostor.set_uuid(victim.uuid());
  impostor.set_address("127.0.0.1:1");
  impostor.set_capacity_bytes(1ull << 40);
  meta::RegisterServerReply registered;
  grpc::Status status = call(cluster_->credential(), [&](grpc::ClientContext& c) {
    return stub->RegisterServer(&c, impostor, &registered);
  });
  EXPECT_EQ(status.error_code(), grpc::StatusCode::PERMISSION_DENIED) << status.error_message();
  meta::HeartbeatRequest heartbeat;
  heartbeat.set_server_id(victim.id());
  meta::Empty empty;
  status = call(cluster_->credential(),
                [&](grpc::ClientContext& c) { return stub->Heartbeat(&c, heartbeat, &empty); });
  EXPECT_EQ(status.error_code(), grpc::StatusCode::PERMISSION_DENIED) << status.error_message();

  // Even the server credential cannot take a server's identity without the
  // secret in that server's data directory.
  status = call(cluster_->server_credential(), [&](grpc::ClientContext& c) {
    return stub->RegisterServer(&c, impostor, &registered);
  });
  EXPECT_EQ(status.error_details(), absl::StrCat(EPERM)) << status.error_message();

  meta::ListServersReply after;
  ASSERT_TRUE(call(cluster_->credential(), [&](grpc::ClientContext& c) {
                return stub->ListServers(&c, meta::Empty(), &after);
              }).ok());
  ASSERT_EQ(after.servers_size(), before.servers_size());
  EXPECT_EQ(after.servers(0).address(), victim.address());
  EXPECT_EQ(after.servers(0).capacity_bytes(), victim.capacity_bytes());
}

TEST_F(AuthTest, ClientWithoutTheCredentialIsToldWhatToGive) {
  client::ClientOptions options;
  options.meta_address = cluster_->meta_address();
  options.credential_file = "";  // not the cluster's ($CKPTFS_CREDENTIAL_FILE)
  options.rpc_timeout = absl::Seconds(10);
  auto refused = client::Client::Connect(options);
  ASSERT_FALSE(refused.ok());
  EXPECT_EQ(ErrnoFromStatus(refused.status()), EACCES) << refused.status();
  EXPECT_TRUE(absl::StrContains(refused.status().message(), "--credential_file"))
      << refused.status();
  // The default: $CKPTFS_CREDENTIAL_FILE, which LocalCluster exports.
  client::ClientOptions with;
  with.meta_address = cluster_->meta_address();
  EXPECT_EQ(with.credential_file, cluster_->credential_file());
  auto client = client::Client::Connect(with);
  ASSERT_TRUE(client.ok()) << client.status();
}

TEST_F(AuthTest, DataConnectionWithoutHelloIsRefusedClosedAndLogged) {
  for (int i = 0; i < cluster_->storage_servers(); ++i) {
    auto conn = DataConnection::Connect(Storage(i), absl::Seconds(5));
    ASSERT_TRUE(conn.ok()) << conn.status();
    const absl::Status refused = Ping(**conn);
    EXPECT_EQ(ErrnoFromStatus(refused), EACCES) << refused;
    EXPECT_TRUE(absl::StrContains(refused.message(), "--credential_file")) << refused;
    EXPECT_TRUE((*conn)->broken());
    // A wrong HELLO too.
    auto wrong = DataConnection::Connect(Storage(i), absl::Seconds(5));
    ASSERT_TRUE(wrong.ok());
    EXPECT_EQ(ErrnoFromStatus(PresentCredential(**wrong, "not-the-credential")), EACCES);
    // The server logs each refused connection once, naming the peer.
    const std::string log = ReadLog(absl::StrCat(cluster_->root(), "/storage-", i, ".log"));
    EXPECT_GE(Count(log, "refused a data connection from 127.0.0.1:"), 2u) << log;
    EXPECT_TRUE(absl::StrContains(log, "not this cluster's")) << log;
    // And serves a connection that presents the credential.
    auto good = DataConnection::Connect(Storage(i), absl::Seconds(5));
    ASSERT_TRUE(good.ok());
    ASSERT_TRUE(PresentCredential(**good, cluster_->credential()).ok());
    EXPECT_TRUE(Ping(**good).ok());
  }
}

TEST_F(AuthTest, MountWithTheCredentialWritesAndReadsWithoutItDoesNotMount) {
  absl::StatusOr<std::string> mount = cluster_->Mount("good");
  ASSERT_TRUE(mount.ok()) << mount.status();
  const std::string data = TestData(9 << 20, 7);  // several chunks, both servers
  ASSERT_TRUE(WriteWholeFile(*mount + "/file", data).ok());
  absl::StatusOr<std::string> back = ReadWholeFile(*mount + "/file");
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_TRUE(*back == data);

  absl::StatusOr<std::string> refused = cluster_->Mount("bad", {"--credential_file="});
  ASSERT_FALSE(refused.ok());
  EXPECT_TRUE(absl::StrContains(refused.status().message(), "credential")) << refused.status();
  // The good mount still works.
  back = ReadWholeFile(*mount + "/file");
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_TRUE(*back == data);
}

TEST_F(AuthTest, StrangersConnectingInALoopDoNotStopSaves) {
  // The stranger keeps every connection it opens: room for 10,000.
  rlimit nofile{};
  ASSERT_EQ(::getrlimit(RLIMIT_NOFILE, &nofile), 0);
  nofile.rlim_cur = std::max<rlim_t>(nofile.rlim_cur, 12000);
  nofile.rlim_max = std::max(nofile.rlim_max, nofile.rlim_cur);
  ASSERT_EQ(::setrlimit(RLIMIT_NOFILE, &nofile), 0) << std::strerror(errno);

  // The stranger connects in a loop until the saves are done and it made
  // 10,000 attempts, holding its newest 10,000 connections. It pauses after
  // the first 10,000 while the test counts the servers' descriptors.
  std::atomic<int> attempts{0};
  std::atomic<bool> counted{false};
  std::atomic<bool> saves_done{false};
  std::vector<UniqueFd> held(10000);
  std::thread stranger([&] {
    for (int i = 0; i < 10000 || !saves_done.load(); ++i) {
      if (i == 10000) {
        while (!counted.load()) std::this_thread::sleep_for(std::chrono::milliseconds(1));
      }
      absl::StatusOr<UniqueFd> fd = ConnectTcp(Storage(i % 2), absl::Seconds(5));
      held[i % held.size()] = fd.ok() ? *std::move(fd) : UniqueFd();
      attempts.fetch_add(1);
    }
  });
  auto stop_stranger = [&] {
    counted = true;
    saves_done = true;
    stranger.join();
  };
  while (attempts.load() < 10000) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  // Each server soon holds a few of the stranger's connections, not
  // thousands: it pushes out the oldest beyond 32 (once its loops have
  // seen the ends of the pushed-out ones; what else a server has open is
  // under 100 descriptors). Looked at within 1.5 s, well before the HELLO
  // deadline would close them anyway.
  for (int i = 0; i < 2; ++i) {
    size_t open = 0;
    for (int tries = 0; tries < 150; ++tries) {
      open = OpenDescriptors(cluster_->storage_pid(i));
      if (open < 200) break;
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    EXPECT_LT(open, 200u) << "storage server " << i;
  }
  counted = true;
  // The mount starts, and opens its data connections, among the stranger's
  // 10,000, and the writers save while it goes on connecting.
  absl::StatusOr<std::string> mount = cluster_->Mount("storm");
  if (!mount.ok()) stop_stranger();
  ASSERT_TRUE(mount.ok()) << mount.status();
  constexpr int kWriters = 4;
  constexpr int kFiles = 6;
  std::vector<absl::Status> saved(kWriters * kFiles);
  std::vector<std::thread> writers;
  for (int w = 0; w < kWriters; ++w) {
    writers.emplace_back([&, w] {
      for (int f = 0; f < kFiles; ++f) {
        const std::string path = absl::StrCat(*mount, "/rank", w, "-", f);
        saved[w * kFiles + f] = WriteWholeFile(path, TestData(5 << 20, w * kFiles + f));
      }
    });
  }
  for (std::thread& writer : writers) writer.join();
  stop_stranger();
  EXPECT_GE(attempts.load(), 10000);
  held.clear();
  for (int i = 0; i < kWriters * kFiles; ++i) {
    const std::string path = absl::StrCat(*mount, "/rank", i / kFiles, "-", i % kFiles);
    ASSERT_TRUE(saved[i].ok()) << saved[i];
    absl::StatusOr<std::string> back = ReadWholeFile(path);
    ASSERT_TRUE(back.ok()) << back.status();
    EXPECT_TRUE(*back == TestData(5 << 20, i)) << path;
  }
  ASSERT_TRUE(cluster_->Unmount(*mount).ok());
}

TEST_F(AuthTest, CredentialFileOthersCanReadStopsEveryDaemonAtStart) {
  const std::string open_file = cluster_->root() + "/open-credential";
  { std::ofstream(open_file) << cluster_->credential() << "\n"; }
  ASSERT_EQ(::chmod(open_file.c_str(), 0644), 0);
  struct Case {
    std::vector<std::string> argv;
    std::string log;
  };
  const std::string dir = cluster_->root();
  const std::vector<Case> cases = {
      {{BinDir() + "/ckptfs-meta", "--listen=127.0.0.1:0", "--data_dir=" + dir + "/m2",
        "--credential_file=" + open_file},
       dir + "/meta2.log"},
      {{BinDir() + "/ckptfs-storage", "--listen=127.0.0.1:1", "--data_dir=" + dir + "/s2",
        "--credential_file=" + open_file},
       dir + "/storage2.log"},
      {{BinDir() + "/ckptfs-fuse", "--meta=" + cluster_->meta_address(), "--mountpoint=" + dir,
        "--foreground", "--credential_file=" + open_file},
       dir + "/fuse2.log"},
  };
  for (const Case& c : cases) {
    auto child = ChildProcess::Start(c.argv, c.log);
    ASSERT_TRUE(child.ok()) << child.status();
    const std::optional<int> status = (*child)->Wait(absl::Seconds(30));
    ASSERT_TRUE(status.has_value()) << c.argv[0] << " did not exit";
    EXPECT_TRUE(WIFEXITED(*status) && WEXITSTATUS(*status) != 0) << c.argv[0];
    const std::string log = ReadLog(c.log);
    EXPECT_TRUE(absl::StrContains(log, "chmod 600")) << c.argv[0] << ": " << log;
  }
}

TEST_F(AuthTest, PermissionBitsHoldAgainstAnotherUserOnTheMount) {
  if (::geteuid() != 0) GTEST_SKIP() << "needs root (to setuid to another user)";
  // Other users must reach the mountpoint at all.
  ASSERT_EQ(::chmod(cluster_->root().c_str(), 0755), 0);
  absl::StatusOr<std::string> mount = cluster_->Mount("shared");
  ASSERT_TRUE(mount.ok()) << mount.status();
  const std::string secret = *mount + "/secret.pt";
  const std::string shared = *mount + "/shared.pt";
  ASSERT_TRUE(WriteWholeFile(secret, "root's weights").ok());
  ASSERT_TRUE(WriteWholeFile(shared, "readable weights").ok());
  ASSERT_EQ(::chmod(secret.c_str(), 0600), 0);
  ASSERT_EQ(::chmod(shared.c_str(), 0644), 0);
  ASSERT_EQ(::chmod(mount->c_str(), 0755), 0);
  struct stat st {};
  ASSERT_EQ(::stat(secret.c_str(), &st), 0);
  EXPECT_EQ(st.st_uid, 0u);

  // 1: the 0600 file cannot be opened; 2: the 0644 one can be read; 3: but
  // not opened for writing; 4: nor can the root-owned directory take a file.
  // (Everything the child touches is prepared before the fork.)
  const std::string created = *mount + "/new.pt";
  const ssize_t shared_size = static_cast<ssize_t>(std::string("readable weights").size());
  const int code = AsNobody([&]() -> int {
    if (::open(secret.c_str(), O_RDONLY) >= 0 || errno != EACCES) return 1;
    const int fd = ::open(shared.c_str(), O_RDONLY);
    if (fd < 0) return 2;
    char buf[64];
    const ssize_t n = ::read(fd, buf, sizeof(buf));
    ::close(fd);
    if (n != shared_size) return 2;
    if (::open(shared.c_str(), O_WRONLY) >= 0 || errno != EACCES) return 3;
    if (::open(created.c_str(), O_WRONLY | O_CREAT, 0644) >= 0 || errno != EACCES) return 4;
    return 0;
  });
  EXPECT_EQ(code, 0) << "1: opened a 0600 file of root; 2: could not read a 0644 one; "
                        "3: opened a 0644 file of root for writing; 4: created a file in "
                        "root's 0755 directory; -1: the child could not become uid 65534";

  // A directory the other user owns: files it creates there are its own.
  const std::string theirs = *mount + "/nobody";
  const std::string mine = theirs + "/mine.pt";
  ASSERT_EQ(::mkdir(theirs.c_str(), 0755), 0);
  ASSERT_EQ(::chown(theirs.c_str(), kNobody, kNobody), 0);
  EXPECT_EQ(AsNobody([&]() -> int {
              const int fd = ::open(mine.c_str(), O_WRONLY | O_CREAT, 0600);
              if (fd < 0) return 1;
              ::close(fd);
              return 0;
            }),
            0);
  ASSERT_EQ(::stat(mine.c_str(), &st), 0);
  EXPECT_EQ(st.st_uid, kNobody);
  EXPECT_EQ(st.st_mode & 0777, 0600u);
}

}  // namespace
}  // namespace ckptfs::testing
