// The io_uring data path under stress, in-process: frames trickling in a
// byte at a time, many requests in flight on one connection, peers that
// vanish or stall, a buffer pool too small for the load, a submission queue
// far smaller than the operations in flight, and zero-copy replies.
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/socket.h>

#include <atomic>
#include <cerrno>
#include <map>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "common/crc32c.h"
#include "common/data_connection.h"
#include "common/errno_status.h"
#include "common/frame.h"
#include "common/tcp.h"
#include "gtest/gtest.h"
#include "proto/data.pb.h"
#include "server/storage/server.h"
#include "tests/common/recv_eof.h"
#include "tests/storage/temp_dir.h"

namespace ckptfs::storage {
namespace {

std::string Pattern(size_t n, int seed) {
  std::string s(n, '\0');
  uint32_t x = static_cast<uint32_t>(seed) * 2654435761u + 1;
  for (size_t i = 0; i < n; ++i) {
    x = x * 1103515245u + 12345u;
    s[i] = static_cast<char>(x >> 16);
  }
  return s;
}

// Polls `done` until it holds, for at most about 30 s (a bound for a hung
// server, not a timing assertion).
template <typename F>
bool Eventually(F done) {
  for (int i = 0; i < 3000; ++i) {
    if (done()) return true;
    absl::SleepFor(absl::Milliseconds(10));
  }
  return done();
}

data::RequestHeader WriteHeader(uint64_t id, uint64_t ino, uint32_t index,
                                const std::string& data) {
  data::RequestHeader request;
  request.set_request_id(id);
  request.set_op(data::WRITE);
  request.set_ino(ino);
  request.set_chunk_index(index);
  request.set_replace(true);
  request.set_payload_crc32c(Crc32c(data.data(), data.size()));
  return request;
}

data::RequestHeader ReadHeader(uint64_t id, uint64_t ino, uint32_t index, uint32_t length) {
  data::RequestHeader request;
  request.set_request_id(id);
  request.set_op(data::READ);
  request.set_ino(ino);
  request.set_chunk_index(index);
  request.set_length(length);
  return request;
}

// The bytes of one request frame.
std::string Frame(const data::RequestHeader& header, const std::string& payload = "") {
  std::string out(kFramePrefixSize, '\0');
  header.AppendToString(&out);
  EncodeFramePrefix(
      {static_cast<uint32_t>(out.size() - kFramePrefixSize), static_cast<uint32_t>(payload.size())},
      out.data());
  return out + payload;
}

struct RawReply {
  data::ResponseHeader header;
  std::string payload;
};

absl::StatusOr<RawReply> ReadRawReply(int fd) {
  RawReply reply;
  auto prefix = ReadFrameHead(fd, reply.header);
  if (!prefix.ok()) return prefix.status();
  reply.payload.resize(prefix->payload_len);
  if (absl::Status s = RecvAll(fd, reply.payload.data(), reply.payload.size()); !s.ok()) {
    return s;
  }
  return reply;
}

class PipelineTest : public ::testing::Test {
 protected:
  void StartServer(Server::Options options) {
    ASSERT_FALSE(dir_.path().empty());
    auto store = ChunkStore::Open(dir_.path());
    ASSERT_TRUE(store.ok()) << store.status();
    store_ = *std::move(store);
    if (options.buffer_pool_bytes == Server::Options().buffer_pool_bytes) {
      options.buffer_pool_bytes = kMinBufferPoolBytes;  // quick to populate
    }
    auto server = Server::Start(*store_, {"127.0.0.1", 0}, options);
    ASSERT_TRUE(server.ok()) << server.status();
    server_ = *std::move(server);
  }
  void TearDown() override {
    if (server_) server_->Stop();
  }

  UniqueFd RawSocket() {
    auto fd = ConnectTcp(server_->address(), absl::Seconds(10));
    EXPECT_TRUE(fd.ok()) << fd.status();
    if (!fd.ok()) return UniqueFd();
    EXPECT_TRUE(SetSocketTimeouts(fd->get(), absl::Seconds(30)).ok());
    return *std::move(fd);
  }

