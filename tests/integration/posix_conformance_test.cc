// POSIX conformance through a real mount, as ext4 behaves: hard links
// (nlink, data kept by the other names and by an open descriptor, rename
// over and between links, `cp -al`), special files (FIFOs and Unix sockets
// usable between two processes, device nodes with mode, owner and rdev),
// the set-id bits cleared by an unprivileged write, truncate and open with
// O_TRUNC and by chown, and the ctime, mtime and nlink every operation
// sets. Each test runs on a directory of 1 copy, of 2 copies and of an
// erasure code 2+1 (the directory's user.ckptfs.replicas / user.ckptfs.ec).
//
// The mount is root's (allow_other); "another user" is a forked child that
// drops to uid and gid 65534 before acting.
#include <fcntl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <sys/xattr.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <functional>
#include <string>
#include <thread>

#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "tests/integration/as_nobody.h"
#include "tests/integration/posix_io.h"

namespace ckptfs::testing {
namespace {

struct Redundancy {
  const char* name;
  const char* xattr;  // "" for the cluster's default (1 copy)
  const char* value;
};

class PosixConformanceTest : public MountedClusterTest,
                             public ::testing::WithParamInterface<Redundancy> {
 protected:
  void SetUp() override {
    MountedClusterTest::SetUp();
    if (HasFatalFailure()) return;
    const Redundancy& redundancy = GetParam();
    if (*redundancy.xattr != '\0') {
      ASSERT_EQ(::setxattr(TestDir().c_str(), redundancy.xattr, redundancy.value,
                           std::strlen(redundancy.value), 0),
                0)
          << redundancy.xattr << ": " << std::strerror(errno);
    }
    // Other users reach the test's files (the cluster's directory is
    // root's own, 0700, until here).
    ASSERT_EQ(::chmod(cluster().root().c_str(), 0711), 0) << std::strerror(errno);
    ASSERT_EQ(::chmod(TestDir().c_str(), 0777), 0) << std::strerror(errno);
  }

  std::string Path(const std::string& name) const { return TestDir() + "/" + name; }

  static struct stat Stat(const std::string& path) {
    struct stat st;
    std::memset(&st, 0, sizeof(st));
    EXPECT_EQ(::lstat(path.c_str(), &st), 0) << path << ": " << std::strerror(errno);
    return st;
  }

  // Lets the clock move past the last operation's times.
  static void Tick() { std::this_thread::sleep_for(std::chrono::milliseconds(20)); }
};

bool Later(const struct timespec& a, const struct timespec& b) {
  return a.tv_sec > b.tv_sec || (a.tv_sec == b.tv_sec && a.tv_nsec > b.tv_nsec);
}
bool Same(const struct timespec& a, const struct timespec& b) {
  return a.tv_sec == b.tv_sec && a.tv_nsec == b.tv_nsec;
}

// Writes "x" at the end of `path`, opened with `flags` (O_WRONLY: the
// mount's direct_io path; O_RDWR: the page cache); 0 or errno.
int AppendOne(const std::string& path, int flags) {
  const int fd = ::open(path.c_str(), flags | O_APPEND);
  if (fd < 0) return errno;
  const int err = ::write(fd, "x", 1) == 1 ? 0 : errno;
  const int closed = ::close(fd) == 0 ? 0 : errno;
  return err != 0 ? err : closed;
}

TEST_P(PosixConformanceTest, HardLinksShareTheInodeAndKeepItForTheOtherNames) {
  const std::string data = TestData(5 << 20, 11);
  const std::string a = Path("a"), b = Path("b");
  ASSERT_EQ(::mkdir(Path("sub").c_str(), 0755), 0);
  const std::string c = Path("sub/c");
  ASSERT_TRUE(WriteWholeFile(a, data).ok());
  const struct stat before = Stat(a);
  const struct stat dir_before = Stat(Path("sub"));
  Tick();

  ASSERT_EQ(::link(a.c_str(), b.c_str()), 0) << std::strerror(errno);
  ASSERT_EQ(::link(b.c_str(), c.c_str()), 0) << std::strerror(errno);
  const struct stat linked = Stat(c);
  EXPECT_EQ(linked.st_ino, before.st_ino);
  EXPECT_EQ(linked.st_nlink, 3u);
  EXPECT_EQ(Stat(a).st_nlink, 3u);
  EXPECT_TRUE(Later(linked.st_ctim, before.st_ctim));
  EXPECT_TRUE(Same(linked.st_mtim, before.st_mtim));
  EXPECT_TRUE(Later(Stat(Path("sub")).st_mtim, dir_before.st_mtim));
  EXPECT_TRUE(Later(Stat(Path("sub")).st_ctim, dir_before.st_ctim));
  EXPECT_EQ(Stat(Path("sub")).st_nlink, 2u);
  EXPECT_EQ(*ReadWholeFile(c), data);

  // Refused as link(2) says.
  EXPECT_EQ(::link(Path("sub").c_str(), Path("dirlink").c_str()), -1);
  EXPECT_EQ(errno, EPERM);
  EXPECT_EQ(::link(a.c_str(), c.c_str()), -1);
  EXPECT_EQ(errno, EEXIST);
  EXPECT_EQ(::link(Path("missing").c_str(), Path("m2").c_str()), -1);
  EXPECT_EQ(errno, ENOENT);

  // A write through one name shows through the others.
  ASSERT_TRUE(PwriteFile(b, 1, "BCD").ok());
  std::string changed = data;
  changed.replace(1, 3, "BCD");
  EXPECT_EQ(*ReadWholeFile(c), changed);

  // Unlink takes one name; the last name and an open descriptor keep the data.
  Tick();
  const struct timespec ctime_linked = Stat(a).st_ctim;
  ASSERT_EQ(::unlink(a.c_str()), 0);
  EXPECT_EQ(Stat(b).st_nlink, 2u);
  EXPECT_TRUE(Later(Stat(b).st_ctim, ctime_linked));
  ASSERT_EQ(::unlink(b.c_str()), 0);
  const int fd = ::open(c.c_str(), O_RDONLY);
  ASSERT_GE(fd, 0) << std::strerror(errno);
  ASSERT_EQ(::unlink(c.c_str()), 0);
  struct stat open_st;
  ASSERT_EQ(::fstat(fd, &open_st), 0);
  EXPECT_EQ(open_st.st_nlink, 0u);
  std::string back(changed.size(), '\0');
  EXPECT_EQ(::pread(fd, back.data(), back.size(), 0), static_cast<ssize_t>(back.size()));
  EXPECT_EQ(back, changed);
  ::close(fd);
  EXPECT_EQ(::access(c.c_str(), F_OK), -1);
}

TEST_P(PosixConformanceTest, RenameOverAndBetweenHardLinks) {
  ASSERT_TRUE(WriteWholeFile(Path("x"), "linked").ok());
  ASSERT_EQ(::link(Path("x").c_str(), Path("y").c_str()), 0);
  // Two names of one file: rename(2) does nothing and succeeds.
  ASSERT_EQ(::rename(Path("x").c_str(), Path("y").c_str()), 0);
  EXPECT_EQ(Stat(Path("x")).st_nlink, 2u);
  EXPECT_EQ(Stat(Path("y")).st_nlink, 2u);
  // Another file over one name: the linked file keeps its other name.
  ASSERT_TRUE(WriteWholeFile(Path("z"), "other").ok());
  Tick();
  const struct timespec before = Stat(Path("x")).st_ctim;
  ASSERT_EQ(::rename(Path("z").c_str(), Path("y").c_str()), 0);
  EXPECT_EQ(*ReadWholeFile(Path("y")), "other");
  EXPECT_EQ(*ReadWholeFile(Path("x")), "linked");
  EXPECT_EQ(Stat(Path("x")).st_nlink, 1u);
  EXPECT_TRUE(Later(Stat(Path("x")).st_ctim, before));
}

TEST_P(PosixConformanceTest, CpArchiveWithHardLinksSnapshotsATree) {
  ASSERT_EQ(::mkdir(Path("run").c_str(), 0755), 0);
  ASSERT_TRUE(WriteWholeFile(Path("run/a.pt"), TestData(1 << 20, 3)).ok());
  ASSERT_TRUE(WriteWholeFile(Path("run/b.pt"), TestData(3 << 20, 4)).ok());
  std::string output;
  ASSERT_EQ(RunShell(absl::StrCat("cp -al '", Path("run"), "' '", Path("snap"), "' 2>&1"), &output),
            0)
      << output;
  for (const char* name : {"a.pt", "b.pt"}) {
    SCOPED_TRACE(name);
    const struct stat original = Stat(Path(absl::StrCat("run/", name)));
    const struct stat copy = Stat(Path(absl::StrCat("snap/", name)));
    EXPECT_EQ(original.st_ino, copy.st_ino);
    EXPECT_EQ(copy.st_nlink, 2u);
  }
  ASSERT_EQ(RunShell(absl::StrCat("rm -rf '", Path("run"), "' 2>&1"), &output), 0) << output;
  EXPECT_EQ(*ReadWholeFile(Path("snap/b.pt")), TestData(3 << 20, 4));
  EXPECT_EQ(Stat(Path("snap/b.pt")).st_nlink, 1u);
}

TEST_P(PosixConformanceTest, AFifoCarriesBytesBetweenTwoProcesses) {
  const std::string fifo = Path("fifo");
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0640), 0) << std::strerror(errno);
  const struct stat st = Stat(fifo);
  EXPECT_TRUE(S_ISFIFO(st.st_mode));
  EXPECT_EQ(st.st_mode & 07777, 0640u);
  EXPECT_EQ(st.st_uid, 0u);
  const pid_t writer = ::fork();
  ASSERT_GE(writer, 0);
  if (writer == 0) {
    const int fd = ::open(fifo.c_str(), O_WRONLY);
    const bool ok = fd >= 0 && ::write(fd, "through the fifo", 16) == 16;
    ::_exit(ok ? 0 : 1);
  }
  const int fd = ::open(fifo.c_str(), O_RDONLY);
  ASSERT_GE(fd, 0) << std::strerror(errno);
  char buf[64] = {};
  ssize_t got = 0, n = 0;
  while ((n = ::read(fd, buf + got, sizeof(buf) - 1 - got)) > 0) got += n;
  ::close(fd);
  int status = 0;
  ASSERT_EQ(::waitpid(writer, &status, 0), writer);
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0);
  EXPECT_STREQ(buf, "through the fifo");
  EXPECT_EQ(Stat(fifo).st_size, 0);
}

