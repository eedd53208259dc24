// UringChunkTransport against PipelinedStandIn: round trips and server
// errors, replies a byte at a time, -EAGAIN from non-blocking sockets, a
// full submission queue, 64 requests in flight on one connection answered
// newest first, a server closing in the middle of a reply (fail over, or a
// clean transport error when it is gone), per-request deadlines, garbage
// replies, refused connections, the server-id map refresh, and payloads
// checksummed piece by piece (a corrupt piece is caught).
#include "client/uring_chunk_transport.h"

#include <cerrno>
#include <functional>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "common/crc32c.h"
#include "common/errno_status.h"
#include "common/tcp.h"
#include "gtest/gtest.h"
#include "tests/client/address_book.h"
#include "tests/client/pipelined_stand_in.h"

namespace ckptfs::client {
namespace {

using testing::PipelinedStandIn;

struct TransportSetup {
  absl::Duration timeout = absl::Seconds(20);
  int connections = 2;
  unsigned ring_entries = 64;
  bool nonblocking = false;
  size_t payload_piece_bytes = size_t{256} << 10;
};

TransportSetup OneConnection() {
  TransportSetup setup;
  setup.connections = 1;
  return setup;
}

std::unique_ptr<UringChunkTransport> MakeTransport(AddressBook& book,
                                                   const TransportSetup& setup = {}) {
  UringChunkTransport::Options options;
  options.connections_per_server = setup.connections;
  options.loop.ring_entries = setup.ring_entries;
  options.loop.nonblocking_io_for_testing = setup.nonblocking;
  options.loop.payload_piece_bytes = setup.payload_piece_bytes;
  auto transport = UringChunkTransport::Create(book.meta(), setup.timeout, options);
  EXPECT_TRUE(transport.ok()) << transport.status();
  return transport.ok() ? *std::move(transport) : nullptr;
}

// Runs fn(0..n-1) on n threads at once and waits for all.
void RunConcurrently(int n, const std::function<void(int)>& fn) {
  std::vector<std::thread> threads;
  for (int i = 0; i < n; ++i) threads.emplace_back([&fn, i] { fn(i); });
  for (std::thread& t : threads) t.join();
}

// A chunk's content that names it.
std::string Content(int i, size_t size) {
  std::string s = absl::StrCat("chunk ", i, ":");
  while (s.size() < size) s += static_cast<char>('a' + (s.size() * 7 + i) % 26);
  s.resize(size);
  return s;
}

// Writes then reads back chunk i of inode 1 on server `id`; "" on success,
// else what went wrong.
std::string WriteAndReadBack(UringChunkTransport& transport, uint32_t id, int i, size_t size) {
  const std::string data = Content(i, size);
  absl::Status written = transport.WriteChunk(id, 1, i, 0, data.data(), data.size(), true);
  if (!written.ok()) return absl::StrCat("write ", i, ": ", written.ToString());
  std::string back(size + 10, '\0');
  auto n = transport.ReadChunk(id, 1, i, 0, back.data(), back.size());
  if (!n.ok()) return absl::StrCat("read ", i, ": ", n.status().ToString());
  back.resize(*n);
  if (back != data) return absl::StrCat("chunk ", i, " read back wrong");
  return "";
}

class UringChunkTransportTest : public ::testing::Test {
 protected:
  UringChunkTransportTest() { EXPECT_EQ(book_.Register("server-1", storage_.address()), 1u); }
  PipelinedStandIn storage_;
  AddressBook book_;
};

TEST_F(UringChunkTransportTest, WriteReadHolesAndServerErrors) {
  auto transport = MakeTransport(book_);
  ASSERT_TRUE(transport->RefreshServers().ok());
  const std::string data = "checkpoint bytes";
  ASSERT_TRUE(transport->WriteChunk(1, 9, 3, 0, data.data(), data.size(), true).ok());
  char buf[64];
  auto n = transport->ReadChunk(1, 9, 3, 0, buf, sizeof(buf));
  ASSERT_TRUE(n.ok()) << n.status();
  EXPECT_EQ(std::string(buf, *n), data);  // short: the chunk ends there
  auto missing = transport->ReadChunk(1, 9, 4, 0, buf, sizeof(buf));
  ASSERT_FALSE(missing.ok());
  EXPECT_EQ(ErrnoFromStatus(missing.status()), ENOENT);
  // The caller's CRC32C goes out as given: right, the write lands; wrong,
  // the server's EBADMSG comes back as is (not sent again).
  const std::string more = "more";
  ASSERT_TRUE(transport
                  ->WriteChunk(1, 9, 3, 16, more.data(), more.size(), false,
                               Crc32c(more.data(), more.size()))
                  .ok());
  EXPECT_EQ(storage_.Chunk(9, 3), "checkpoint bytesmore");
  const int requests = storage_.requests.load();
  absl::Status bad = transport->WriteChunk(1, 9, 3, 0, more.data(), more.size(), false, 12345u);
  EXPECT_EQ(ErrnoFromStatus(bad), EBADMSG) << bad;
  EXPECT_EQ(storage_.requests.load(), requests + 1);
  // One caller at a time: every request went over one connection.
  EXPECT_EQ(storage_.connections.load(), 1);
}

TEST_F(UringChunkTransportTest, RepliesArrivingOneByteAtATime) {
  storage_.split_replies = true;
  auto transport = MakeTransport(book_);
  std::vector<std::string> errors(16);
  RunConcurrently(16, [&](int i) { errors[i] = WriteAndReadBack(*transport, 1, i, 700); });
  for (const std::string& e : errors) EXPECT_EQ(e, "");
}

// The loop checksums a READ payload piece by piece as it lands; the sum
// over all pieces must match the server's, and a flipped byte in any piece
// (the first, received with the reply head, a middle one, the last) must
// still fail the read with EBADMSG.
TEST_F(UringChunkTransportTest, PayloadChecksummedPieceByPieceCatchesACorruptPiece) {
  TransportSetup setup = OneConnection();
  setup.payload_piece_bytes = 4096;
  auto transport = MakeTransport(book_, setup);
  const size_t size = (size_t{256} << 10) + 123;
  const std::string data = Content(7, size);
  ASSERT_TRUE(transport->WriteChunk(1, 5, 7, 0, data.data(), data.size(), true).ok());
  std::string back(size, '\0');
  const uint64_t recvs = transport->loop_counters().payload_recvs.load();
  auto n = transport->ReadChunk(1, 5, 7, 0, back.data(), back.size());
  ASSERT_TRUE(n.ok()) << n.status();
  EXPECT_EQ(back.substr(0, *n), data);
  // Received in pieces of at most 4 KiB, but for what the staging recv
  // already armed when the READ went out took with the reply's head (at
  // most its 64 KiB, copied out and checksummed in one go).
  EXPECT_GE(transport->loop_counters().payload_recvs.load() - recvs,
            (size - (size_t{64} << 10)) / 4096);
  for (size_t at :
       {size_t{0}, size_t{3}, size_t{40000}, size_t{200001}, size / 4096 * 4096, size - 1}) {
    storage_.corrupt_payload_at = at;
    storage_.corrupt_payload_next = 1;
    auto bad = transport->ReadChunk(1, 5, 7, 0, back.data(), back.size());
    ASSERT_FALSE(bad.ok()) << "byte " << at << " flipped, read still succeeded";
    EXPECT_EQ(ErrnoFromStatus(bad.status()), EBADMSG) << bad.status();
    EXPECT_EQ(storage_.corrupt_payload_next.load(), 0);
  }
  // The same with the whole payload in one recv.
  TransportSetup whole = OneConnection();
  whole.payload_piece_bytes = 0;
  auto transport2 = MakeTransport(book_, whole);
  n = transport2->ReadChunk(1, 5, 7, 0, back.data(), back.size());
  ASSERT_TRUE(n.ok()) << n.status();
  EXPECT_EQ(back.substr(0, *n), data);
  storage_.corrupt_payload_at = 50000;
  storage_.corrupt_payload_next = 1;
  auto bad = transport2->ReadChunk(1, 5, 7, 0, back.data(), back.size());
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(ErrnoFromStatus(bad.status()), EBADMSG) << bad.status();
}

TEST_F(UringChunkTransportTest, EagainFromNonblockingSocketsIsRetried) {
  storage_.split_replies = true;
  TransportSetup setup;
  setup.nonblocking = true;
  auto transport = MakeTransport(book_, setup);
  std::vector<std::string> errors(8);
  RunConcurrently(8, [&](int i) { errors[i] = WriteAndReadBack(*transport, 1, i, 500); });
  for (const std::string& e : errors) EXPECT_EQ(e, "");
  // The replies trickle in, so recvs found empty sockets.
  EXPECT_GT(transport->loop_counters().recv_again.load(), 0u);
}

TEST_F(UringChunkTransportTest, FullSocketsMakeSendsShortOrEagainAndTheyResume) {
  PipelinedStandIn slow;
  slow.read_delay_us = 2000;
  ASSERT_EQ(book_.Register("server-2", slow.address()), 2u);
  TransportSetup setup;
  setup.connections = 1;
  setup.nonblocking = true;
  auto transport = MakeTransport(book_, setup);
  std::vector<std::string> errors(4);
  RunConcurrently(4, [&](int i) { errors[i] = WriteAndReadBack(*transport, 2, i, 4 << 20); });
  for (const std::string& e : errors) EXPECT_EQ(e, "");
  const auto& counters = transport->loop_counters();
  EXPECT_GT(counters.resumed_sends.load() + counters.send_again.load(), 0u);
}

TEST_F(UringChunkTransportTest, FullSubmissionQueueWith200Callers) {
  PipelinedStandIn second;
  ASSERT_EQ(book_.Register("server-2", second.address()), 2u);
  // One submission slot for 8 connections, each wanting a recv and a send.
  TransportSetup setup;
  setup.connections = 4;
  setup.ring_entries = 1;
  auto transport = MakeTransport(book_, setup);
  std::vector<std::string> errors(200);
  RunConcurrently(200,
                  [&](int i) { errors[i] = WriteAndReadBack(*transport, 1 + i % 2, i, 3000 + i); });
  for (const std::string& e : errors) EXPECT_EQ(e, "");
  EXPECT_GT(transport->loop_counters().ring_full.load(), 0u);
  EXPECT_LE(storage_.connections.load() + second.connections.load(), 8);
}

TEST_F(UringChunkTransportTest, SixtyFourInFlightOnOneConnectionAnsweredNewestFirst) {
  auto transport = MakeTransport(book_, OneConnection());
  constexpr int kCalls = 64;
  for (int i = 0; i < kCalls; ++i) {
    const std::string data = Content(i, 1000 + i);
    ASSERT_TRUE(transport->WriteChunk(1, 1, i, 0, data.data(), data.size(), true).ok());
  }
  // The server answers only once it holds 64 requests, newest first: each
  // READ's payload must land in its own caller's buffer.
  storage_.hold_until = kCalls;
  std::vector<std::string> got(kCalls);
  std::vector<absl::Status> statuses(kCalls);
  RunConcurrently(kCalls, [&](int i) {
    std::string buf(4096, '\0');
    auto n = transport->ReadChunk(1, 1, i, 0, buf.data(), buf.size());
    statuses[i] = n.status();
    if (n.ok()) got[i] = buf.substr(0, *n);
  });
  for (int i = 0; i < kCalls; ++i) {
    ASSERT_TRUE(statuses[i].ok()) << statuses[i];
    EXPECT_EQ(got[i], Content(i, 1000 + i)) << "chunk " << i;
  }
  EXPECT_GE(storage_.most_pending.load(), kCalls);
  EXPECT_GE(transport->loop_counters().most_waiting.load(), static_cast<uint64_t>(kCalls));
  // WRITEs too, with their payloads.
  RunConcurrently(kCalls, [&](int i) {
    const std::string data = Content(i + 100, 2000);
    statuses[i] = transport->WriteChunk(1, 2, i, 0, data.data(), data.size(), true);
  });
  for (int i = 0; i < kCalls; ++i) {
    ASSERT_TRUE(statuses[i].ok()) << statuses[i];
    EXPECT_EQ(storage_.Chunk(2, i), Content(i + 100, 2000));
  }
  EXPECT_EQ(storage_.connections.load(), 1);
}

TEST_F(UringChunkTransportTest, ServerClosingMidFrameFailsOverToAFreshConnection) {
  auto transport = MakeTransport(book_, OneConnection());
  ASSERT_TRUE(transport->WriteChunk(1, 1, 0, 0, "x", 1, true).ok());
  // 16 requests in flight; the first reply stops halfway and the server
  // closes: all 16 fail on that connection and go again on a new one.
  storage_.hold_until = 16;
  storage_.close_mid_frame_next = 1;
  std::vector<std::string> errors(16);
  RunConcurrently(16, [&](int i) {
    const std::string data = Content(i, 5000);
    absl::Status s = transport->WriteChunk(1, 3, i, 0, data.data(), data.size(), true);
    if (!s.ok()) errors[i] = s.ToString();
  });
  for (const std::string& e : errors) EXPECT_EQ(e, "");
  for (int i = 0; i < 16; ++i) EXPECT_EQ(storage_.Chunk(3, i), Content(i, 5000));
  EXPECT_EQ(storage_.connections.load(), 2);
  // READs too: the cut falls inside a payload being received straight into
  // its caller's buffer.
  storage_.close_mid_frame_next = 1;
  RunConcurrently(16, [&](int i) {
    std::string buf(8000, '\0');
    auto n = transport->ReadChunk(1, 3, i, 0, buf.data(), buf.size());
    if (!n.ok()) {
      errors[i] = n.status().ToString();
    } else if (buf.substr(0, *n) != Content(i, 5000)) {
      errors[i] = absl::StrCat("chunk ", i, " read back wrong");
    }
  });
  for (const std::string& e : errors) EXPECT_EQ(e, "");
  EXPECT_EQ(storage_.connections.load(), 3);
}

// A WRITE sent again after its connection died names the attempt before it,
// so that the server drops that attempt if it still holds it: a late
// original never lands after the resend (server/storage/resend_fence.h).
TEST_F(UringChunkTransportTest, AResentWriteSupersedesTheAttemptBeforeIt) {
  auto transport = MakeTransport(book_, OneConnection());
  ASSERT_TRUE(transport->WriteChunk(1, 4, 0, 0, "x", 1, true).ok());
  storage_.drop_next = 1;  // read, then the connection is cut unanswered
  ASSERT_TRUE(transport->WriteChunk(1, 4, 0, 0, "y", 1, true).ok());
  ASSERT_TRUE(transport->TrimChunks(1, 4, 0, 1 << 20).ok());
  const std::vector<data::RequestHeader> sent = storage_.Mutations();
  ASSERT_EQ(sent.size(), 4u);
  for (const data::RequestHeader& request : sent) {
    EXPECT_NE(request.client_id(), 0u);
    EXPECT_EQ(request.client_id(), sent[0].client_id());
    EXPECT_NE(request.write_id(), 0u);
  }
  EXPECT_EQ(sent[0].supersedes_size(), 0);
  EXPECT_EQ(sent[1].supersedes_size(), 0);  // the attempt that was cut
  ASSERT_EQ(sent[2].supersedes_size(), 1);  // its resend
  EXPECT_EQ(sent[2].supersedes(0), sent[1].write_id());
  EXPECT_NE(sent[2].write_id(), sent[1].write_id());
  EXPECT_EQ(sent[3].op(), data::TRIM);
  EXPECT_EQ(sent[3].supersedes_size(), 0);
}

TEST_F(UringChunkTransportTest, ServerGoneIsACleanTransportError) {
  auto transport = MakeTransport(book_);
  ASSERT_TRUE(transport->WriteChunk(1, 1, 0, 0, "x", 1, true).ok());
  storage_.close_mid_frame_next = 1000;  // every reply cut short
  char buf[16];
  auto n = transport->ReadChunk(1, 1, 0, 0, buf, sizeof(buf));
  ASSERT_FALSE(n.ok());
  EXPECT_EQ(n.status().code(), absl::StatusCode::kUnavailable) << n.status();
  EXPECT_EQ(ErrnoFromStatus(n.status()), ECONNRESET) << n.status();
  storage_.Stop();  // nothing listens any more
  absl::Status s = transport->WriteChunk(1, 1, 0, 0, "y", 1, true);
  EXPECT_EQ(s.code(), absl::StatusCode::kUnavailable) << s;
}

TEST_F(UringChunkTransportTest, RequestsPastTheirDeadline) {
  TransportSetup setup;
  setup.timeout = absl::Seconds(2);
  auto transport = MakeTransport(book_, setup);
  ASSERT_TRUE(transport->WriteChunk(1, 9, 0, 0, "a", 1, true).ok());
  // A READ that gets no answer fails its connection and is asked again.
  storage_.stall_next = 1;
  char buf[4];
  auto n = transport->ReadChunk(1, 9, 0, 0, buf, sizeof(buf));
  ASSERT_TRUE(n.ok()) << n.status();
  EXPECT_EQ(std::string(buf, *n), "a");
  EXPECT_EQ(storage_.connections.load(), 2);
  // A WRITE is not: the slow server may still apply it after a newer one.
  storage_.stall_next = 1;
  const int applied = storage_.writes_applied.load();
  absl::Status s = transport->WriteChunk(1, 9, 0, 0, "b", 1, true);
  EXPECT_EQ(ErrnoFromStatus(s), ETIMEDOUT) << s;
  EXPECT_EQ(storage_.writes_applied.load(), applied + 1) << "the write was sent again";
}

TEST_F(UringChunkTransportTest, GarbageOrUnexpectedRepliesBreakTheConnection) {
  auto transport = MakeTransport(book_, OneConnection());
  storage_.garbage_next = 1;
  ASSERT_TRUE(transport->WriteChunk(1, 1, 0, 0, "a", 1, true).ok());
  EXPECT_EQ(storage_.connections.load(), 2);
  storage_.wrong_id_next = 1;
  ASSERT_TRUE(transport->WriteChunk(1, 1, 0, 0, "b", 1, true).ok());
  EXPECT_EQ(storage_.connections.load(), 3);
  storage_.garbage_next = 2;  // on the fresh connection too
  absl::Status s = transport->WriteChunk(1, 1, 0, 0, "c", 1, true);
  EXPECT_EQ(s.code(), absl::StatusCode::kUnavailable) << s;
  EXPECT_EQ(ErrnoFromStatus(s), EBADMSG) << s;
}

TEST_F(UringChunkTransportTest, RefusedConnectionKeepsTheServersErrno) {
  storage_.refuse_with = EAGAIN;
  auto transport = MakeTransport(book_);
  absl::Status s = transport->WriteChunk(1, 1, 0, 0, "a", 1, true);
  EXPECT_EQ(ErrnoFromStatus(s), EAGAIN) << s;
  EXPECT_NE(s.message().find("too many connections"), absl::string_view::npos) << s;
}

TEST_F(UringChunkTransportTest, ServerMapIsRefreshedForUnknownIdsAndMovedServers) {
  AddressBook book;
  auto transport = MakeTransport(book);
  ASSERT_TRUE(transport->RefreshServers().ok());  // empty
  // A server registers later.
  const uint32_t later = book.Register("later", storage_.address());
  ASSERT_TRUE(transport->WriteChunk(later, 1, 0, 0, "x", 1, true).ok());
  absl::Status unknown = transport->WriteChunk(later + 1, 1, 0, 0, "x", 1, true);
  ASSERT_FALSE(unknown.ok());
  EXPECT_NE(unknown.message().find("unknown"), absl::string_view::npos) << unknown;
  // The server restarts elsewhere (the same data directory registers from
  // another address): its old connection fails, the map is loaded again,
  // and the request reaches the new address.
  PipelinedStandIn moved;
  ASSERT_EQ(book.Register("later", moved.address()), later);
  storage_.Stop();
  ASSERT_TRUE(transport->WriteChunk(later, 1, 0, 0, "y", 1, true).ok());
  EXPECT_EQ(moved.Chunk(1, 0), "y");
}

TEST_F(UringChunkTransportTest, DeadServerIsAnError) {
  AddressBook book;
  uint16_t port = 0;
  {
    auto fd = ListenTcp(HostPort{"127.0.0.1", 0});  // bound, then closed
    ASSERT_TRUE(fd.ok());
    port = *LocalPort(fd->get());
  }
  ASSERT_EQ(book.Register("gone", absl::StrCat("127.0.0.1:", port)), 1u);
  TransportSetup setup;
  setup.timeout = absl::Seconds(2);
  auto transport = MakeTransport(book, setup);
  absl::Status s = transport->WriteChunk(1, 1, 0, 0, "x", 1, true);
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.code(), absl::StatusCode::kUnavailable);
}

}  // namespace
}  // namespace ckptfs::client
