// See storage_stand_in.h.
#include "client/testing/storage_stand_in.h"

#include <fcntl.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <utility>

#include "absl/strings/str_cat.h"
#include "common/errno_status.h"
#include "common/frame.h"
#include "common/tcp.h"
#include "proto/data.pb.h"

namespace ckptfs::client::testing {

absl::StatusOr<std::unique_ptr<StorageStandIn>> StorageStandIn::Start() {
  absl::StatusOr<UniqueFd> listen_fd = ListenTcp(HostPort{"127.0.0.1", 0});
  if (!listen_fd.ok()) return listen_fd.status();
  absl::StatusOr<uint16_t> port = LocalPort(listen_fd->get());
  if (!port.ok()) return port.status();
  int wake[2];
  if (::pipe2(wake, O_CLOEXEC) != 0) return ErrnoStatus(errno, "storage stand-in: pipe");
  return std::unique_ptr<StorageStandIn>(new StorageStandIn(*std::move(listen_fd),
                                                            UniqueFd(wake[0]), UniqueFd(wake[1]),
                                                            absl::StrCat("127.0.0.1:", *port)));
}

StorageStandIn::StorageStandIn(UniqueFd listen_fd, UniqueFd wake_read, UniqueFd wake_write,
                               std::string address)
    : listen_fd_(std::move(listen_fd)),
      wake_read_(std::move(wake_read)),
      wake_write_(std::move(wake_write)),
      address_(std::move(address)) {
  thread_ = std::thread([this] { Serve(); });
}

StorageStandIn::~StorageStandIn() {
  const char byte = 0;
  (void)!::write(wake_write_.get(), &byte, 1);
  thread_.join();
}

void StorageStandIn::Serve() {
  while (true) {
    std::vector<pollfd> fds;
    fds.push_back(pollfd{wake_read_.get(), POLLIN, 0});
    fds.push_back(pollfd{listen_fd_.get(), POLLIN, 0});
    for (const UniqueFd& connection : connections_) {
      fds.push_back(pollfd{connection.get(), POLLIN, 0});
    }
    if (::poll(fds.data(), fds.size(), -1) < 0) {
      if (errno == EINTR) continue;
      return;
    }
    if (fds[0].revents != 0) return;
    // Connections first: a frame that ends one removes it from the list
    // the poll set was built from.
    std::vector<UniqueFd> open;
    for (size_t i = 0; i < connections_.size(); ++i) {
      const short revents = fds[i + 2].revents;
      if (revents == 0 || Answer(connections_[i].get())) open.push_back(std::move(connections_[i]));
    }
    connections_ = std::move(open);
    if (fds[1].revents & POLLIN) {
      const int fd = ::accept4(listen_fd_.get(), nullptr, nullptr, SOCK_CLOEXEC);
      if (fd >= 0) connections_.emplace_back(fd);
    }
  }
}

bool StorageStandIn::Answer(int fd) {
  data::RequestHeader request;
  absl::StatusOr<FramePrefix> prefix = ReadFrameHead(fd, request);
  if (!prefix.ok()) return false;
  if (!DiscardPayload(fd, prefix->payload_len).ok()) return false;
  if (request.op() == data::SYNC) ++syncs_;
  data::ResponseHeader response;
  response.set_request_id(request.request_id());
  return WriteFrame(fd, response, nullptr, 0).ok();
}

}  // namespace ckptfs::client::testing
