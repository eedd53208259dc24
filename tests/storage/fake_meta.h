// FakeMeta: an in-process gRPC MetaService that implements only what a
// storage server calls (RegisterServer, Heartbeat) and records the calls.
// It can be told to forget the servers, to test re-registration.
// Thread-safety: all methods are thread-safe (gRPC calls them concurrently).
#ifndef CKPTFS_TESTS_STORAGE_FAKE_META_H_
#define CKPTFS_TESTS_STORAGE_FAKE_META_H_

#include <arpa/inet.h>
#include <grpcpp/grpcpp.h>
#include <netinet/in.h>
#include <sys/socket.h>

#include <cerrno>
#include <memory>
#include <string>

#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/clock.h"
#include "common/errno_status.h"
#include "common/grpc_status.h"
#include "common/tcp.h"
#include "common/unique_fd.h"
#include "proto/meta.grpc.pb.h"

namespace ckptfs::storage {

class FakeMeta : public meta::MetaService::Service {
 public:
  // Serves on 127.0.0.1:`port` (0: any); nullptr if that failed.
  static std::unique_ptr<FakeMeta> Start(uint16_t port, uint32_t server_id = 7) {
    auto fake = std::make_unique<FakeMeta>();
    fake->server_id_ = server_id;
    grpc::ServerBuilder builder;
    int selected = 0;
    builder.AddListeningPort(absl::StrCat("127.0.0.1:", port), grpc::InsecureServerCredentials(),
                             &selected);
    builder.RegisterService(fake.get());
    fake->server_ = builder.BuildAndStart();
    if (fake->server_ == nullptr || selected == 0) return nullptr;
    fake->port_ = static_cast<uint16_t>(selected);
    return fake;
  }

  ~FakeMeta() override {
    if (server_) server_->Shutdown(std::chrono::system_clock::now());
  }

  uint16_t port() const { return port_; }
  std::string address() const { return absl::StrCat("127.0.0.1:", port_); }

  grpc::Status RegisterServer(grpc::ServerContext*, const meta::RegisterServerRequest* request,
                              meta::RegisterServerReply* reply) override {
    absl::MutexLock lock(&mu_);
    ++registrations_;
    last_register_ = *request;
    known_ = true;
    reply->set_server_id(server_id_);
    return grpc::Status::OK;
  }

  grpc::Status Heartbeat(grpc::ServerContext*, const meta::HeartbeatRequest* request,
                         meta::Empty*) override {
    absl::MutexLock lock(&mu_);
    if (!known_ || request->server_id() != server_id_) {
      return ToGrpcStatus(ErrnoStatus(ENOENT, absl::StrCat("no server ", request->server_id())));
    }
    ++heartbeats_;
    last_heartbeat_ = *request;
    return grpc::Status::OK;
  }

  // The next heartbeat gets NOT_FOUND.
  void Forget() {
    absl::MutexLock lock(&mu_);
    known_ = false;
  }

  int registrations() {
    absl::MutexLock lock(&mu_);
    return registrations_;
  }
  int heartbeats() {
    absl::MutexLock lock(&mu_);
    return heartbeats_;
  }
  meta::RegisterServerRequest last_register() {
    absl::MutexLock lock(&mu_);
    return last_register_;
  }
  meta::HeartbeatRequest last_heartbeat() {
    absl::MutexLock lock(&mu_);
    return last_heartbeat_;
  }

 private:
  std::unique_ptr<grpc::Server> server_;
  uint16_t port_ = 0;
  uint32_t server_id_ = 7;
  absl::Mutex mu_;
  bool known_ ABSL_GUARDED_BY(mu_) = false;
  int registrations_ ABSL_GUARDED_BY(mu_) = 0;
  int heartbeats_ ABSL_GUARDED_BY(mu_) = 0;
  meta::RegisterServerRequest last_register_ ABSL_GUARDED_BY(mu_);
  meta::HeartbeatRequest last_heartbeat_ ABSL_GUARDED_BY(mu_);
};

// A TCP port on 127.0.0.1 that nothing listens on right now.
inline uint16_t UnusedPort() {
  auto fd = ListenTcp({"127.0.0.1", 0});
  if (!fd.ok()) return 0;
  auto port = LocalPort(fd->get());
  return port.ok() ? *port : 0;
}

// A port of 127.0.0.1 that nothing listens on, held bound (not listening)
// so that no other server of a test running beside this one gets it until
// Release(): a client retrying to it is refused, as by a service not
// started yet, and never reaches somebody else's.
class ReservedPort {
 public:
  ReservedPort() {
    UniqueFd fd(::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0));
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    if (!fd.valid() || ::bind(fd.get(), reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0) {
      return;
    }
    auto port = LocalPort(fd.get());
    if (!port.ok()) return;
    port_ = *port;
    fd_ = std::move(fd);
  }
  uint16_t port() const { return port_; }  // 0 if none could be bound
  // Lets a server of this test bind it.
  void Release() { fd_ = UniqueFd(); }

 private:
  UniqueFd fd_;
  uint16_t port_ = 0;
};

// Polls `condition` every 10 ms for up to `timeout`.
template <typename Condition>
bool WaitFor(Condition condition, absl::Duration timeout) {
  const absl::Time deadline = absl::Now() + timeout;
  while (!condition()) {
    if (absl::Now() > deadline) return false;
    absl::SleepFor(absl::Milliseconds(10));
  }
  return true;
}

}  // namespace ckptfs::storage

#endif  // CKPTFS_TESTS_STORAGE_FAKE_META_H_