TEST_P(PosixConformanceTest, AUnixSocketBoundOnTheMountAcceptsAConnection) {
  const std::string path = Path("sock");
  const int listener = ::socket(AF_UNIX, SOCK_STREAM, 0);
  ASSERT_GE(listener, 0);
  struct sockaddr_un addr;
  std::memset(&addr, 0, sizeof(addr));
  addr.sun_family = AF_UNIX;
  ASSERT_LT(path.size(), sizeof(addr.sun_path)) << path;
  std::memcpy(addr.sun_path, path.c_str(), path.size() + 1);
  ASSERT_EQ(::bind(listener, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)), 0)
      << std::strerror(errno);
  ASSERT_EQ(::listen(listener, 1), 0);
  EXPECT_TRUE(S_ISSOCK(Stat(path).st_mode));
  const pid_t client = ::fork();
  ASSERT_GE(client, 0);
  if (client == 0) {
    const int fd = ::socket(AF_UNIX, SOCK_STREAM, 0);
    const bool ok = fd >= 0 &&
                    ::connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) == 0 &&
                    ::write(fd, "rendezvous", 10) == 10;
    ::_exit(ok ? 0 : 1);
  }
  const int conn = ::accept(listener, nullptr, nullptr);
  ASSERT_GE(conn, 0) << std::strerror(errno);
  char buf[16] = {};
  EXPECT_EQ(::read(conn, buf, 10), 10);
  EXPECT_STREQ(buf, "rendezvous");
  ::close(conn);
  ::close(listener);
  int status = 0;
  ASSERT_EQ(::waitpid(client, &status, 0), client);
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0);
  ASSERT_EQ(::unlink(path.c_str()), 0);
}

