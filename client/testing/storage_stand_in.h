// StorageStandIn: what the metadata service dials when it calls on storage
// servers, for tests that run the service in-process while the chunks live
// in FakeChunkTransport: a listener on 127.0.0.1 (a port of its own) that
// answers every data-path frame (common/frame.h) with success and counts
// the SYNCs (a checkpoint commit sends one per server holding chunks). It
// stores nothing. Several registered servers may share its address.
//
// One thread serves every connection in turn; each frame is read whole once
// it starts arriving (the service sends small frames, one call at a time per
// connection).
//
// Thread-safety: syncs() from any thread; the rest is the owner's.
#ifndef CKPTFS_CLIENT_TESTING_STORAGE_STAND_IN_H_
#define CKPTFS_CLIENT_TESTING_STORAGE_STAND_IN_H_

#include <atomic>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/status/statusor.h"
#include "common/unique_fd.h"

namespace ckptfs::client::testing {

class StorageStandIn {
 public:
  // Listens on 127.0.0.1, a port the kernel picks.
  static absl::StatusOr<std::unique_ptr<StorageStandIn>> Start();
  StorageStandIn(const StorageStandIn&) = delete;
  StorageStandIn& operator=(const StorageStandIn&) = delete;
  // Closes every connection and joins the thread.
  ~StorageStandIn();

  // host:port to register servers at.
  const std::string& address() const { return address_; }
  // SYNC requests answered so far.
  int syncs() const { return syncs_.load(); }

 private:
  StorageStandIn(UniqueFd listen_fd, UniqueFd wake_read, UniqueFd wake_write, std::string address);
  void Serve();
  // Answers one frame on `fd`; false when the connection is done.
  bool Answer(int fd);

  UniqueFd listen_fd_;
  UniqueFd wake_read_;  // readable once the destructor wants the thread to end
  UniqueFd wake_write_;
  const std::string address_;
  std::atomic<int> syncs_{0};
  std::vector<UniqueFd> connections_;  // the serving thread's only
  std::thread thread_;
};

}  // namespace ckptfs::client::testing

#endif  // CKPTFS_CLIENT_TESTING_STORAGE_STAND_IN_H_
