// Unit tests of the mount helper's argument parsing and option translation.
#include "fuse/mount_helper/mount_options.h"

#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace ckptfs::tools {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

MountRequest Parse(const std::vector<std::string>& args) {
  absl::StatusOr<MountRequest> request = ParseMountArgs(args);
  EXPECT_TRUE(request.ok()) << request.status();
  return request.ok() ? *request : MountRequest{};
}

std::vector<std::string> Translate(const std::vector<std::string>& args,
                                   const std::string& default_config = "") {
  absl::StatusOr<FuseInvocation> invocation = TranslateMount(Parse(args), default_config);
  EXPECT_TRUE(invocation.ok()) << invocation.status();
  return invocation.ok() ? invocation->args : std::vector<std::string>{};
}

TEST(ParseMountArgs, TakesWhatMountPassesInAnyOrder) {
  MountRequest r =
      Parse({"127.0.0.1:7000", "/checkpoints", "-o", "rw,threads=8", "-n", "-t", "fuse.ckptfs"});
  EXPECT_EQ(r.source, "127.0.0.1:7000");
  EXPECT_EQ(r.mountpoint, "/checkpoints");
  EXPECT_THAT(r.options, ElementsAre("rw", "threads=8"));
  EXPECT_FALSE(r.fake);

  r = Parse({"-vf", "-oallow_other,,ro", "meta.example:7000", "/mnt/c"});
  EXPECT_TRUE(r.fake);
  EXPECT_TRUE(r.verbose);
  EXPECT_THAT(r.options, ElementsAre("allow_other", "ro"));
}

TEST(ParseMountArgs, RejectsWhatItCannotMount) {
  EXPECT_THAT(ParseMountArgs({"127.0.0.1:7000"}).status().message(), HasSubstr("usage"));
  EXPECT_THAT(ParseMountArgs({"a:1", "/m", "/extra"}).status().message(),
              HasSubstr("unexpected argument \"/extra\""));
  EXPECT_THAT(ParseMountArgs({"metahost", "/m"}).status().message(), HasSubstr("HOST:PORT"));
  EXPECT_THAT(ParseMountArgs({"host:", "/m"}).status().message(), HasSubstr("HOST:PORT"));
  EXPECT_THAT(ParseMountArgs({"a:1", "/m", "-o"}).status().message(),
              HasSubstr("-o needs a value"));
  EXPECT_THAT(ParseMountArgs({"a:1", "/m", "-x"}).status().message(),
              HasSubstr("unknown switch -x"));
}

TEST(TranslateMount, CkptfsOptionsBecomeFlagsOthersGoToTheKernel) {
  EXPECT_THAT(
      Translate({"h:7000", "/c", "-o",
                 "defaults,_netdev,nofail,x-systemd.automount,comment=x,rw,threads=32,"
                 "splice,direct_io_writes=0,allow_other,noatime,local_reads,"
                 "direct_io_reads,max_read=131072"}),
      ElementsAre("--meta=h:7000", "--mountpoint=/c", "--threads=32", "--splice=true",
                  "--direct_io_writes=false", "--local_reads=true", "--direct_io_reads=true",
                  "--fuse_options=allow_other,noatime,max_read=131072"));
}

TEST(TranslateMount, ConfigComesFirstSoMountOptionsOverrideIt) {
  EXPECT_THAT(Translate({"h:1", "/c", "-o", "max_background=32"}, "/etc/ckptfs/fuse.conf"),
              ElementsAre("--flagfile=/etc/ckptfs/fuse.conf", "--meta=h:1", "--mountpoint=/c",
                          "--max_background=32"));
  EXPECT_THAT(Translate({"h:1", "/c", "-o", "config=/tmp/my.conf"}, "/etc/ckptfs/fuse.conf"),
              ElementsAre("--flagfile=/tmp/my.conf", "--meta=h:1", "--mountpoint=/c"));
}

TEST(TranslateMount, LogFileFromOptionOrDefault) {
  absl::StatusOr<FuseInvocation> invocation =
      TranslateMount(Parse({"h:1", "/c", "-o", "log=/tmp/m.log"}), "");
  ASSERT_TRUE(invocation.ok());
  EXPECT_EQ(invocation->log_file, "/tmp/m.log");
  invocation = TranslateMount(Parse({"h:1", "/mnt/ckpt"}), "");
  ASSERT_TRUE(invocation.ok());
  EXPECT_EQ(invocation->log_file, "/var/log/ckptfs/mount-mnt-ckpt.log");
  EXPECT_EQ(DefaultLogFile("/checkpoints/"), "/var/log/ckptfs/mount-checkpoints.log");
  EXPECT_EQ(DefaultLogFile("/"), "/var/log/ckptfs/mount-root.log");
}

TEST(TranslateMount, OptionsWithoutTheirValueAreRefused) {
  EXPECT_THAT(TranslateMount(Parse({"h:1", "/c", "-o", "threads"}), "").status().message(),
              HasSubstr("threads needs a value (threads=N)"));
  EXPECT_THAT(TranslateMount(Parse({"h:1", "/c", "-o", "log="}), "").status().message(),
              HasSubstr("log needs a value"));
  EXPECT_THAT(TranslateMount(Parse({"h:1", "/c", "-o", "config"}), "").status().message(),
              HasSubstr("config needs a value"));
  EXPECT_THAT(TranslateMount(Parse({"h:1", "/c", "-o", "splice=maybe"}), "").status().message(),
              HasSubstr("splice=maybe"));
}

}  // namespace
}  // namespace ckptfs::tools