TEST_P(PosixConformanceTest, DeviceNodesKeepModeOwnerAndRdev) {
  ASSERT_EQ(::mknod(Path("null").c_str(), S_IFCHR | 0666, makedev(1, 3)), 0)
      << std::strerror(errno);
  ASSERT_EQ(::mknod(Path("disk").c_str(), S_IFBLK | 0600, makedev(259, 7)), 0)
      << std::strerror(errno);
  ASSERT_EQ(::chown(Path("disk").c_str(), 1000, 1001), 0);
  const struct stat chr = Stat(Path("null"));
  EXPECT_TRUE(S_ISCHR(chr.st_mode));
  EXPECT_EQ(chr.st_rdev, makedev(1, 3));
  const struct stat blk = Stat(Path("disk"));
  EXPECT_TRUE(S_ISBLK(blk.st_mode));
  EXPECT_EQ(blk.st_mode & 07777, 0600u);
  EXPECT_EQ(blk.st_rdev, makedev(259, 7));
  EXPECT_EQ(blk.st_uid, 1000u);
  EXPECT_EQ(blk.st_gid, 1001u);
  // Creating one is the kernel's CAP_MKNOD check; another user is refused.
  EXPECT_EQ(
      AsNobody([&] {
        return ::mknod(Path("nobody-null").c_str(), S_IFCHR | 0666, makedev(1, 3)) == 0 ? 0 : errno;
      }),
      EPERM);
  // Mounts are nodev: the node is kept, not opened as a device.
  const int fd = ::open(Path("null").c_str(), O_RDONLY);
  EXPECT_EQ(fd, -1);
  EXPECT_EQ(errno, EACCES);
  // A device node takes hard links like any file.
  ASSERT_EQ(::link(Path("null").c_str(), Path("null2").c_str()), 0);
  EXPECT_EQ(Stat(Path("null2")).st_nlink, 2u);
  EXPECT_EQ(Stat(Path("null2")).st_rdev, makedev(1, 3));
}

