// Tests of the FUSE operations through a real kernel mount, served in this
// process by a Filesystem over the metadata service in-process and the
// in-memory chunk transport of client/testing (no daemons). They check what only the FUSE
// layer decides: errno mapping (never ENOSYS), where write errors surface
// (close, fsync), xattr size queries and ERANGE, readdir offsets, rename
// flags, setattr variants, unsupported node types, the negotiated max_write,
// no attribute request per read (no AUTO_INVAL_DATA) yet close-to-open.
//
// The fixture is in mount_fixture.h (root and /dev/fuse, else skipped).
#include <dirent.h>
#include <fcntl.h>
#include <linux/fs.h>
#include <stdio.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <sys/syscall.h>
#include <sys/xattr.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <memory>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "tests/fuse/mount_fixture.h"

namespace ckptfs::fuse {
namespace {

TEST_F(MountTest, NegotiatesOneMiBWrites) {
  struct stat st;
  ASSERT_EQ(stat(dir_.c_str(), &st), 0);  // waits for INIT
  EXPECT_EQ(fs_->max_write(), kMaxWrite);
  EXPECT_EQ(st.st_ino, 1u);
}

TEST_F(MountTest, WriteReadStatRoundTrip) {
  std::string data(300 * 1024 + 17, '\0');
  for (size_t i = 0; i < data.size(); ++i) data[i] = static_cast<char>(i * 131 + 7);
  ASSERT_EQ(WriteFile("f", data), 0);
  struct stat st;
  ASSERT_EQ(stat(P("f").c_str(), &st), 0);
  EXPECT_EQ(st.st_size, static_cast<off_t>(data.size()));
  EXPECT_TRUE(S_ISREG(st.st_mode));
  EXPECT_EQ(st.st_mode & 0777, 0644u);
  EXPECT_EQ(ReadFile("f"), data);
}

TEST_F(MountTest, WriteErrorSurfacesInCloseOrWrite) {
  transport_->FailWrites(ENOSPC);
  int fd = open(P("full").c_str(), O_WRONLY | O_CREAT, 0644);
  ASSERT_GE(fd, 0);
  std::string data(256 * 1024, 'x');
  ssize_t n = write(fd, data.data(), data.size());
  int write_err = n < 0 ? errno : 0;
  int close_rc = close(fd);
  int close_err = close_rc == 0 ? 0 : errno;
  // The error is reported by write or by close, never swallowed.
  EXPECT_TRUE(write_err == ENOSPC || close_err == ENOSPC)
      << "write: " << write_err << " close: " << close_err;
}

TEST_F(MountTest, FsyncReportsSyncErrors) {
  int fd = open(P("s").c_str(), O_WRONLY | O_CREAT, 0644);
  ASSERT_GE(fd, 0);
  ASSERT_EQ(write(fd, "abc", 3), 3);
  transport_->FailSyncs(EIO);
  EXPECT_EQ(fsync(fd), -1);
  EXPECT_EQ(errno, EIO);
  transport_->FailSyncs(0);
  EXPECT_EQ(fsync(fd), 0);
  EXPECT_EQ(close(fd), 0);
}

TEST_F(MountTest, ReaderCloseCommitsNothing) {
  ASSERT_EQ(WriteFile("r", "hello"), 0);
  const int commits = meta_->Calls("CommitWrite");
  EXPECT_EQ(ReadFile("r"), "hello");
  EXPECT_EQ(meta_->Calls("CommitWrite"), commits);
}

TEST_F(MountTest, UnimplementedNeverBecomesEnosys) {
  ASSERT_EQ(mkdir(P("d").c_str(), 0755), 0);
  char buf[16];
  meta_->FailNext("GetXattr", absl::UnimplementedError("not yet"));
  EXPECT_EQ(getxattr(P("d").c_str(), "user.a", buf, sizeof(buf)), -1);
  EXPECT_EQ(errno, EIO);
  // The kernel still asks: getxattr was not disabled for the mount.
  ASSERT_EQ(setxattr(P("d").c_str(), "user.a", "v", 1, 0), 0);
  EXPECT_EQ(getxattr(P("d").c_str(), "user.a", buf, sizeof(buf)), 1);
}

TEST_F(MountTest, XattrSizeQueryAndErange) {
  ASSERT_EQ(mkdir(P("d").c_str(), 0755), 0);
  const std::string value = "1048576";
  ASSERT_EQ(setxattr(P("d").c_str(), "user.ckptfs.chunk_size", value.data(), value.size(), 0), 0);
  EXPECT_EQ(getxattr(P("d").c_str(), "user.ckptfs.chunk_size", nullptr, 0),
            static_cast<ssize_t>(value.size()));
  char small[3];
  EXPECT_EQ(getxattr(P("d").c_str(), "user.ckptfs.chunk_size", small, sizeof(small)), -1);
  EXPECT_EQ(errno, ERANGE);
  char buf[64];
  ASSERT_EQ(getxattr(P("d").c_str(), "user.ckptfs.chunk_size", buf, sizeof(buf)),
            static_cast<ssize_t>(value.size()));
  EXPECT_EQ(std::string(buf, value.size()), value);

  ASSERT_EQ(setxattr(P("d").c_str(), "user.b", "x", 1, 0), 0);
  const std::string names("user.b\0user.ckptfs.chunk_size\0", 30);
  EXPECT_EQ(listxattr(P("d").c_str(), nullptr, 0), static_cast<ssize_t>(names.size()));
  EXPECT_EQ(listxattr(P("d").c_str(), buf, 5), -1);
  EXPECT_EQ(errno, ERANGE);
  ssize_t n = listxattr(P("d").c_str(), buf, sizeof(buf));
  ASSERT_GT(n, 0);
  std::set<std::string> listed;
  for (const char* p = buf; p < buf + n; p += strlen(p) + 1) listed.insert(p);
  EXPECT_EQ(listed, (std::set<std::string>{"user.b", "user.ckptfs.chunk_size"}));

  EXPECT_EQ(setxattr(P("d").c_str(), "user.b", "y", 1, XATTR_CREATE), -1);
  EXPECT_EQ(errno, EEXIST);
  ASSERT_EQ(removexattr(P("d").c_str(), "user.b"), 0);
  EXPECT_EQ(getxattr(P("d").c_str(), "user.b", buf, sizeof(buf)), -1);
  EXPECT_EQ(errno, ENODATA);
}

TEST_F(MountTest, SecurityXattrsAreAnsweredLocally) {
  ASSERT_EQ(WriteFile("f", "x"), 0);
  const int calls = meta_->Calls("GetXattr");
  char buf[64];
  EXPECT_EQ(getxattr(P("f").c_str(), "security.capability", buf, sizeof(buf)), -1);
  EXPECT_EQ(errno, ENODATA);
  EXPECT_EQ(meta_->Calls("GetXattr"), calls);
  EXPECT_EQ(setxattr(P("f").c_str(), "security.selinux", "x", 1, 0), -1);
  EXPECT_EQ(errno, EOPNOTSUPP);
}

TEST_F(MountTest, ReadDirListsEverythingWithStableOffsets) {
  ASSERT_EQ(mkdir(P("big").c_str(), 0755), 0);
  struct stat dir_st;
  ASSERT_EQ(stat(P("big").c_str(), &dir_st), 0);
  // Entries made behind the mount's back, straight at the service:
  // the test is about listing, not about creating.
  constexpr int kFiles = 3000;  // three ReadDir pages and many readdir calls
  for (int i = 0; i < kFiles; ++i) {
    meta::CreateRequest request;
    request.set_parent(dir_st.st_ino);
    request.set_name(absl::StrCat("f", i));
    request.set_mode(0644);
    ASSERT_TRUE(meta_->Create(request).ok());
  }
  DIR* d = opendir(P("big").c_str());
  ASSERT_NE(d, nullptr);
  std::set<std::string> names;
  long resume_at = -1;
  std::string name_at_resume;
  while (struct dirent* e = readdir(d)) {
    names.insert(e->d_name);
    if (std::string(e->d_name) == "f7") {
      EXPECT_EQ(e->d_type, DT_REG);
    }
    if (names.size() == 1000 && resume_at < 0) {
      resume_at = telldir(d);
      struct dirent* next = readdir(d);
      ASSERT_NE(next, nullptr);
      name_at_resume = next->d_name;
      names.insert(next->d_name);
    }
  }
  EXPECT_EQ(names.size(), static_cast<size_t>(kFiles + 2));  // with "." and ".."
  EXPECT_TRUE(names.count(".") && names.count(".."));
  ASSERT_GE(resume_at, 0);
  seekdir(d, resume_at);
  struct dirent* again = readdir(d);
  ASSERT_NE(again, nullptr);
  EXPECT_EQ(name_at_resume, again->d_name);
  closedir(d);
}

TEST_F(MountTest, RenameFlags) {
  ASSERT_EQ(WriteFile("a", "A"), 0);
  ASSERT_EQ(WriteFile("b", "B"), 0);
  EXPECT_EQ(
      syscall(SYS_renameat2, AT_FDCWD, P("a").c_str(), AT_FDCWD, P("b").c_str(), RENAME_NOREPLACE),
      -1);
  EXPECT_EQ(errno, EEXIST);
  EXPECT_EQ(
      syscall(SYS_renameat2, AT_FDCWD, P("a").c_str(), AT_FDCWD, P("b").c_str(), RENAME_EXCHANGE),
      -1);
  EXPECT_EQ(errno, EINVAL);
  ASSERT_EQ(rename(P("a").c_str(), P("b").c_str()), 0);
  EXPECT_EQ(ReadFile("b"), "A");
  EXPECT_NE(access(P("a").c_str(), F_OK), 0);
}

TEST_F(MountTest, SetAttrVariants) {
  ASSERT_EQ(WriteFile("f", "0123456789"), 0);
  ASSERT_EQ(chmod(P("f").c_str(), 0600), 0);
  ASSERT_EQ(chown(P("f").c_str(), 1234, 5678), 0);
  struct stat st;
  ASSERT_EQ(stat(P("f").c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 07777, 0600u);
  EXPECT_EQ(st.st_uid, 1234u);
  EXPECT_EQ(st.st_gid, 5678u);

  struct timespec times[2] = {{1000, 5}, {2000, 7}};
  ASSERT_EQ(utimensat(AT_FDCWD, P("f").c_str(), times, 0), 0);
  ASSERT_EQ(stat(P("f").c_str(), &st), 0);
  EXPECT_EQ(st.st_atim.tv_sec, 1000);
  EXPECT_EQ(st.st_mtim.tv_sec, 2000);
  EXPECT_EQ(st.st_mtim.tv_nsec, 7);
  struct timespec now[2] = {{0, UTIME_NOW}, {0, UTIME_NOW}};
  ASSERT_EQ(utimensat(AT_FDCWD, P("f").c_str(), now, 0), 0);
  ASSERT_EQ(stat(P("f").c_str(), &st), 0);
  EXPECT_GT(st.st_mtim.tv_sec, 2000);

  ASSERT_EQ(truncate(P("f").c_str(), 4), 0);
  EXPECT_EQ(ReadFile("f"), "0123");
  // ftruncate on a handle with unflushed writes: the writes land first, then
  // the cut; the extension reads as zeros.
  int fd = open(P("f").c_str(), O_RDWR);
  ASSERT_GE(fd, 0);
  ASSERT_EQ(pwrite(fd, "abcdefgh", 8, 0), 8);
  ASSERT_EQ(ftruncate(fd, 2), 0);
  ASSERT_EQ(ftruncate(fd, 5), 0);
  ASSERT_EQ(close(fd), 0);
  EXPECT_EQ(ReadFile("f"), std::string("ab\0\0\0", 5));
}

TEST_F(MountTest, OpenTruncAndAppend) {
  ASSERT_EQ(WriteFile("f", "0123456789"), 0);
  int fd = open(P("f").c_str(), O_WRONLY | O_APPEND);
  ASSERT_GE(fd, 0);
  ASSERT_EQ(write(fd, "ab", 2), 2);
  ASSERT_EQ(close(fd), 0);
  EXPECT_EQ(ReadFile("f"), "0123456789ab");
  fd = open(P("f").c_str(), O_WRONLY | O_TRUNC);
  ASSERT_GE(fd, 0);
  ASSERT_EQ(write(fd, "z", 1), 1);
  ASSERT_EQ(close(fd), 0);
  EXPECT_EQ(ReadFile("f"), "z");
}

TEST_F(MountTest, NamespaceOpsAndErrnos) {
  ASSERT_EQ(mkdir(P("d").c_str(), 0750), 0);
  EXPECT_EQ(mkdir(P("d").c_str(), 0750), -1);
  EXPECT_EQ(errno, EEXIST);
  ASSERT_EQ(WriteFile("d/f", "x"), 0);
  EXPECT_EQ(rmdir(P("d").c_str()), -1);
  EXPECT_EQ(errno, ENOTEMPTY);
  EXPECT_EQ(mkdir(P(std::string(256, 'n')).c_str(), 0755), -1);
  EXPECT_EQ(errno, ENAMETOOLONG);

  ASSERT_EQ(symlink("some/target", P("l").c_str()), 0);
  char buf[64];
  ssize_t n = readlink(P("l").c_str(), buf, sizeof(buf));
  ASSERT_EQ(n, 11);
  EXPECT_EQ(std::string(buf, n), "some/target");

  ASSERT_EQ(link(P("d/f").c_str(), P("hard").c_str()), 0) << strerror(errno);
  struct stat st;
  ASSERT_EQ(stat(P("hard").c_str(), &st), 0);
  EXPECT_EQ(st.st_nlink, 2u);
  EXPECT_EQ(link(P("d").c_str(), P("dirlink").c_str()), -1);
  EXPECT_EQ(errno, EPERM);
  ASSERT_EQ(mkfifo(P("fifo").c_str(), 0644), 0) << strerror(errno);
  ASSERT_EQ(lstat(P("fifo").c_str(), &st), 0);
  EXPECT_TRUE(S_ISFIFO(st.st_mode));
  ASSERT_EQ(mknod(P("plain").c_str(), S_IFREG | 0640, 0), 0);
  ASSERT_EQ(stat(P("plain").c_str(), &st), 0);
  EXPECT_TRUE(S_ISREG(st.st_mode));

  ASSERT_EQ(unlink(P("d/f").c_str()), 0);
  ASSERT_EQ(rmdir(P("d").c_str()), 0);
  EXPECT_EQ(stat(P("d").c_str(), &st), -1);
  EXPECT_EQ(errno, ENOENT);
}

TEST_F(MountTest, UnlinkedOpenFileStaysReadable) {
  ASSERT_EQ(WriteFile("f", "still here"), 0);
  int fd = open(P("f").c_str(), O_RDONLY);
  ASSERT_GE(fd, 0);
  ASSERT_EQ(unlink(P("f").c_str()), 0);
  char buf[32];
  ssize_t n = pread(fd, buf, sizeof(buf), 0);
  EXPECT_EQ(std::string(buf, n > 0 ? n : 0), "still here");
  EXPECT_EQ(close(fd), 0);
}

// Reads inside the file's size ask the service for no attributes (no
// FUSE_CAP_AUTO_INVAL_DATA: with attr_timeout 0 the kernel sent a GETATTR,
// a metadata RPC, before every read), and close-to-open still holds: after
// a rewrite the next open reads the new bytes, not the cached pages.
TEST_F(MountTest, ReadsAskForNoAttributesAndAReopenSeesARewrite) {
  std::string data(4 << 20, '\0');
  for (size_t i = 0; i < data.size(); ++i) data[i] = static_cast<char>(i * 131 + i / 4096);
  ASSERT_EQ(WriteFile("f", data), 0);
  int fd = open(P("f").c_str(), O_RDONLY);
  ASSERT_GE(fd, 0);
  const int before = meta_->Calls("GetAttr");
  std::string got;
  std::vector<char> buf(64 << 10);
  int reads = 0;
  ssize_t n;
  while ((n = read(fd, buf.data(), buf.size())) > 0) {
    got.append(buf.data(), static_cast<size_t>(n));
    ++reads;
  }
  const int asked = meta_->Calls("GetAttr") - before;
  EXPECT_EQ(close(fd), 0);
  EXPECT_TRUE(got == data);
  EXPECT_EQ(reads, 64);
  // The read at the end of the file may ask (the size could have grown).
  EXPECT_LE(asked, 2) << asked << " GetAttr calls for " << reads << " reads";

  std::string data2 = data;
  for (char& c : data2) c = static_cast<char>(c ^ 0x5a);
  ASSERT_EQ(WriteFile("f", data2), 0);
  EXPECT_TRUE(ReadFile("f") == data2) << "the reopen read stale cached pages";
}

TEST_F(MountTest, StatFsReportsFourKiBBlocks) {
  struct statvfs st;
  ASSERT_EQ(statvfs(dir_.c_str(), &st), 0);
  EXPECT_EQ(st.f_bsize, 4096u);
  EXPECT_EQ(st.f_namemax, 255u);
}

}  // namespace
}  // namespace ckptfs::fuse
