// InitExtensions against INIT requests and replies laid out as the kernel
// and libfuse lay them out (<linux/fuse.h>).
#include "fuse/init_extensions.h"

#include <linux/fuse.h>
#include <sys/uio.h>

#include <cerrno>
#include <cstddef>
#include <cstring>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"

namespace ckptfs::fuse {
namespace {

constexpr uint32_t kAllowMmapFlags2 = 1u << 4;  // bit 36 of the INIT flags

std::vector<char> Request(uint32_t opcode, uint64_t unique, uint32_t flags, uint32_t flags2) {
  std::vector<char> buf(sizeof(fuse_in_header) + sizeof(fuse_init_in));
  fuse_in_header header{};
  header.len = static_cast<uint32_t>(buf.size());
  header.opcode = opcode;
  header.unique = unique;
  fuse_init_in in{};
  in.major = 7;
  in.minor = 45;
  in.flags = flags;
  in.flags2 = flags2;
  std::memcpy(buf.data(), &header, sizeof(header));
  std::memcpy(buf.data() + sizeof(header), &in, sizeof(in));
  return buf;
}

// A reply as libfuse sends it: header, then the whole fuse_init_out.
struct Reply {
  explicit Reply(uint64_t unique, int32_t error = 0) {
    header.len = sizeof(header) + sizeof(out);
    header.error = error;
    header.unique = unique;
    out.major = 7;
    out.minor = 36;
    out.flags = FUSE_ASYNC_READ | FUSE_INIT_EXT;
    iov[0] = {&header, sizeof(header)};
    iov[1] = {&out, sizeof(out)};
  }
  fuse_out_header header{};
  fuse_init_out out{};
  struct iovec iov[2];
};

TEST(InitExtensionsTest, SetsAllowMmapInTheInitReplyWhenOfferedAndAsked) {
  InitExtensions ext;
  std::vector<char> init = Request(FUSE_INIT, 2, FUSE_INIT_EXT, kAllowMmapFlags2 | 1u);
  ext.OnRequest(init.data(), init.size());
  ASSERT_TRUE(ext.KernelOffersDirectIoAllowMmap());
  ext.AskForDirectIoAllowMmap();
  Reply reply(2);
  ext.OnReply(reply.iov, 2);
  EXPECT_EQ(reply.out.flags2, kAllowMmapFlags2);
  EXPECT_EQ(reply.out.flags, FUSE_ASYNC_READ | FUSE_INIT_EXT);
  EXPECT_TRUE(ext.DirectIoAllowMmapSent());
}

TEST(InitExtensionsTest, LeavesTheReplyAloneUnlessOfferedAndAsked) {
  for (const bool offered : {false, true}) {
    for (const bool asked : {false, true}) {
      if (offered && asked) continue;  // the test above
      SCOPED_TRACE(absl::StrCat("offered ", offered, ", asked ", asked));
      InitExtensions ext;
      std::vector<char> init =
          Request(FUSE_INIT, 2, FUSE_INIT_EXT, offered ? kAllowMmapFlags2 : 1u);
      ext.OnRequest(init.data(), init.size());
      if (asked) ext.AskForDirectIoAllowMmap();
      Reply reply(2);
      ext.OnReply(reply.iov, 2);
      EXPECT_EQ(reply.out.flags2, 0u);
      EXPECT_FALSE(ext.DirectIoAllowMmapSent());
    }
  }
}

TEST(InitExtensionsTest, AnOlderKernelOffersNothing) {
  InitExtensions ext;
  // Flags2 without FUSE_INIT_EXT means nothing; and a kernel without the bit.
  std::vector<char> no_ext = Request(FUSE_INIT, 2, 0, kAllowMmapFlags2);
  ext.OnRequest(no_ext.data(), no_ext.size());
  EXPECT_FALSE(ext.KernelOffersDirectIoAllowMmap());
  std::vector<char> no_bit = Request(FUSE_INIT, 2, FUSE_INIT_EXT, 1u);
  ext.OnRequest(no_bit.data(), no_bit.size());
  EXPECT_FALSE(ext.KernelOffersDirectIoAllowMmap());
  // A request too short to hold flags2 (protocol before 7.36).
  std::vector<char> old = Request(FUSE_INIT, 2, FUSE_INIT_EXT, kAllowMmapFlags2);
  ext.OnRequest(old.data(), sizeof(fuse_in_header) + offsetof(fuse_init_in, flags2));
  EXPECT_FALSE(ext.KernelOffersDirectIoAllowMmap());
}

TEST(InitExtensionsTest, OtherRequestsAndRepliesAreNotTouched) {
  InitExtensions ext;
  std::vector<char> lookup = Request(FUSE_LOOKUP, 7, FUSE_INIT_EXT, kAllowMmapFlags2);
  ext.OnRequest(lookup.data(), lookup.size());
  EXPECT_FALSE(ext.KernelOffersDirectIoAllowMmap());
  std::vector<char> init = Request(FUSE_INIT, 2, FUSE_INIT_EXT, kAllowMmapFlags2);
  ext.OnRequest(init.data(), init.size());
  ext.AskForDirectIoAllowMmap();
  // Another request's reply, a failed INIT, a reply of the header alone and
  // a reply too short for flags2 all pass unchanged.
  Reply other(3);
  ext.OnReply(other.iov, 2);
  EXPECT_EQ(other.out.flags2, 0u);
  Reply failed(2, -EPROTO);
  ext.OnReply(failed.iov, 2);
  EXPECT_EQ(failed.out.flags2, 0u);
  Reply bare(2);
  ext.OnReply(bare.iov, 1);
  EXPECT_FALSE(ext.DirectIoAllowMmapSent());
  Reply short_reply(2);
  short_reply.iov[1].iov_len = offsetof(fuse_init_out, flags2);
  ext.OnReply(short_reply.iov, 2);
  EXPECT_EQ(short_reply.out.flags2, 0u);
  EXPECT_FALSE(ext.DirectIoAllowMmapSent());
  // A reply split after the header into two buffers is found across them.
  Reply split(2);
  struct iovec parts[3] = {split.iov[0],
                           {&split.out, 16},
                           {reinterpret_cast<char*>(&split.out) + 16, sizeof(split.out) - 16}};
  ext.OnReply(parts, 3);
  EXPECT_EQ(split.out.flags2, kAllowMmapFlags2);
  EXPECT_TRUE(ext.DirectIoAllowMmapSent());
}

TEST(InitExtensionsTest, ShortReadsAreIgnored) {
  InitExtensions ext;
  std::vector<char> init = Request(FUSE_INIT, 2, FUSE_INIT_EXT, kAllowMmapFlags2);
  ext.OnRequest(init.data(), sizeof(fuse_in_header) - 1);
  EXPECT_FALSE(ext.KernelOffersDirectIoAllowMmap());
}

}  // namespace
}  // namespace ckptfs::fuse