  std::unique_ptr<DataConnection> Connect() {
    auto connection = DataConnection::Connect(server_->address(), absl::Seconds(30));
    EXPECT_TRUE(connection.ok()) << connection.status();
    return connection.ok() ? *std::move(connection) : nullptr;
  }

  absl::Status Write(DataConnection& c, uint64_t ino, uint32_t index, const std::string& data) {
    data::RequestHeader request = WriteHeader(0, ino, index, data);
    return c.Call(request, data.data(), data.size(), nullptr, 0).status();
  }

  absl::StatusOr<std::string> Read(DataConnection& c, uint64_t ino, uint32_t index,
                                   uint32_t length) {
    std::string out(length, '\0');
    auto response = c.Call(ReadHeader(0, ino, index, length), nullptr, 0, out.data(), out.size());
    if (!response.ok()) return response.status();
    out.resize(response->payload_len);
    return out;
  }

  bool PoolIdle() { return server_->buffer_pool().stats().in_use == 0; }

  TempDir dir_;
  std::unique_ptr<ChunkStore> store_;
  std::unique_ptr<Server> server_;
};

TEST_F(PipelineTest, FrameSentOneByteAtATimeIsServed) {
  ASSERT_NO_FATAL_FAILURE(StartServer(Server::Options()));
  UniqueFd raw = RawSocket();
  const std::string data = Pattern(5000, 1);
  const std::string write = Frame(WriteHeader(7, 1, 0, data), data);
  for (char byte : write) ASSERT_TRUE(SendAll(raw.get(), &byte, 1).ok());
  auto reply = ReadRawReply(raw.get());
  ASSERT_TRUE(reply.ok()) << reply.status();
  EXPECT_EQ(reply->header.request_id(), 7u);
  EXPECT_EQ(reply->header.error(), 0) << reply->header.message();
  const std::string read = Frame(ReadHeader(8, 1, 0, 6000));
  for (char byte : read) ASSERT_TRUE(SendAll(raw.get(), &byte, 1).ok());
  reply = ReadRawReply(raw.get());
  ASSERT_TRUE(reply.ok()) << reply.status();
  EXPECT_EQ(reply->header.request_id(), 8u);
  EXPECT_TRUE(reply->payload == data);
  EXPECT_EQ(reply->header.payload_crc32c(), Crc32c(data.data(), data.size()));
}

// With nonblocking_sockets every receive or send that finds nothing to do
// comes back EAGAIN (io_uring otherwise waits inside the kernel); each must
// be retried, and nothing may be lost or reordered within a frame.
TEST_F(PipelineTest, EagainIsRetried) {
  Server::Options options;
  options.nonblocking_sockets = true;
  ASSERT_NO_FATAL_FAILURE(StartServer(options));
  UniqueFd raw = RawSocket();
  // A frame in two parts: the receive for the rest finds nothing at first.
  const std::string data = Pattern(4 << 20, 11);
  const std::string frame = Frame(WriteHeader(2, 11, 0, data), data);
  ASSERT_TRUE(SendAll(raw.get(), frame.data(), kFramePrefixSize).ok());
  ASSERT_TRUE(Eventually([&] { return server_->stats().retries > 0; }));
  ASSERT_TRUE(
      SendAll(raw.get(), frame.data() + kFramePrefixSize, frame.size() - kFramePrefixSize).ok());
  auto reply = ReadRawReply(raw.get());
  ASSERT_TRUE(reply.ok()) << reply.status();
  EXPECT_EQ(reply->header.error(), 0) << reply->header.message();
  // 16 MiB of replies to a reader that is not reading yet: sends find the
  // socket full.
  std::string reads;
  for (int i = 0; i < 4; ++i) reads += Frame(ReadHeader(10 + i, 11, 0, 4 << 20));
  const uint64_t before_reads = server_->stats().retries;
  ASSERT_TRUE(SendAll(raw.get(), reads.data(), reads.size()).ok());
  ASSERT_TRUE(Eventually([&] { return server_->stats().retries > before_reads + 1; }));
  for (int i = 0; i < 4; ++i) {
    auto back = ReadRawReply(raw.get());
    ASSERT_TRUE(back.ok()) << back.status();
    EXPECT_EQ(back->header.error(), 0);
    EXPECT_TRUE(back->payload == data);
  }
  // And a plain client works throughout.
  auto c = Connect();
  ASSERT_NE(c, nullptr);
  ASSERT_TRUE(Write(*c, 11, 1, "small").ok());
  EXPECT_EQ(*Read(*c, 11, 1, 100), "small");
}

TEST_F(PipelineTest, ManyRequestsInFlightOnOneConnectionAreAllAnswered) {
  ASSERT_NO_FATAL_FAILURE(StartServer(Server::Options()));
  constexpr int kRequests = 96;
  constexpr size_t kSize = 100000;
  UniqueFd raw = RawSocket();
  // Every frame goes out before any reply is read.
  std::string frames;
  for (int i = 0; i < kRequests; ++i) {
    frames += Frame(WriteHeader(1000 + i, 2, i, Pattern(kSize, i)), Pattern(kSize, i));
  }
  std::thread sender([&] { ASSERT_TRUE(SendAll(raw.get(), frames.data(), frames.size()).ok()); });
  std::set<uint64_t> answered;
  for (int i = 0; i < kRequests; ++i) {
    auto reply = ReadRawReply(raw.get());
    ASSERT_TRUE(reply.ok()) << reply.status();
    EXPECT_EQ(reply->header.error(), 0) << reply->header.message();
    EXPECT_TRUE(answered.insert(reply->header.request_id()).second) << "answered twice";
  }
  sender.join();
  ASSERT_EQ(answered.size(), size_t{kRequests});
  EXPECT_EQ(*answered.begin(), 1000u);
  EXPECT_EQ(*answered.rbegin(), 1000u + kRequests - 1);

  // Now read them all back the same way; each reply is matched by its id.
  frames.clear();
  for (int i = 0; i < kRequests; ++i) frames += Frame(ReadHeader(5000 + i, 2, i, kSize));
  ASSERT_TRUE(SendAll(raw.get(), frames.data(), frames.size()).ok());
  std::map<uint64_t, std::string> payloads;
  for (int i = 0; i < kRequests; ++i) {
    auto reply = ReadRawReply(raw.get());
    ASSERT_TRUE(reply.ok()) << reply.status();
    ASSERT_EQ(reply->header.error(), 0) << reply->header.message();
    payloads[reply->header.request_id()] = std::move(reply->payload);
  }
  ASSERT_EQ(payloads.size(), size_t{kRequests});
  for (int i = 0; i < kRequests; ++i) {
    EXPECT_TRUE(payloads[5000 + i] == Pattern(kSize, i)) << "request " << 5000 + i;
  }
  EXPECT_TRUE(Eventually([&] { return PoolIdle(); }));
}

TEST_F(PipelineTest, PeerClosingMidFrameFreesItsBuffersAndOthersGoOn) {
  ASSERT_NO_FATAL_FAILURE(StartServer(Server::Options()));
  auto good = Connect();
  ASSERT_NE(good, nullptr);
  ASSERT_TRUE(Write(*good, 3, 0, "before").ok());
  {
    UniqueFd raw = RawSocket();
    // A write whose payload stops halfway: the server holds its buffer.
    const std::string data = Pattern(4 << 20, 3);
    const std::string frame = Frame(WriteHeader(1, 3, 1, data), data);
    ASSERT_TRUE(SendAll(raw.get(), frame.data(), frame.size() / 2).ok());
    ASSERT_TRUE(Eventually([&] { return !PoolIdle(); }));
  }  // closed inside the frame
  ASSERT_TRUE(Eventually([&] { return PoolIdle(); }));
  EXPECT_TRUE(Eventually([&] { return server_->active_connections() == 1; }));
  // Nothing of the half frame was stored; the other connection is fine.
  EXPECT_EQ(ErrnoFromStatus(Read(*good, 3, 1, 10).status()), ENOENT);
  EXPECT_EQ(*Read(*good, 3, 0, 100), "before");
}

TEST_F(PipelineTest, PeerClosingWithRequestsInFlightDropsTheirReplies) {
  ASSERT_NO_FATAL_FAILURE(StartServer(Server::Options()));
  auto good = Connect();
  ASSERT_NE(good, nullptr);
  for (int round = 0; round < 3; ++round) {
    UniqueFd raw = RawSocket();
    std::string frames;
    for (int i = 0; i < 16; ++i) {
      frames += Frame(WriteHeader(1 + i, 4, i, Pattern(1 << 20, i)), Pattern(1 << 20, i));
      frames += Frame(ReadHeader(100 + i, 4, i, 1 << 20));
    }
    ASSERT_TRUE(SendAll(raw.get(), frames.data(), frames.size()).ok());
    // Gone without reading a single reply.
  }
  ASSERT_TRUE(Eventually([&] { return server_->active_connections() == 1; }));
  EXPECT_TRUE(Eventually([&] { return PoolIdle(); }));
  EXPECT_EQ(server_->buffer_pool().stats().leases, 0u);
  ASSERT_TRUE(Write(*good, 4, 100, "after").ok());
  EXPECT_EQ(*Read(*good, 4, 100, 10), "after");
}

TEST_F(PipelineTest, ExhaustedPoolMakesWritesWaitThenSucceed) {
  ASSERT_NO_FATAL_FAILURE(StartServer(Server::Options()));
  PayloadArena& pool = server_->buffer_pool();
  // Hold all but 512 KiB: no 1 MiB write fits until it is returned.
  auto held = pool.TryTake(pool.capacity() - (512 << 10));
  ASSERT_TRUE(held.has_value());
  constexpr int kWriters = 8;
  std::atomic<int> finished{0};
  std::atomic<int> failed{0};
  std::vector<std::thread> writers;
  for (int t = 0; t < kWriters; ++t) {
    writers.emplace_back([&, t] {
      auto c = Connect();
      if (c == nullptr) {
        ++failed;
        return;
      }
      for (uint32_t i = 0; i < 2; ++i) {
        absl::Status s = Write(*c, 50 + t, i, Pattern(1 << 20, t * 10 + i));
        if (!s.ok()) {
          ADD_FAILURE() << s;
          ++failed;
        }
      }
      ++finished;
    });
  }
  ASSERT_TRUE(Eventually([&] { return pool.stats().waiting >= 1; }));
  EXPECT_EQ(finished.load(), 0);  // nobody got through while the memory was held
  held->Return();
  for (auto& writer : writers) writer.join();
  EXPECT_EQ(failed.load(), 0);
  EXPECT_EQ(finished.load(), kWriters);
  EXPECT_GE(pool.stats().waits, 1u);
  auto c = Connect();
  ASSERT_NE(c, nullptr);
  for (int t = 0; t < kWriters; ++t) {
    for (uint32_t i = 0; i < 2; ++i) {
      auto back = Read(*c, 50 + t, i, 1 << 20);
      ASSERT_TRUE(back.ok()) << back.status();
      EXPECT_TRUE(*back == Pattern(1 << 20, t * 10 + i));
    }
  }
  EXPECT_TRUE(Eventually([&] { return PoolIdle(); }));
}

TEST_F(PipelineTest, ManyLargeWritesThroughASmallPoolAllSucceed) {
  ASSERT_NO_FATAL_FAILURE(StartServer(Server::Options()));
  constexpr int kWriters = 10;
  constexpr size_t kChunk = 8 << 20;  // 10 writers x 8 MiB > the 64 MiB pool
  std::vector<std::thread> writers;
  std::atomic<int> failed{0};
  for (int t = 0; t < kWriters; ++t) {
    writers.emplace_back([&, t] {
      auto c = Connect();
      if (c == nullptr) {
        ++failed;
        return;
      }
      for (uint32_t i = 0; i < 2; ++i) {
        const std::string data = Pattern(kChunk, t * 10 + i);
        if (absl::Status s = Write(*c, 60 + t, i, data); !s.ok()) {
          ADD_FAILURE() << s;
          ++failed;
          continue;
        }
        auto back = Read(*c, 60 + t, i, kChunk);
        if (!back.ok() || *back != data) {
          ADD_FAILURE() << "read back of writer " << t << " chunk " << i;
          ++failed;
        }
      }
    });
  }
  for (auto& writer : writers) writer.join();
  EXPECT_EQ(failed.load(), 0);
  const PayloadArena::Stats stats = server_->buffer_pool().stats();
  EXPECT_LE(stats.peak_in_use, stats.capacity);
  EXPECT_TRUE(Eventually([&] { return PoolIdle(); }));
}

TEST_F(PipelineTest, TinySubmissionQueueWithManyConnectionsLosesNothing) {
  Server::Options options;
  options.net_threads = 1;
  options.ring_entries = 2;  // far fewer than the operations in flight
  ASSERT_NO_FATAL_FAILURE(StartServer(options));
  constexpr int kClients = 24;
  std::vector<std::thread> clients;
  std::atomic<int> failed{0};
  for (int t = 0; t < kClients; ++t) {
    clients.emplace_back([&, t] {
      auto c = Connect();
      if (c == nullptr) {
        ++failed;
        return;
      }
      for (uint32_t i = 0; i < 8; ++i) {
        const std::string data = Pattern(40000 + t, t * 100 + i);
        if (!Write(*c, 70 + t, i, data).ok()) {
          ++failed;
          continue;
        }
        auto back = Read(*c, 70 + t, i, 50000);
        if (!back.ok() || *back != data) ++failed;
      }
    });
  }
  // And one connection with many requests in flight at once.
  UniqueFd raw = RawSocket();
  std::string pings;
  for (int i = 1; i <= 100; ++i) {
    data::RequestHeader ping;
    ping.set_request_id(i);
    ping.set_op(data::PING);
    pings += Frame(ping);
  }
  ASSERT_TRUE(SendAll(raw.get(), pings.data(), pings.size()).ok());
  std::set<uint64_t> ids;
  for (int i = 0; i < 100; ++i) {
    auto reply = ReadRawReply(raw.get());
    ASSERT_TRUE(reply.ok()) << reply.status();
    EXPECT_EQ(reply->header.error(), 0);
    ids.insert(reply->header.request_id());
  }
  for (auto& client : clients) client.join();
  EXPECT_EQ(failed.load(), 0);
  EXPECT_EQ(ids.size(), 100u);
  EXPECT_GT(server_->stats().sq_full, 0u) << "the submission queue never filled up";
}

TEST_F(PipelineTest, MalformedFrameAfterPipelinedRequestsEndsWithTheErrorFrame) {
  ASSERT_NO_FATAL_FAILURE(StartServer(Server::Options()));
  auto good = Connect();
  ASSERT_NE(good, nullptr);
  ASSERT_TRUE(Write(*good, 5, 0, Pattern(1 << 20, 5)).ok());
  UniqueFd raw = RawSocket();
  std::string frames;
  for (int i = 1; i <= 20; ++i) frames += Frame(ReadHeader(i, 5, 0, 1 << 20));
  frames += "garbage, not a frame";
  ASSERT_TRUE(SendAll(raw.get(), frames.data(), frames.size()).ok());
  // Whole replies (any number of them), then the error frame, then the end.
  int replies = 0;
  for (;;) {
    auto reply = ReadRawReply(raw.get());
    ASSERT_TRUE(reply.ok()) << reply.status();
    if (reply->header.request_id() == 0) {
      EXPECT_EQ(reply->header.error(), EBADMSG);
      break;
    }
    EXPECT_EQ(reply->header.error(), 0);
    EXPECT_TRUE(reply->payload == Pattern(1 << 20, 5));
    ++replies;
  }
  EXPECT_LE(replies, 20);
  ::shutdown(raw.get(), SHUT_WR);
  EXPECT_EQ(RecvOneByte(raw.get()), 0);
  EXPECT_TRUE(Eventually([&] { return PoolIdle(); }));
  EXPECT_TRUE(Eventually([&] { return server_->active_connections() == 1; }));
  EXPECT_EQ(ReadRawReply(raw.get()).ok(), false);
}

TEST_F(PipelineTest, PeerStalledInsideAFrameIsClosed) {
  Server::Options options;
  options.stall_timeout = absl::Seconds(1);
  ASSERT_NO_FATAL_FAILURE(StartServer(options));
  UniqueFd raw = RawSocket();
  const std::string data = Pattern(1 << 20, 6);
  const std::string frame = Frame(WriteHeader(1, 6, 0, data), data);
  ASSERT_TRUE(SendAll(raw.get(), frame.data(), 1000).ok());  // then nothing
  EXPECT_EQ(RecvOneByte(raw.get()), 0);                      // the server hung up
  EXPECT_TRUE(Eventually([&] { return PoolIdle(); }));
  EXPECT_TRUE(Eventually([&] { return server_->active_connections() == 0; }));
}

TEST_F(PipelineTest, PeerNotReadingRepliesIsClosedAndItsBuffersReturn) {
  Server::Options options;
  options.stall_timeout = absl::Seconds(1);
  ASSERT_NO_FATAL_FAILURE(StartServer(options));
  auto c = Connect();
  ASSERT_NE(c, nullptr);
  ASSERT_TRUE(Write(*c, 7, 0, Pattern(4 << 20, 7)).ok());
  UniqueFd raw = RawSocket();
  int small = 4096;
  ::setsockopt(raw.get(), SOL_SOCKET, SO_RCVBUF, &small, sizeof(small));
  std::string frames;
  for (int i = 1; i <= 12; ++i) frames += Frame(ReadHeader(i, 7, 0, 4 << 20));
  ASSERT_TRUE(SendAll(raw.get(), frames.data(), frames.size()).ok());
  // 48 MiB of replies nobody reads: the server gives up on the connection.
  EXPECT_TRUE(Eventually([&] { return server_->active_connections() == 1; }));
  EXPECT_TRUE(Eventually([&] { return PoolIdle(); }));
  c.reset();
  EXPECT_TRUE(Eventually([&] { return server_->active_connections() == 0; }));
}

TEST_F(PipelineTest, ZeroCopyRepliesCarryTheRightBytes) {
  Server::Options options;
  options.zero_copy_send = true;
  ASSERT_NO_FATAL_FAILURE(StartServer(options));
  auto c = Connect();
  ASSERT_NE(c, nullptr);
  for (uint32_t i = 0; i < 4; ++i) {
    const std::string data = Pattern((4 << 20) - i * 1000, 80 + i);
    ASSERT_TRUE(Write(*c, 8, i, data).ok());
    auto back = Read(*c, 8, i, 4 << 20);
    ASSERT_TRUE(back.ok()) << back.status();
    EXPECT_TRUE(*back == data) << i;
  }
  EXPECT_GT(server_->stats().zero_copy_sends, 0u);
  c.reset();
  EXPECT_TRUE(Eventually([&] { return PoolIdle(); }));
}

TEST_F(PipelineTest, StopWithRequestsInFlightReturnsEveryBuffer) {
  ASSERT_NO_FATAL_FAILURE(StartServer(Server::Options()));
  UniqueFd raw = RawSocket();
  std::string frames;
  for (int i = 0; i < 8; ++i) {
    frames += Frame(WriteHeader(1 + i, 9, i, Pattern(1 << 20, i)), Pattern(1 << 20, i));
  }
  ASSERT_TRUE(SendAll(raw.get(), frames.data(), frames.size()).ok());
  server_->Stop();
  EXPECT_EQ(server_->buffer_pool().stats().in_use, 0u);
  EXPECT_EQ(server_->buffer_pool().stats().waiting, 0u);
  EXPECT_EQ(server_->active_connections(), 0u);
}

}  // namespace
}  // namespace ckptfs::storage
