// Mounting ckptfs the way operators do, through the real mount(8): `mount -t
// fuse.ckptfs META DIR -o ...`, an /etc/fstab line (a private fstab given to
// `mount -T`), `umount DIR`, a config file overridden by mount options, and
// the helper's errors reaching the user.
//
// mount(8) looks for helpers only in /sbin, so each test links
// /sbin/mount.fuse.ckptfs to this build's helper for its duration (and only
// when no other helper is installed there); the tests hold one CTest
// RESOURCE_LOCK so they never share the link. Needs root and /dev/fuse.
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <memory>
#include <string>
#include <system_error>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "gtest/gtest.h"
#include "tests/integration/local_cluster.h"
#include "tests/integration/posix_io.h"

namespace ckptfs::testing {
namespace {

constexpr char kHelperLink[] = "/sbin/mount.fuse.ckptfs";

// /sbin/mount.fuse.ckptfs -> this build's helper while alive; removed again
// only if this object created it.
class HelperLink {
 public:
  // Empty `skip_reason()` when the link is usable.
  HelperLink() {
    const std::string ours = BinDir() + "/mount.fuse.ckptfs";
    std::error_code ec;
    const std::filesystem::path existing = std::filesystem::read_symlink(kHelperLink, ec);
    if (!ec) {
      if (existing == ours) return;
      skip_reason_ = absl::StrCat(kHelperLink, " already links to ", existing.string(),
                                  "; not replacing an installed helper");
      return;
    }
    if (std::filesystem::exists(kHelperLink, ec)) {
      skip_reason_ = absl::StrCat(kHelperLink, " is an installed helper; not replacing it");
      return;
    }
    if (symlink(ours.c_str(), kHelperLink) != 0) {
      skip_reason_ = absl::StrCat("cannot link ", kHelperLink, ": ", std::strerror(errno));
      return;
    }
    created_ = true;
  }
  ~HelperLink() {
    if (created_) unlink(kHelperLink);
  }
  const std::string& skip_reason() const { return skip_reason_; }

