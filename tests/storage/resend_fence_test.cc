// A WRITE or TRIM that a client resent after its connection failed is never
// applied after the resend: the storage server's RequestHandler (with a real
// ChunkStore) gets the requests in the order its disk queue could hand them
// over — the resend, a newer write of the same chunk, then the late
// original — and the chunk keeps the newer write. Also ResendFence on its
// own: which requests it orders, and that it forgets old ids.
#include "server/storage/resend_fence.h"

#include <cerrno>
#include <string>

#include "common/crc32c.h"
#include "common/errno_status.h"
#include "common/uring.h"
#include "gtest/gtest.h"
#include "server/storage/chunk_store.h"
#include "server/storage/request_handler.h"
#include "tests/storage/temp_dir.h"

namespace ckptfs::storage {
namespace {

constexpr uint64_t kClient = 0xC11E47;

class ResendOrderTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto store = ChunkStore::Open(dir_.path());
    ASSERT_TRUE(store.ok()) << store.status();
    store_ = *std::move(store);
    auto ring = Ring::Create(16);
    ASSERT_TRUE(ring.ok()) << ring.status();
    ring_ = *std::move(ring);
    handler_ = std::make_unique<RequestHandler>(*store_);
  }

  // A whole-chunk WRITE of chunk 0 of inode 7, attempt `write_id`.
  static data::RequestHeader Write(const std::string& data, uint64_t write_id) {
    data::RequestHeader request;
    request.set_op(data::WRITE);
    request.set_ino(7);
    request.set_replace(true);
    request.set_payload_crc32c(Crc32c(data.data(), data.size()));
    request.set_client_id(kClient);
    request.set_write_id(write_id);
    return request;
  }

  // The errno of the reply (0: done).
  int Execute(data::RequestHeader request, const std::string& payload = "") {
    request.set_request_id(++next_request_id_);
    AlignedBuffer buffer;
    EXPECT_TRUE(buffer.Reserve(payload.size()).ok());
    std::copy(payload.begin(), payload.end(), buffer.data());
    buffer.set_size(payload.size());
    Reply reply = handler_->Handle(*ring_, request, buffer, read_buffer_);
    return reply.header.error();
  }

  std::string Chunk() {
    data::RequestHeader read;
    read.set_op(data::READ);
    read.set_ino(7);
    read.set_length(1 << 20);
    read.set_request_id(++next_request_id_);
    EXPECT_TRUE(read_buffer_.Reserve(ReadBufferSize(read)).ok());
    AlignedBuffer none;
    Reply reply = handler_->Handle(*ring_, read, none, read_buffer_);
    if (reply.header.error() != 0) return "errno " + std::to_string(reply.header.error());
    return std::string(reply.payload);
  }

  TempDir dir_;
  std::unique_ptr<ChunkStore> store_;
  std::unique_ptr<Ring> ring_;
  std::unique_ptr<RequestHandler> handler_;
  AlignedBuffer read_buffer_;
  uint64_t next_request_id_ = 0;
};

TEST_F(ResendOrderTest, ALateOriginalNeverUndoesANewerWriteAfterItsResend) {
  const std::string old_bytes(4096, 'o');
  const std::string new_bytes(4096, 'n');
  // Attempt 1 went out on a connection that was then reset; it waits in the
  // server's queue. The client resends it as attempt 2, then writes newer
  // bytes (attempt 3) once that is acknowledged.
  data::RequestHeader original = Write(old_bytes, 1);
  data::RequestHeader resend = Write(old_bytes, 2);
  resend.add_supersedes(1);
  ASSERT_EQ(Execute(resend, old_bytes), 0);
  ASSERT_EQ(Execute(Write(new_bytes, 3), new_bytes), 0);
  // Now the queue hands over the original.
  EXPECT_EQ(Execute(original, old_bytes), ESTALE);
  EXPECT_TRUE(Chunk() == new_bytes) << "the late original undid the newer write";
}

TEST_F(ResendOrderTest, ALateTrimNeverCutsWhatWasWrittenAfterItsResend) {
  data::RequestHeader trim;
  trim.set_op(data::TRIM);
  trim.set_ino(7);
  trim.set_trim_size(0);
  trim.set_chunk_size(1 << 20);
  trim.set_client_id(kClient);
  trim.set_write_id(10);
  data::RequestHeader resend = trim;
  resend.set_write_id(11);
  resend.add_supersedes(10);
  ASSERT_EQ(Execute(resend), 0);
  const std::string data(4096, 'd');
  ASSERT_EQ(Execute(Write(data, 12), data), 0);
  EXPECT_EQ(Execute(trim), ESTALE);
  EXPECT_TRUE(Chunk() == data) << "the late truncate cut the write that followed its resend";
}

TEST_F(ResendOrderTest, AnOriginalAppliedBeforeItsResendLeavesTheResendToApply) {
  const std::string bytes(4096, 'b');
  ASSERT_EQ(Execute(Write(bytes, 1), bytes), 0);
  data::RequestHeader resend = Write(bytes, 2);
  resend.add_supersedes(1);
  EXPECT_EQ(Execute(resend, bytes), 0);
  EXPECT_TRUE(Chunk() == bytes);
}

TEST(ResendFenceTest, OnlyStampedWritesAndTrimsAreOrdered) {
  ResendFence fence;
  data::RequestHeader read;
  read.set_op(data::READ);
  read.set_client_id(kClient);
  read.set_write_id(1);
  read.add_supersedes(5);
  EXPECT_TRUE(fence.Admit(read).ok());
  EXPECT_EQ(fence.size(), 0u);
  data::RequestHeader unstamped;  // an older client: no client id
  unstamped.set_op(data::WRITE);
  unstamped.add_supersedes(5);
  EXPECT_TRUE(fence.Admit(unstamped).ok());
  EXPECT_EQ(fence.size(), 0u);
}

TEST(ResendFenceTest, IdsOfAnotherClientAreNotSuperseded) {
  ResendFence fence;
  data::RequestHeader resend;
  resend.set_op(data::WRITE);
  resend.set_client_id(1);
  resend.set_write_id(2);
  resend.add_supersedes(1);
  { ASSERT_TRUE(fence.Admit(resend).ok()); }
  data::RequestHeader other;
  other.set_op(data::WRITE);
  other.set_client_id(2);
  other.set_write_id(1);
  EXPECT_TRUE(fence.Admit(other).ok());
}

TEST(ResendFenceTest, OldIdsAreForgottenPastTheLimit) {
  ResendFence::Options options;
  options.max_entries = 2;
  ResendFence fence(options);
  data::RequestHeader resend;
  resend.set_op(data::WRITE);
  resend.set_client_id(1);
  resend.set_write_id(100);
  for (uint64_t id : {1, 2, 3}) resend.add_supersedes(id);
  { ASSERT_TRUE(fence.Admit(resend).ok()); }
  EXPECT_EQ(fence.size(), 2u);
  data::RequestHeader late;
  late.set_op(data::WRITE);
  late.set_client_id(1);
  late.set_write_id(3);
  EXPECT_EQ(ErrnoFromStatus(fence.Admit(late).status()), ESTALE);
}

}  // namespace
}  // namespace ckptfs::storage
