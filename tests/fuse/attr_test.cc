// Tests of the metadata <-> FUSE struct conversions (fuse/attr.h).
#include "fuse/attr.h"

#include <fuse_lowlevel.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>

#include "gtest/gtest.h"

namespace ckptfs::fuse {
namespace {

TEST(AttrToStatTest, RegularFileKeepsExactSizeTimesAndBits) {
  meta::Attr attr;
  attr.set_ino(42);
  attr.set_type(meta::REGULAR);
  attr.set_mode(S_IFREG | 04640);
  attr.set_uid(1000);
  attr.set_gid(100);
  attr.set_size(4 * 1024 * 1024 + 17);
  attr.set_nlink(1);
  attr.set_atime_ns(1'700'000'000'123'456'789);
  attr.set_mtime_ns(1'700'000'001'000'000'001);
  attr.set_ctime_ns(5);

  struct stat st = AttrToStat(attr);
  EXPECT_EQ(st.st_ino, 42u);
  EXPECT_TRUE(S_ISREG(st.st_mode));
  EXPECT_EQ(st.st_mode & 07777, 04640u);
  EXPECT_EQ(st.st_uid, 1000u);
  EXPECT_EQ(st.st_gid, 100u);
  EXPECT_EQ(st.st_size, 4 * 1024 * 1024 + 17);
  EXPECT_EQ(st.st_blocks, (4 * 1024 * 1024 + 17 + 511) / 512);
  EXPECT_EQ(st.st_blksize, static_cast<blksize_t>(kPreferredIoSize));
  EXPECT_EQ(st.st_atim.tv_sec, 1'700'000'000);
  EXPECT_EQ(st.st_atim.tv_nsec, 123'456'789);
  EXPECT_EQ(st.st_mtim.tv_sec, 1'700'000'001);
  EXPECT_EQ(st.st_mtim.tv_nsec, 1);
  EXPECT_EQ(st.st_ctim.tv_nsec, 5);
}

TEST(AttrToStatTest, TypeComesFromTheRecordType) {
  meta::Attr attr;
  attr.set_type(meta::DIRECTORY);
  attr.set_mode(0755);  // permission bits only
  EXPECT_TRUE(S_ISDIR(AttrToStat(attr).st_mode));
  attr.set_type(meta::SYMLINK);
  attr.set_mode(0777);
  EXPECT_TRUE(S_ISLNK(AttrToStat(attr).st_mode));
  struct Special {
    meta::FileType type;
    bool (*is)(mode_t);
  };
  for (const Special& special :
       {Special{meta::FIFO, [](mode_t m) { return S_ISFIFO(m); }},
        Special{meta::SOCKET, [](mode_t m) { return S_ISSOCK(m); }},
        Special{meta::CHAR_DEVICE, [](mode_t m) { return S_ISCHR(m); }},
        Special{meta::BLOCK_DEVICE, [](mode_t m) { return S_ISBLK(m); }}}) {
    attr.set_type(special.type);
    attr.set_mode(0640);
    attr.set_rdev(makedev(8, 17));
    const struct stat st = AttrToStat(attr);
    EXPECT_TRUE(special.is(st.st_mode)) << special.type;
    EXPECT_EQ(st.st_mode & 07777, 0640u);
    EXPECT_EQ(st.st_rdev, makedev(8, 17));
  }
}

// nlink is the service's: 0 for a file whose last name went while a
// descriptor is open on it (fstat after unlink), as on ext4.
TEST(AttrToStatTest, NlinkIsTheNumberOfNames) {
  meta::Attr attr;
  attr.set_type(meta::REGULAR);
  for (uint32_t nlink : {0u, 1u, 3u}) {
    attr.set_nlink(nlink);
    EXPECT_EQ(AttrToStat(attr).st_nlink, nlink);
  }
}

TEST(TimeConversionTest, RoundTripsIncludingNegative) {
  for (int64_t ns : {int64_t{0}, int64_t{1}, int64_t{999'999'999}, int64_t{-1},
                     int64_t{-1'000'000'001}, int64_t{1'700'000'000'000'000'007}}) {
    struct timespec ts = NsToTimespec(ns);
    EXPECT_GE(ts.tv_nsec, 0);
    EXPECT_LT(ts.tv_nsec, 1'000'000'000);
    EXPECT_EQ(TimespecToNs(ts), ns);
  }
}

TEST(StatFsTest, CountsIn4KiBBlocks) {
  meta::StatFsReply reply;
  reply.set_total_bytes(uint64_t{10} << 30);
  reply.set_free_bytes(uint64_t{3} << 30);
  reply.set_files(123);
  struct statvfs st = StatFsToStatvfs(reply);
  EXPECT_EQ(st.f_bsize, 4096u);
  EXPECT_EQ(st.f_frsize, 4096u);
  EXPECT_EQ(st.f_blocks, (uint64_t{10} << 30) / 4096);
  EXPECT_EQ(st.f_bfree, (uint64_t{3} << 30) / 4096);
  EXPECT_EQ(st.f_bavail, st.f_bfree);
  EXPECT_EQ(st.f_files - st.f_ffree, 123u);
  EXPECT_EQ(st.f_namemax, 255u);
}

TEST(SetAttrRequestTest, ChmodKeepsPermissionBitsOnly) {
  struct stat st {};
  st.st_mode = S_IFREG | 0600;
  meta::SetAttrRequest r = MakeSetAttrRequest(7, st, FUSE_SET_ATTR_MODE);
  EXPECT_EQ(r.ino(), 7u);
  EXPECT_EQ(r.valid(), static_cast<uint32_t>(meta::SET_MODE));
  EXPECT_EQ(r.mode(), 0600u);
}

TEST(SetAttrRequestTest, ChownAndTruncate) {
  struct stat st {};
  st.st_uid = 5;
  st.st_gid = 6;
  st.st_size = 12345;
  meta::SetAttrRequest r =
      MakeSetAttrRequest(7, st, FUSE_SET_ATTR_UID | FUSE_SET_ATTR_GID | FUSE_SET_ATTR_SIZE);
  EXPECT_EQ(r.valid(), static_cast<uint32_t>(meta::SET_UID | meta::SET_GID | meta::SET_SIZE));
  EXPECT_EQ(r.uid(), 5u);
  EXPECT_EQ(r.gid(), 6u);
  EXPECT_EQ(r.size(), 12345u);
}

TEST(SetAttrRequestTest, UtimensExplicitTimes) {
  struct stat st {};
  st.st_atim = {100, 7};
  st.st_mtim = {200, 9};
  meta::SetAttrRequest r = MakeSetAttrRequest(7, st, FUSE_SET_ATTR_ATIME | FUSE_SET_ATTR_MTIME);
  EXPECT_EQ(r.valid(), static_cast<uint32_t>(meta::SET_ATIME | meta::SET_MTIME));
  EXPECT_EQ(r.atime_ns(), 100'000'000'007);
  EXPECT_EQ(r.mtime_ns(), 200'000'000'009);
}

TEST(SetAttrRequestTest, UtimeNowUsesTheServiceClock) {
  struct stat st {};
  // The kernel sends ATIME together with ATIME_NOW for UTIME_NOW.
  meta::SetAttrRequest r = MakeSetAttrRequest(7, st,
                                              FUSE_SET_ATTR_ATIME | FUSE_SET_ATTR_ATIME_NOW |
                                                  FUSE_SET_ATTR_MTIME | FUSE_SET_ATTR_MTIME_NOW);
  EXPECT_EQ(r.valid(), static_cast<uint32_t>(meta::SET_ATIME_NOW | meta::SET_MTIME_NOW));
}

TEST(SetAttrRequestTest, CtimeAloneSetsNothing) {
  struct stat st {};
  EXPECT_EQ(MakeSetAttrRequest(7, st, FUSE_SET_ATTR_CTIME).valid(),
            static_cast<uint32_t>(meta::SET_ATTR_NONE));
}

}  // namespace
}  // namespace ckptfs::fuse
