// PipelinedStandIn: an in-process storage server stand-in on loopback that
// speaks the frame protocol with many requests in flight per connection and
// misbehaves on request, for tests of the client's chunk transports.
//
// One thread per connection reads requests and applies them to chunks kept
// in memory (WRITE replace/merge, READ, ENOENT for a missing chunk). How it
// answers is set through the public atomics: hold replies until N requests
// are pending and answer them newest first, send replies a byte at a time,
// close in the middle of a reply, drop a request, never answer one, send
// garbage or a reply for a request that does not exist, refuse the
// connection with an error frame, or pause before reading each request. Counters say what it saw.
//
// Thread-safety: the knobs and counters are atomics; set knobs before the
// requests they should affect.
#ifndef CKPTFS_TESTS_CLIENT_PIPELINED_STAND_IN_H_
#define CKPTFS_TESTS_CLIENT_PIPELINED_STAND_IN_H_

#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstring>
#include <map>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "common/crc32c.h"
#include "common/frame.h"
#include "common/tcp.h"
#include "common/unique_fd.h"
#include "gtest/gtest.h"
#include "proto/data.pb.h"

namespace ckptfs::client::testing {

class PipelinedStandIn {
 public:
  PipelinedStandIn() {
    auto fd = ListenTcp(HostPort{"127.0.0.1", 0});
    EXPECT_TRUE(fd.ok()) << fd.status();
    listen_fd_ = *std::move(fd);
    port_ = *LocalPort(listen_fd_.get());
    acceptor_ = std::thread([this] { Accept(); });
  }
  ~PipelinedStandIn() { Stop(); }

  // Closes the listener and every connection; later dials are refused.
  void Stop() {
    if (stopped_.exchange(true)) return;
    ::shutdown(listen_fd_.get(), SHUT_RDWR);
    acceptor_.join();
    listen_fd_.Reset();
    CloseConnections();
    std::vector<std::thread> workers;
    {
      absl::MutexLock lock(&mu_);
      workers.swap(workers_);
    }
    for (std::thread& t : workers) t.join();
  }

  // Shuts every open connection down (a restart, as the client sees it).
  void CloseConnections() {
    absl::MutexLock lock(&mu_);
    for (int fd : open_fds_) ::shutdown(fd, SHUT_RDWR);
  }

  std::string address() const { return absl::StrCat("127.0.0.1:", port_); }

  // The chunk's bytes, or "<none>".
  std::string Chunk(uint64_t ino, uint32_t index) {
    absl::MutexLock lock(&mu_);
    auto it = chunks_.find({ino, index});
    return it == chunks_.end() ? "<none>" : it->second;
  }
  // The header of every WRITE and TRIM read so far, answered or not.
  std::vector<data::RequestHeader> Mutations() {
    absl::MutexLock lock(&mu_);
    return mutations_;
  }

  // --- Knobs ---------------------------------------------------------------
  // Replies wait until this many requests are pending on the connection (or
  // none arrives for 10 s), then go out newest first.
  std::atomic<int> hold_until{0};
  // Every reply is sent one byte per send().
  std::atomic<bool> split_replies{false};
  // The next N replies: half of the frame, then the connection is shut down.
  std::atomic<int> close_mid_frame_next{0};
  // The next N requests: read, then the connection is shut down unanswered.
  std::atomic<int> drop_next{0};
  // The next N requests are applied but never answered.
  std::atomic<int> stall_next{0};
  // The next N replies start with a wrong magic number.
  std::atomic<int> garbage_next{0};
  // The next N replies carry a request id nobody asked for.
  std::atomic<int> wrong_id_next{0};
  // Nonzero: each new connection gets one error frame (request_id 0, this
  // errno) at its first request, and is closed.
  std::atomic<int> refuse_with{0};
  // Pause before reading each request (the client's sends meanwhile fill
  // the socket).
  std::atomic<int> read_delay_us{0};
  // The next N READ replies with a payload have its byte at
  // corrupt_payload_at (or its last byte) flipped after the CRC32C is set.
  std::atomic<int> corrupt_payload_next{0};
  std::atomic<size_t> corrupt_payload_at{0};

  // --- Counters ------------------------------------------------------------
  std::atomic<int> connections{0};
  std::atomic<int> requests{0};
  std::atomic<int> writes_applied{0};
  std::atomic<int> most_pending{0};  // most replies held at once on a connection

 private:
  struct Pending {
    std::string frame;  // prefix + header + payload
    bool stalled = false;
  };

  void Accept() {
    while (true) {
      int fd = ::accept(listen_fd_.get(), nullptr, nullptr);
      if (fd < 0) return;
      const int one = 1;
      ::setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
      ++connections;
      absl::MutexLock lock(&mu_);
      if (stopped_) {
        ::close(fd);
        return;
      }
      open_fds_.push_back(fd);
      workers_.emplace_back([this, fd] { Serve(fd); });
    }
  }