 private:
  std::string skip_reason_;
  bool created_ = false;
};

// The ckptfs-fuse daemon serving `mountpoint` (started by mount(8) through
// the helper, so not our child): found by its unique --mountpoint argument.
pid_t FindDaemon(const std::string& mountpoint) {
  const std::string needle = absl::StrCat("--mountpoint=", mountpoint);
  std::error_code ec;
  for (const auto& entry : std::filesystem::directory_iterator("/proc", ec)) {
    const std::string name = entry.path().filename().string();
    if (name.find_first_not_of("0123456789") != std::string::npos) continue;
    std::ifstream in(entry.path() / "cmdline", std::ios::binary);
    std::string cmdline((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    for (char& c : cmdline) c = c == '\0' ? ' ' : c;
    if (absl::StrContains(cmdline, "ckptfs-fuse") &&
        absl::StrContains(cmdline + " ", needle + " ")) {
      return static_cast<pid_t>(std::stol(name));
    }
  }
  return 0;
}

// True once `pid` is gone (or a zombie nobody reaps in a container).
bool Exited(pid_t pid) {
  if (kill(pid, 0) != 0) return errno == ESRCH;
  std::ifstream stat(absl::StrCat("/proc/", pid, "/stat"));
  std::string line;
  std::getline(stat, line);
  const size_t paren = line.rfind(')');
  return paren != std::string::npos && paren + 2 < line.size() && line[paren + 2] == 'Z';
}

class MountConventionsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (geteuid() != 0) GTEST_SKIP() << "mount(8) of a FUSE filesystem needs root";
    link_ = std::make_unique<HelperLink>();
    if (!link_->skip_reason().empty()) GTEST_SKIP() << link_->skip_reason();
    LocalClusterOptions options;
    options.storage_servers = 1;
    auto cluster = LocalCluster::Start(options);
    ASSERT_TRUE(cluster.ok()) << cluster.status();
    cluster_ = *std::move(cluster);
    mountpoint_ = cluster_->root() + "/checkpoints";
    log_ = cluster_->root() + "/mount.log";
    ASSERT_TRUE(std::filesystem::create_directories(mountpoint_));
  }

  // Unmounts and ends the daemon if a test left them behind.
  void TearDown() override {
    if (cluster_ == nullptr) return;
    if (IsCkptfsMount(mountpoint_)) {
      std::string ignored;
      RunShell("umount -l " + mountpoint_, &ignored);
    }
    const pid_t pid = FindDaemon(mountpoint_);
    if (pid != 0) kill(pid, SIGKILL);
    cluster_.reset();
  }

  // Unmounts with umount(8) and expects the daemon to exit by itself.
  void UmountAndExpectDaemonGone() {
    const pid_t daemon = FindDaemon(mountpoint_);
    ASSERT_NE(daemon, 0) << "no ckptfs-fuse serving " << mountpoint_;
    std::string output;
    ASSERT_EQ(RunShell("umount " + mountpoint_, &output), 0) << output;
    EXPECT_FALSE(IsCkptfsMount(mountpoint_));
    const absl::Time deadline = absl::Now() + absl::Seconds(20);
    while (!Exited(daemon) && absl::Now() < deadline) absl::SleepFor(absl::Milliseconds(50));
    EXPECT_TRUE(Exited(daemon)) << "ckptfs-fuse " << daemon << " still running after umount";
  }

  void ExpectFileRoundTrip(const std::string& name) {
    const std::string data = TestData(3 << 20, 7);
    ASSERT_TRUE(WriteWholeFile(mountpoint_ + "/" + name, data).ok());
    absl::StatusOr<std::string> back = ReadWholeFile(mountpoint_ + "/" + name);
    ASSERT_TRUE(back.ok()) << back.status();
    EXPECT_TRUE(*back == data);
  }

  std::unique_ptr<HelperLink> link_;
  std::unique_ptr<LocalCluster> cluster_;
  std::string mountpoint_;
  std::string log_;
};

TEST_F(MountConventionsTest, MountTypeFuseCkptfsThenUmount) {
  std::string output;
  const int rc = RunShell(absl::StrCat("mount -t fuse.ckptfs ", cluster_->meta_address(), " ",
                                       mountpoint_, " -o _netdev,threads=4,log=", log_,
                                       ",credential_file=", cluster_->credential_file()),
                          &output);
  ASSERT_EQ(rc, 0) << output << cluster_->DescribeLogs();
  EXPECT_TRUE(IsCkptfsMount(mountpoint_));
  ExpectFileRoundTrip("rank_0.pt");
  UmountAndExpectDaemonGone();
  // The daemon logged to the file the options named.
  std::ifstream log(log_);
  std::string text((std::istreambuf_iterator<char>(log)), std::istreambuf_iterator<char>());
  EXPECT_TRUE(absl::StrContains(text, "fuse")) << text;
}

TEST_F(MountConventionsTest, FstabLine) {
  const std::string fstab = cluster_->root() + "/fstab";
  {
    std::ofstream out(fstab);
    out << "# a ckptfs line as in /etc/fstab\n"
        << cluster_->meta_address() << "  " << mountpoint_
        << "  fuse.ckptfs  defaults,_netdev,nofail,x-systemd.automount,log=" << log_
        << ",credential_file=" << cluster_->credential_file() << "  0  0\n";
  }
  std::string output;
  ASSERT_EQ(RunShell(absl::StrCat("mount -T ", fstab, " ", mountpoint_), &output), 0)
      << output << cluster_->DescribeLogs();
  EXPECT_TRUE(IsCkptfsMount(mountpoint_));
  ExpectFileRoundTrip("from_fstab");
  UmountAndExpectDaemonGone();
}

TEST_F(MountConventionsTest, MountOptionsOverrideTheConfigFile) {
  const std::string conf = cluster_->root() + "/fuse.conf";
  {
    std::ofstream out(conf);
    out << "# out of range on purpose: the mount option below overrides it\n"
        << "--max_background=0\n";
  }
  std::string output;
  const std::string mount = absl::StrCat("mount -t fuse.ckptfs ", cluster_->meta_address(), " ",
                                         mountpoint_, " -o log=", log_, ",config=", conf,
                                         ",credential_file=", cluster_->credential_file());
  EXPECT_NE(RunShell(mount, &output), 0) << output;
  EXPECT_TRUE(absl::StrContains(output, "max_background")) << output;
  EXPECT_FALSE(IsCkptfsMount(mountpoint_));

  output.clear();
  ASSERT_EQ(RunShell(mount + ",max_background=32", &output), 0) << output;
  EXPECT_TRUE(IsCkptfsMount(mountpoint_));
  UmountAndExpectDaemonGone();
}

// The cluster requires its credential (LocalCluster's default): a mount
// without credential_file= fails, and mount(8) prints why.
TEST_F(MountConventionsTest, MountWithoutTheCredentialFailsAndSaysWhy) {
  std::string output;
  EXPECT_NE(RunShell(absl::StrCat("mount -t fuse.ckptfs ", cluster_->meta_address(), " ",
                                  mountpoint_, " -o log=", log_),
                     &output),
            0)
      << output;
  EXPECT_TRUE(absl::StrContains(output, "credential")) << output;
  EXPECT_FALSE(IsCkptfsMount(mountpoint_));
}

TEST_F(MountConventionsTest, ErrorsReachTheUser) {
  std::string output;
  EXPECT_NE(RunShell(absl::StrCat("mount -t fuse.ckptfs ", cluster_->meta_address(), " ",
                                  mountpoint_, " -o threads"),
                     &output),
            0);
  EXPECT_TRUE(absl::StrContains(output, "threads needs a value")) << output;

  absl::StatusOr<uint16_t> port = PickFreePort();
  ASSERT_TRUE(port.ok());
  output.clear();
  EXPECT_NE(RunShell(absl::StrCat("mount -t fuse.ckptfs 127.0.0.1:", *port, " ", mountpoint_,
                                  " -o log=", log_),
                     &output),
            0);
  EXPECT_TRUE(absl::StrContains(output, absl::StrCat("127.0.0.1:", *port))) << output;
  EXPECT_FALSE(IsCkptfsMount(mountpoint_));
}

}  // namespace
}  // namespace ckptfs::testing