TEST_P(PosixConformanceTest, UnprivilegedWritesAndTruncatesClearSetIdBits) {
  struct Case {
    const char* how;
    std::function<int(const std::string&)> act;
  };
  const Case cases[] = {
      {"direct_io write", [](const std::string& p) { return AppendOne(p, O_WRONLY); }},
      {"cached write", [](const std::string& p) { return AppendOne(p, O_RDWR); }},
      {"truncate", [](const std::string& p) { return ::truncate(p.c_str(), 1) == 0 ? 0 : errno; }},
      {"open O_TRUNC",
       [](const std::string& p) {
         const int fd = ::open(p.c_str(), O_WRONLY | O_TRUNC);
         if (fd < 0) return errno;
         return ::close(fd) == 0 ? 0 : errno;
       }},
  };
  int n = 0;
  for (const Case& c : cases) {
    SCOPED_TRACE(c.how);
    const std::string path = Path(absl::StrCat("setid", n++));
    ASSERT_TRUE(WriteWholeFile(path, "payload").ok());
    ASSERT_EQ(::chmod(path.c_str(), 06777), 0);
    ASSERT_EQ(AsNobody([&] { return c.act(path); }), 0);
    EXPECT_EQ(Stat(path).st_mode & 07777, 0777u);
    // Set-group-ID without group-execute (mandatory locking) stays.
    ASSERT_EQ(::chmod(path.c_str(), 02767), 0);
    ASSERT_EQ(AsNobody([&] { return c.act(path); }), 0);
    EXPECT_EQ(Stat(path).st_mode & 07777, 02767u);
    // Root (CAP_FSETID) keeps them.
    ASSERT_EQ(::chmod(path.c_str(), 06777), 0);
    ASSERT_EQ(c.act(path), 0);
    EXPECT_EQ(Stat(path).st_mode & 07777, 06777u);
  }
  // chown clears both on Linux, even by root.
  const std::string owned = Path("owned");
  ASSERT_TRUE(WriteWholeFile(owned, "payload").ok());
  ASSERT_EQ(::chmod(owned.c_str(), 06755), 0);
  ASSERT_EQ(::chown(owned.c_str(), kNobody, kNobody), 0);
  EXPECT_EQ(Stat(owned).st_mode & 07777, 0755u);
}

TEST_P(PosixConformanceTest, ASetGroupIdDirectoryGivesNewInodesItsGroup) {
  const std::string shared = Path("shared");
  ASSERT_EQ(::mkdir(shared.c_str(), 0777), 0);
  ASSERT_EQ(::chown(shared.c_str(), 0, 4242), 0);
  ASSERT_EQ(::chmod(shared.c_str(), 02777), 0);
  ASSERT_EQ(AsNobody([&] {
              const int fd = ::creat((shared + "/by-nobody").c_str(), 0644);
              if (fd < 0) return errno;
              ::close(fd);
              return ::mkdir((shared + "/sub").c_str(), 0755) == 0 ? 0 : errno;
            }),
            0);
  const struct stat file = Stat(shared + "/by-nobody");
  EXPECT_EQ(file.st_uid, kNobody);
  EXPECT_EQ(file.st_gid, 4242u);
  const struct stat sub = Stat(shared + "/sub");
  EXPECT_EQ(sub.st_gid, 4242u);
  EXPECT_TRUE(sub.st_mode & S_ISGID);
}