  // Sends `frame` as the knobs say; false when the connection is to close.
  bool SendReply(int fd, std::string frame) {
    if (garbage_next.fetch_sub(1) > 0) frame[0] = 'X';
    if (close_mid_frame_next.fetch_sub(1) > 0) {
      (void)SendAll(fd, frame.data(), frame.size() / 2);
      ::shutdown(fd, SHUT_RDWR);
      return false;
    }
    if (split_replies.load()) {
      for (size_t i = 0; i < frame.size(); ++i) {
        if (!SendAll(fd, frame.data() + i, 1).ok()) return false;
        if (i % 8 == 7) absl::SleepFor(absl::Microseconds(20));
      }
      return true;
    }
    return SendAll(fd, frame.data(), frame.size()).ok();
  }

  void Serve(int fd) {
    ServeRequests(fd);
    {
      absl::MutexLock lock(&mu_);
      open_fds_.erase(std::find(open_fds_.begin(), open_fds_.end(), fd));
    }
    ::close(fd);
  }

  // Holds requests while hold_until asks; returns when the connection ends.
  void ServeRequests(int fd) {
    std::vector<char> payload;
    std::vector<Pending> pending;
    bool first = true;
    auto flush = [&]() {
      // Newest first: the client must match replies by request_id.
      std::reverse(pending.begin(), pending.end());
      bool ok = true;
      for (Pending& p : pending) {
        if (ok && !p.stalled) ok = SendReply(fd, std::move(p.frame));
      }
      pending.clear();
      return ok;
    };
    while (true) {
      if (!pending.empty()) {
        pollfd pfd{fd, POLLIN, 0};
        if (::poll(&pfd, 1, 10000) == 0 && !flush()) return;  // nothing more is coming
      }
      if (const int us = read_delay_us.load(); us > 0) absl::SleepFor(absl::Microseconds(us));
      data::RequestHeader request;
      auto prefix = ReadFrameHead(fd, request);
      if (!prefix.ok()) return;
      payload.resize(prefix->payload_len);
      if (prefix->payload_len > 0 && !RecvAll(fd, payload.data(), payload.size()).ok()) {
        return;
      }
      ++requests;
      if (request.op() == data::WRITE || request.op() == data::TRIM) {
        absl::MutexLock lock(&mu_);
        mutations_.push_back(request);
      }
      if (std::exchange(first, false)) {
        if (const int err = refuse_with.load(); err != 0) {
          data::ResponseHeader refusal;
          refusal.set_error(err);
          refusal.set_message("too many connections");
          (void)WriteFrame(fd, refusal, nullptr, 0);
          ::shutdown(fd, SHUT_RDWR);
          return;
        }
      }
      if (drop_next.fetch_sub(1) > 0) {
        ::shutdown(fd, SHUT_RDWR);
        return;
      }
      Pending reply{Apply(request, payload), stall_next.fetch_sub(1) > 0};
      pending.push_back(std::move(reply));
      most_pending = std::max(most_pending.load(), static_cast<int>(pending.size()));
      if (static_cast<int>(pending.size()) >= hold_until.load() && !flush()) return;
    }
  }

  // Applies the request; returns the reply frame.
  std::string Apply(const data::RequestHeader& request, const std::vector<char>& payload) {
    data::ResponseHeader response;
    response.set_request_id(request.request_id());
    if (wrong_id_next.fetch_sub(1) > 0) response.set_request_id(request.request_id() + 1000000);
    std::string out;
    {
      absl::MutexLock lock(&mu_);
      const auto key = std::make_pair(request.ino(), request.chunk_index());
      if (request.op() == data::WRITE) {
        if (Crc32c(payload.data(), payload.size()) != request.payload_crc32c()) {
          response.set_error(EBADMSG);
          response.set_message("payload CRC32C mismatch");
        } else {
          std::string& chunk = chunks_[key];
          if (request.replace()) chunk.clear();
          if (chunk.size() < request.offset() + payload.size()) {
            chunk.resize(request.offset() + payload.size());
          }
          std::memcpy(chunk.data() + request.offset(), payload.data(), payload.size());
          ++writes_applied;
        }
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
    if (!out.empty() && corrupt_payload_next.load() > 0 && corrupt_payload_next.fetch_sub(1) > 0) {
      out[std::min(corrupt_payload_at.load(), out.size() - 1)] ^= 0x20;
    }
    std::string frame(kFramePrefixSize, '\0');
    EncodeFramePrefix(
        {static_cast<uint32_t>(response.ByteSizeLong()), static_cast<uint32_t>(out.size())},
        frame.data());
    response.AppendToString(&frame);
    frame += out;
    return frame;
  }

  UniqueFd listen_fd_;
  uint16_t port_ = 0;
  std::atomic<bool> stopped_{false};
  std::thread acceptor_;
  absl::Mutex mu_;
  std::vector<int> open_fds_ ABSL_GUARDED_BY(mu_);
  std::vector<std::thread> workers_ ABSL_GUARDED_BY(mu_);
  std::map<std::pair<uint64_t, uint32_t>, std::string> chunks_ ABSL_GUARDED_BY(mu_);
  std::vector<data::RequestHeader> mutations_ ABSL_GUARDED_BY(mu_);
};

}  // namespace ckptfs::client::testing

#endif  // CKPTFS_TESTS_CLIENT_PIPELINED_STAND_IN_H_
