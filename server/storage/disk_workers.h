// DiskWorkers: a fixed pool of threads that run requests against the chunk
// store (RequestHandler) so that the network loops never block on disk.
//
// Each worker owns an io_uring Ring for its O_DIRECT reads, writes and
// fsyncs; the PayloadArena's region is registered with every ring, so chunk
// I/O on pool buffers runs as READ_FIXED / WRITE_FIXED. A finished request
// goes to its RequestSink (the loop that received it), which sends the reply.
// Requests run in the order they were submitted, up to `threads` at once;
// requests of one connection may finish in any order.
//
// Thread-safety: Submit() from any thread; Stop() from one thread, after
// the last Submit().
#ifndef CKPTFS_SERVER_STORAGE_DISK_WORKERS_H_
#define CKPTFS_SERVER_STORAGE_DISK_WORKERS_H_

#include <sys/uio.h>

#include <deque>
#include <memory>
#include <thread>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "common/uring.h"
#include "server/storage/request.h"
#include "server/storage/request_handler.h"

namespace ckptfs::storage {

class DiskWorkers {
 public:
  // Starts `threads` (>= 1) workers over `handler` (borrowed; outlives
  // this). `fixed_regions` are registered with each worker's ring; if that
  // fails (locked-memory limits) the workers run without fixed buffers.
  static absl::StatusOr<std::unique_ptr<DiskWorkers>> Start(
      size_t threads, RequestHandler& handler, const std::vector<iovec>& fixed_regions);

  DiskWorkers(const DiskWorkers&) = delete;
  DiskWorkers& operator=(const DiskWorkers&) = delete;
  ~DiskWorkers() { Stop(); }

  // Queues `request` (its sink set); a worker runs it and hands it to the
  // sink.
  void Submit(std::unique_ptr<Request> request);

  // Runs what is queued, then joins the workers. Idempotent.
  void Stop();

  // Whether the rings use the registered pool region.
  bool fixed_buffers() const { return fixed_buffers_; }

 private:
  explicit DiskWorkers(RequestHandler& handler) : handler_(handler) {}
  void Work(Ring& ring);

  RequestHandler& handler_;
  bool fixed_buffers_ = false;
  std::vector<std::unique_ptr<Ring>> rings_;
  std::vector<std::thread> threads_;
  absl::Mutex mu_;  // leaf lock
  std::deque<std::unique_ptr<Request>> queue_ ABSL_GUARDED_BY(mu_);
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
};

}  // namespace ckptfs::storage

#endif  // CKPTFS_SERVER_STORAGE_DISK_WORKERS_H_
