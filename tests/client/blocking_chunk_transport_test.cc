// BlockingChunkTransport against an in-process storage server stand-in that
// speaks the frame protocol: WRITE/READ round trip, ENOENT passes through,
// a dropped connection is redialed once, an unknown server id makes the
// transport ask the metadata service again, and a dead server is an error.
#include "client/blocking_chunk_transport.h"

#include <sys/socket.h>

#include <atomic>
#include <cerrno>
#include <cstring>
#include <map>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/clock.h"
#include "common/crc32c.h"
#include "common/errno_status.h"
#include "common/frame.h"
#include "common/tcp.h"
#include "gtest/gtest.h"
#include "proto/data.pb.h"
#include "tests/client/address_book.h"

namespace ckptfs::client {
namespace {

// A one-connection-at-a-time-per-thread storage server over TCP that keeps
// chunks in memory. `drop_next` makes it close the connection after reading
// the next request, without answering.
class StandInStorage {
 public:
  StandInStorage() {
    auto fd = ListenTcp(HostPort{"127.0.0.1", 0});
    EXPECT_TRUE(fd.ok()) << fd.status();
    listen_fd_ = *std::move(fd);
    port_ = *LocalPort(listen_fd_.get());
    acceptor_ = std::thread([this] { Accept(); });
  }
  ~StandInStorage() {
    stopping_ = true;
    ::shutdown(listen_fd_.get(), SHUT_RDWR);
    acceptor_.join();
    {
      absl::MutexLock lock(&mu_);
      for (int fd : open_fds_) ::shutdown(fd, SHUT_RDWR);
    }
    for (std::thread& t : workers_) t.join();
  }

  std::string address() const { return absl::StrCat("127.0.0.1:", port_); }
  std::atomic<int> drop_next{0};
  // Requests to answer only after 1.5 s (still applying them).
  std::atomic<int> stall_next{0};
  std::atomic<int> connections{0};
  // The header of every WRITE read, answered or not.
  std::vector<data::RequestHeader> Writes() {
    absl::MutexLock lock(&mu_);
    return writes_;
  }

 private:
  void Accept() {
    while (!stopping_) {
      int fd = ::accept(listen_fd_.get(), nullptr, nullptr);
      if (fd < 0) return;
      ++connections;
      absl::MutexLock lock(&mu_);
      open_fds_.push_back(fd);
      workers_.emplace_back([this, fd] { Serve(fd); });
    }
  }

  void Serve(int raw_fd) {
    UniqueFd fd(raw_fd);
    std::vector<char> payload;
    while (true) {
      data::RequestHeader request;
      auto prefix = ReadFrameHead(fd.get(), request);
      if (!prefix.ok()) return;
      payload.resize(prefix->payload_len);
      if (prefix->payload_len > 0 && !RecvAll(fd.get(), payload.data(), payload.size()).ok()) {
        return;
      }
      if (request.op() == data::WRITE) {
        absl::MutexLock lock(&mu_);
        writes_.push_back(request);
      }
      if (drop_next.fetch_sub(1) > 0) {
        absl::MutexLock lock(&mu_);
        ::shutdown(fd.get(), SHUT_RDWR);
        return;
      }
      if (stall_next.fetch_sub(1) > 0) absl::SleepFor(absl::Milliseconds(1500));
      data::ResponseHeader response;
      response.set_request_id(request.request_id());
      std::string out;
      {
        absl::MutexLock lock(&mu_);
        const auto key = std::make_pair(request.ino(), request.chunk_index());
        if (request.op() == data::WRITE) {
          std::string& chunk = chunks_[key];
          if (request.replace()) chunk.clear();
          if (chunk.size() < request.offset() + payload.size()) {
            chunk.resize(request.offset() + payload.size());
          }
          std::memcpy(chunk.data() + request.offset(), payload.data(), payload.size());
        } else if (request.op() == data::READ) {
          auto it = chunks_.find(key);
          if (it == chunks_.end()) {
            response.set_error(ENOENT);
            response.set_message("no such chunk");
          } else if (request.offset() < it->second.size()) {
            out = it->second.substr(request.offset(), request.length());
            response.set_chunk_length(static_cast<uint32_t>(it->second.size()));
          }
        }
      }
      response.set_payload_crc32c(Crc32c(out.data(), out.size()));
      if (!WriteFrame(fd.get(), response, out.data(), out.size()).ok()) return;
    }
  }

