// Frame prefix encoding/decoding with every rejection, and whole frames over
// a socket pair.
#include "common/frame.h"

#include <sys/socket.h>

#include <cerrno>
#include <string>
#include <thread>

#include "common/errno_status.h"
#include "common/tcp.h"
#include "common/unique_fd.h"
#include "gtest/gtest.h"
#include "proto/data.pb.h"

namespace ckptfs {
namespace {

std::string Prefix(uint32_t magic, uint32_t header_len, uint32_t payload_len) {
  std::string out(kFramePrefixSize, '\0');
  for (int i = 0; i < 4; ++i) {
    out[i] = static_cast<char>(magic >> (8 * i));
    out[4 + i] = static_cast<char>(header_len >> (8 * i));
    out[8 + i] = static_cast<char>(payload_len >> (8 * i));
  }
  return out;
}

TEST(FramePrefixTest, RoundTrips) {
  char raw[kFramePrefixSize];
  EncodeFramePrefix({17, 4u << 20}, raw);
  EXPECT_EQ(std::string(raw, 4), "CKF1");
  auto prefix = DecodeFramePrefix(absl::string_view(raw, sizeof(raw)));
  ASSERT_TRUE(prefix.ok()) << prefix.status();
  EXPECT_EQ(prefix->header_len, 17u);
  EXPECT_EQ(prefix->payload_len, 4u << 20);
}

TEST(FramePrefixTest, AcceptsTheLimits) {
  EXPECT_TRUE(DecodeFramePrefix(Prefix(kFrameMagic, 1, 0)).ok());
  EXPECT_TRUE(DecodeFramePrefix(Prefix(kFrameMagic, kMaxFrameHeader, kMaxFramePayload)).ok());
}

TEST(FramePrefixTest, RejectsBadMagic) {
  auto prefix = DecodeFramePrefix(Prefix(0x20544547 /* "GET " */, 10, 0));
  ASSERT_FALSE(prefix.ok());
  EXPECT_EQ(ErrnoFromStatus(prefix.status()), EBADMSG);
  EXPECT_NE(prefix.status().message().find("magic"), absl::string_view::npos);
}

TEST(FramePrefixTest, RejectsTruncated) {
  const std::string full = Prefix(kFrameMagic, 10, 0);
  for (size_t n = 0; n < kFramePrefixSize; ++n) {
    auto prefix = DecodeFramePrefix(absl::string_view(full.data(), n));
    ASSERT_FALSE(prefix.ok()) << n;
    EXPECT_EQ(ErrnoFromStatus(prefix.status()), EBADMSG) << n;
  }
}

TEST(FramePrefixTest, RejectsEmptyOrOversizedHeader) {
  for (uint32_t len : {0u, kMaxFrameHeader + 1, 0xffffffffu}) {
    auto prefix = DecodeFramePrefix(Prefix(kFrameMagic, len, 0));
    ASSERT_FALSE(prefix.ok()) << len;
    EXPECT_EQ(ErrnoFromStatus(prefix.status()), EMSGSIZE) << len;
    EXPECT_NE(prefix.status().message().find("header"), absl::string_view::npos);
  }
}

TEST(FramePrefixTest, RejectsOversizedPayload) {
  for (uint32_t len : {kMaxFramePayload + 1, 0xffffffffu}) {
    auto prefix = DecodeFramePrefix(Prefix(kFrameMagic, 8, len));
    ASSERT_FALSE(prefix.ok()) << len;
    EXPECT_EQ(ErrnoFromStatus(prefix.status()), EMSGSIZE) << len;
    EXPECT_NE(prefix.status().message().find("payload"), absl::string_view::npos);
  }
  // A caller's tighter limit applies too.
  auto prefix = DecodeFramePrefix(Prefix(kFrameMagic, 8, 1025), 1024);
  ASSERT_FALSE(prefix.ok());
  EXPECT_EQ(ErrnoFromStatus(prefix.status()), EMSGSIZE);
}

class FrameSocketTest : public ::testing::Test {
 protected:
  void SetUp() override {
    int fds[2];
    ASSERT_EQ(::socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, fds), 0);
    a_.Reset(fds[0]);
    b_.Reset(fds[1]);
  }
  UniqueFd a_, b_;
};

TEST_F(FrameSocketTest, WritesAndReadsAFrameWithPayload) {
  data::RequestHeader out;
  out.set_request_id(42);
  out.set_op(data::WRITE);
  out.set_ino(7);
  const std::string payload = "chunk bytes";
  ASSERT_TRUE(WriteFrame(a_.get(), out, payload.data(), payload.size()).ok());
  data::RequestHeader in;
  auto prefix = ReadFrameHead(b_.get(), in);
  ASSERT_TRUE(prefix.ok()) << prefix.status();
  EXPECT_EQ(in.request_id(), 42u);
  EXPECT_EQ(in.op(), data::WRITE);
  EXPECT_EQ(in.ino(), 7u);
  ASSERT_EQ(prefix->payload_len, payload.size());
  std::string got(payload.size(), '\0');
  ASSERT_TRUE(RecvAll(b_.get(), got.data(), got.size()).ok());
  EXPECT_EQ(got, payload);
}

TEST_F(FrameSocketTest, DiscardPayloadSkipsToTheNextFrame) {
  data::RequestHeader first;
  first.set_request_id(1);
  const std::string big(200000, 'p');
  ASSERT_TRUE(SendAll(a_.get(), "", 0).ok());
  std::thread writer([&] {
    ASSERT_TRUE(WriteFrame(a_.get(), first, big.data(), big.size()).ok());
    data::RequestHeader second;
    second.set_request_id(2);
    ASSERT_TRUE(WriteFrame(a_.get(), second, nullptr, 0).ok());
  });
  data::RequestHeader in;
  auto prefix = ReadFrameHead(b_.get(), in);
  ASSERT_TRUE(prefix.ok());
  ASSERT_TRUE(DiscardPayload(b_.get(), prefix->payload_len).ok());
  prefix = ReadFrameHead(b_.get(), in);
  writer.join();
  ASSERT_TRUE(prefix.ok());
  EXPECT_EQ(in.request_id(), 2u);
  EXPECT_EQ(prefix->payload_len, 0u);
}

TEST_F(FrameSocketTest, CleanCloseIsEndOfStream) {
  a_.Reset();
  data::RequestHeader in;
  auto prefix = ReadFrameHead(b_.get(), in);
  ASSERT_FALSE(prefix.ok());
  EXPECT_TRUE(IsEndOfStream(prefix.status()));
}

TEST_F(FrameSocketTest, CloseInsideAFrameIsAnError) {
  std::string partial = Prefix(kFrameMagic, 100, 0) + "abc";
  ASSERT_TRUE(SendAll(a_.get(), partial.data(), partial.size()).ok());
  a_.Reset();
  data::RequestHeader in;
  auto prefix = ReadFrameHead(b_.get(), in);
  ASSERT_FALSE(prefix.ok());
  EXPECT_FALSE(IsEndOfStream(prefix.status()));
  EXPECT_EQ(ErrnoFromStatus(prefix.status()), ECONNRESET);
}

TEST_F(FrameSocketTest, GarbageHeaderIsBadMessage) {
  // 0xff... is not a valid protobuf field encoding.
  std::string frame = Prefix(kFrameMagic, 4, 0) + std::string(4, '\xff');
  ASSERT_TRUE(SendAll(a_.get(), frame.data(), frame.size()).ok());
  data::RequestHeader in;
  auto prefix = ReadFrameHead(b_.get(), in);
  ASSERT_FALSE(prefix.ok());
  EXPECT_EQ(ErrnoFromStatus(prefix.status()), EBADMSG);
}

TEST_F(FrameSocketTest, BadPrefixOnTheWireIsRejected) {
  std::string frame = Prefix(kFrameMagic, 8, kMaxFramePayload + 1);
  ASSERT_TRUE(SendAll(a_.get(), frame.data(), frame.size()).ok());
  data::RequestHeader in;
  auto prefix = ReadFrameHead(b_.get(), in);
  ASSERT_FALSE(prefix.ok());
  EXPECT_EQ(ErrnoFromStatus(prefix.status()), EMSGSIZE);
}

TEST(WriteFrameTest, RefusesOversizedPayload) {
  int fds[2];
  ASSERT_EQ(::socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, fds), 0);
  UniqueFd a(fds[0]), b(fds[1]);
  data::RequestHeader out;
  out.set_request_id(1);
  static char dummy;
  absl::Status s = WriteFrame(a.get(), out, &dummy, size_t{kMaxFramePayload} + 1);
  EXPECT_EQ(ErrnoFromStatus(s), EMSGSIZE);
}

}  // namespace
}  // namespace ckptfs

namespace ckptfs {
namespace {

TEST(WriteFrameTest, RefusesAnEmptyHeader) {
  int fds[2];
  ASSERT_EQ(::socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, fds), 0);
  UniqueFd a(fds[0]), b(fds[1]);
  data::ResponseHeader empty;  // serializes to zero bytes
  absl::Status s = WriteFrame(a.get(), empty, nullptr, 0);
  EXPECT_EQ(ErrnoFromStatus(s), EINVAL) << s;
}

}  // namespace
}  // namespace ckptfs
