// FakeStorageServer: a stand-in storage server for metadata-service tests.
// It speaks the data-path frames (common/frame.h), answers every request
// with `error` (0: success) and records each request header. Connections are
// served concurrently, a thread each (joined on destruction); requests can
// be held unanswered until released (to keep a commit in its sync step).
//
// Thread-safety: the accessors may be called from any thread.
#ifndef CKPTFS_TESTS_META_FAKE_STORAGE_SERVER_H_
#define CKPTFS_TESTS_META_FAKE_STORAGE_SERVER_H_

#include <poll.h>
#include <sys/socket.h>

#include <atomic>
#include <list>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "common/frame.h"
#include "common/tcp.h"
#include "gtest/gtest.h"
#include "proto/data.pb.h"

namespace ckptfs::meta {

class FakeStorageServer {
 public:
  FakeStorageServer() {
    auto fd = ListenTcp(HostPort{"127.0.0.1", 0});
    EXPECT_TRUE(fd.ok()) << fd.status();
    listen_fd_ = *std::move(fd);
    port_ = *LocalPort(listen_fd_.get());
    thread_ = std::thread([this] { Accept(); });
  }
  FakeStorageServer(const FakeStorageServer&) = delete;
  FakeStorageServer& operator=(const FakeStorageServer&) = delete;
  ~FakeStorageServer() {
    stop_ = true;
    Release();
    thread_.join();  // no new connections after this
    std::vector<std::thread> threads;
    {
      absl::MutexLock lock(&mu_);
      for (int fd : conn_fds_) ::shutdown(fd, SHUT_RDWR);
      threads.swap(conn_threads_);
    }
    for (std::thread& thread : threads) thread.join();
  }

  std::string address() const { return absl::StrCat("127.0.0.1:", port_); }
  void set_error(int error) { error_ = error; }
  // Requests wait for Release() before they are answered.
  void Hold() {
    absl::MutexLock lock(&mu_);
    held_ = true;
  }
  void Release() {
    absl::MutexLock lock(&mu_);
    held_ = false;
  }
  std::vector<data::RequestHeader> requests() {
    absl::MutexLock lock(&mu_);
    return requests_;
  }
  // Requests of `op` received so far (whole_store SYNCs when `whole_store`).
  size_t Count(data::Op op, bool whole_store = false) {
    absl::MutexLock lock(&mu_);
    size_t n = 0;
    for (const data::RequestHeader& request : requests_) {
      if (request.op() == op && (!whole_store || request.whole_store())) ++n;
    }
    return n;
  }
  // Blocks until `n` requests arrived (held ones included).
  void WaitForRequests(size_t n) {
    absl::MutexLock lock(&mu_);
    auto arrived = [this, n]() ABSL_SHARED_LOCKS_REQUIRED(mu_) { return requests_.size() >= n; };
    mu_.Await(absl::Condition(&arrived));
  }

 private:
  void Accept() {
    while (!stop_) {
      pollfd pfd{listen_fd_.get(), POLLIN, 0};
      if (::poll(&pfd, 1, 20) <= 0) continue;
      int fd = ::accept(listen_fd_.get(), nullptr, nullptr);
      if (fd < 0) continue;
      absl::MutexLock lock(&mu_);
      conn_fds_.push_back(fd);
      conn_threads_.emplace_back([this, fd] { Serve(fd); });
    }
  }

  void Serve(int fd) {
    UniqueFd conn(fd);
    while (!stop_) {
      data::RequestHeader request;
      auto prefix = ReadFrameHead(conn.get(), request);
      if (!prefix.ok()) break;
      if (!DiscardPayload(conn.get(), prefix->payload_len).ok()) break;
      {
        absl::MutexLock lock(&mu_);
        requests_.push_back(request);
        auto go = [this]() ABSL_SHARED_LOCKS_REQUIRED(mu_) { return !held_ || stop_; };
        mu_.Await(absl::Condition(&go));
      }
      data::ResponseHeader response;
      response.set_request_id(request.request_id());
      response.set_error(error_);
      if (error_ != 0) response.set_message("injected failure");
      if (!WriteFrame(conn.get(), response, nullptr, 0).ok()) break;
    }
    absl::MutexLock lock(&mu_);
    conn_fds_.remove(fd);
  }

  UniqueFd listen_fd_;
  uint16_t port_ = 0;
  std::atomic<bool> stop_{false};
  std::atomic<int> error_{0};
  std::thread thread_;
  absl::Mutex mu_;
  bool held_ ABSL_GUARDED_BY(mu_) = false;
  std::list<int> conn_fds_ ABSL_GUARDED_BY(mu_);  // open connections
  std::vector<std::thread> conn_threads_ ABSL_GUARDED_BY(mu_);
  std::vector<data::RequestHeader> requests_ ABSL_GUARDED_BY(mu_);
};

}  // namespace ckptfs::meta

#endif  // CKPTFS_TESTS_META_FAKE_STORAGE_SERVER_H_