  UniqueFd listen_fd_;
  uint16_t port_ = 0;
  std::atomic<bool> stopping_{false};
  std::thread acceptor_;
  absl::Mutex mu_;
  std::vector<int> open_fds_ ABSL_GUARDED_BY(mu_);
  std::vector<std::thread> workers_;
  std::map<std::pair<uint64_t, uint32_t>, std::string> chunks_ ABSL_GUARDED_BY(mu_);
  std::vector<data::RequestHeader> writes_ ABSL_GUARDED_BY(mu_);
};

TEST(BlockingChunkTransportTest, WriteReadAndHoles) {
  StandInStorage storage;
  AddressBook book;
  ASSERT_EQ(book.Register("server-1", storage.address()), 1u);
  BlockingChunkTransport transport(book.meta(), absl::Seconds(5));
  ASSERT_TRUE(transport.RefreshServers().ok());
  const std::string data = "checkpoint bytes";
  ASSERT_TRUE(transport.WriteChunk(1, 9, 3, 0, data.data(), data.size(), true).ok());
  char buf[64];
  auto n = transport.ReadChunk(1, 9, 3, 0, buf, sizeof(buf));
  ASSERT_TRUE(n.ok()) << n.status();
  EXPECT_EQ(std::string(buf, *n), data);  // short: the chunk ends there
  auto missing = transport.ReadChunk(1, 9, 4, 0, buf, sizeof(buf));
  ASSERT_FALSE(missing.ok());
  EXPECT_EQ(ErrnoFromStatus(missing.status()), ENOENT);
  // Connections are pooled: the three requests used one.
  EXPECT_EQ(storage.connections.load(), 1);
}

TEST(BlockingChunkTransportTest, DroppedConnectionIsRedialedOnce) {
  StandInStorage storage;
  AddressBook book;
  ASSERT_EQ(book.Register("server-1", storage.address()), 1u);
  BlockingChunkTransport transport(book.meta(), absl::Seconds(5));
  ASSERT_TRUE(transport.WriteChunk(1, 9, 0, 0, "a", 1, true).ok());
  storage.drop_next = 1;
  ASSERT_TRUE(transport.WriteChunk(1, 9, 0, 1, "b", 1, false).ok());
  EXPECT_EQ(storage.connections.load(), 2);
  char buf[2];
  auto n = transport.ReadChunk(1, 9, 0, 0, buf, 2);
  ASSERT_TRUE(n.ok());
  EXPECT_EQ(std::string(buf, *n), "ab");
  // The resend named the attempt that was dropped, for the server to
  // refuse should it still apply it (server/storage/resend_fence.h).
  const std::vector<data::RequestHeader> writes = storage.Writes();
  ASSERT_EQ(writes.size(), 3u);
  EXPECT_EQ(writes[1].supersedes_size(), 0);
  ASSERT_EQ(writes[2].supersedes_size(), 1);
  EXPECT_EQ(writes[2].supersedes(0), writes[1].write_id());
  EXPECT_EQ(writes[2].client_id(), writes[1].client_id());
  EXPECT_NE(writes[2].client_id(), 0u);
  // Dropped twice in a row: the error comes back.
  storage.drop_next = 2;
  auto failed = transport.WriteChunk(1, 9, 0, 0, "c", 1, false);
  EXPECT_FALSE(failed.ok());
}

TEST(BlockingChunkTransportTest, TimedOutWriteIsNotSentAgain) {
  StandInStorage storage;
  AddressBook book;
  ASSERT_EQ(book.Register("server-1", storage.address()), 1u);
  BlockingChunkTransport transport(book.meta(), absl::Seconds(1));
  ASSERT_TRUE(transport.WriteChunk(1, 9, 0, 0, "a", 1, true).ok());
  // The server is slow, not gone: a resend could land after a newer write
  // of the chunk once the slow original is applied, so it is not resent.
  storage.stall_next = 1;
  auto status = transport.WriteChunk(1, 9, 0, 0, "b", 1, true);
  ASSERT_FALSE(status.ok());
  EXPECT_EQ(ErrnoFromStatus(status), ETIMEDOUT) << status;
  EXPECT_EQ(storage.connections.load(), 1) << "the write was sent again";
}

TEST(BlockingChunkTransportTest, UnknownServerIdRefreshesTheMap) {
  StandInStorage storage;
  AddressBook book;
  BlockingChunkTransport transport(book.meta(), absl::Seconds(5));
  ASSERT_TRUE(transport.RefreshServers().ok());  // empty
  // A server registers later.
  const uint32_t later = book.Register("later", storage.address());
  EXPECT_TRUE(transport.WriteChunk(later, 1, 0, 0, "x", 1, true).ok());
  auto unknown = transport.WriteChunk(later + 1, 1, 0, 0, "x", 1, true);
  ASSERT_FALSE(unknown.ok());
  EXPECT_NE(unknown.message().find("unknown"), absl::string_view::npos) << unknown;
}

TEST(BlockingChunkTransportTest, DeadServerIsAnError) {
  AddressBook book;
  uint16_t port = 0;
  {
    auto fd = ListenTcp(HostPort{"127.0.0.1", 0});  // bound, then closed
    ASSERT_TRUE(fd.ok());
    port = *LocalPort(fd->get());
  }
  ASSERT_EQ(book.Register("gone", absl::StrCat("127.0.0.1:", port)), 1u);
  BlockingChunkTransport transport(book.meta(), absl::Seconds(2));
  auto status = transport.WriteChunk(1, 1, 0, 0, "x", 1, true);
  ASSERT_FALSE(status.ok());
  EXPECT_EQ(status.code(), absl::StatusCode::kUnavailable);
}

}  // namespace
}  // namespace ckptfs::client