TEST_P(PosixConformanceTest, ChmodAndChownChangeCtimeOfEveryFileType) {
  ASSERT_TRUE(WriteWholeFile(Path("file"), "x").ok());
  ASSERT_EQ(::mkdir(Path("dir").c_str(), 0755), 0);
  ASSERT_EQ(::mkfifo(Path("fifo").c_str(), 0644), 0);
  ASSERT_EQ(::mknod(Path("chr").c_str(), S_IFCHR | 0644, makedev(1, 3)), 0);
  ASSERT_EQ(::symlink("file", Path("link").c_str()), 0);
  for (const char* name : {"file", "dir", "fifo", "chr", "link"}) {
    SCOPED_TRACE(name);
    const std::string path = Path(name);
    const bool symlink = std::string(name) == "link";
    Tick();
    struct timespec before = Stat(path).st_ctim;
    if (!symlink) {
      ASSERT_EQ(::chmod(path.c_str(), 0700), 0);
      EXPECT_EQ(Stat(path).st_mode & 07777, 0700u);
      EXPECT_TRUE(Later(Stat(path).st_ctim, before));
      Tick();
      before = Stat(path).st_ctim;
    }
    ASSERT_EQ(::lchown(path.c_str(), 1000, 1000), 0) << std::strerror(errno);
    EXPECT_EQ(Stat(path).st_uid, 1000u);
    EXPECT_TRUE(Later(Stat(path).st_ctim, before));
  }
}

TEST_P(PosixConformanceTest, NamespaceOperationsSetParentTimesAndNlink) {
  const std::string dir = Path("d");
  ASSERT_EQ(::mkdir(dir.c_str(), 0755), 0);
  EXPECT_EQ(Stat(dir).st_nlink, 2u);
  // Each operation that adds or removes an entry sets the directory's mtime
  // and ctime.
  const std::function<int()> ops[] = {
      [&] { return ::mkdir((dir + "/sub").c_str(), 0755); },
      [&] { return ::mkfifo((dir + "/fifo").c_str(), 0644); },
      [&] { return ::symlink("fifo", (dir + "/sl").c_str()); },
      [&] { return ::link((dir + "/fifo").c_str(), (dir + "/fifo2").c_str()); },
      [&] { return ::rename((dir + "/fifo2").c_str(), (dir + "/fifo3").c_str()); },
      [&] { return ::unlink((dir + "/fifo3").c_str()); },
      [&] { return ::rmdir((dir + "/sub").c_str()); },
  };
  int i = 0;
  for (const auto& op : ops) {
    SCOPED_TRACE(i++);
    Tick();
    const struct stat before = Stat(dir);
    ASSERT_EQ(op(), 0) << std::strerror(errno);
    const struct stat after = Stat(dir);
    EXPECT_TRUE(Later(after.st_mtim, before.st_mtim));
    EXPECT_TRUE(Later(after.st_ctim, before.st_ctim));
  }
  // nlink of a directory is 2 + its subdirectories, across renames.
  ASSERT_EQ(::mkdir((dir + "/s1").c_str(), 0755), 0);
  ASSERT_EQ(::mkdir((dir + "/s2").c_str(), 0755), 0);
  EXPECT_EQ(Stat(dir).st_nlink, 4u);
  ASSERT_EQ(::mkdir(Path("other").c_str(), 0755), 0);
  Tick();
  const struct timespec moved_before = Stat(dir + "/s2").st_ctim;
  ASSERT_EQ(::rename((dir + "/s2").c_str(), Path("other/s2").c_str()), 0);
  EXPECT_EQ(Stat(dir).st_nlink, 3u);
  EXPECT_EQ(Stat(Path("other")).st_nlink, 3u);
  EXPECT_TRUE(Later(Stat(Path("other/s2")).st_ctim, moved_before));
  ASSERT_EQ(::rmdir((dir + "/s1").c_str()), 0);
  EXPECT_EQ(Stat(dir).st_nlink, 2u);
}

INSTANTIATE_TEST_SUITE_P(
    Redundancy, PosixConformanceTest,
    ::testing::Values(Redundancy{"OneCopy", "", ""},
                      Redundancy{"TwoCopies", "user.ckptfs.replicas", "2"},
                      Redundancy{"ErasureCode2Plus1", "user.ckptfs.ec", "2+1"}),
    [](const ::testing::TestParamInfo<Redundancy>& info) { return std::string(info.param.name); });

}  // namespace
}  // namespace ckptfs::testing
