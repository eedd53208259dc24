// See disk_workers.h.
#include "server/storage/disk_workers.h"

#include <utility>

#include "common/log.h"

namespace ckptfs::storage {
namespace {

// Operations one request puts in flight at most: a chunk write is two
// (header block, data), a SYNC batches 64 fdatasyncs.
constexpr unsigned kRingEntries = 64;

}  // namespace

absl::StatusOr<std::unique_ptr<DiskWorkers>> DiskWorkers::Start(
    size_t threads, RequestHandler& handler, const std::vector<iovec>& fixed_regions) {
  std::unique_ptr<DiskWorkers> workers(new DiskWorkers(handler));
  workers->fixed_buffers_ = !fixed_regions.empty();
  for (size_t i = 0; i < std::max<size_t>(threads, 1); ++i) {
    auto ring = Ring::Create(kRingEntries);
    if (!ring.ok()) return ring.status();
    if (workers->fixed_buffers_) {
      if (absl::Status s = (*ring)->RegisterBuffers(fixed_regions); !s.ok()) {
        CKPTFS_LOG(kWarning) << "disk I/O without registered buffers: " << s.message();
        workers->fixed_buffers_ = false;
      }
    }
    workers->rings_.push_back(*std::move(ring));
  }
  for (auto& ring : workers->rings_) {
    workers->threads_.emplace_back([w = workers.get(), r = ring.get()] { w->Work(*r); });
  }
  return workers;
}

void DiskWorkers::Submit(std::unique_ptr<Request> request) {
  absl::MutexLock lock(&mu_);
  queue_.push_back(std::move(request));
}

void DiskWorkers::Work(Ring& ring) {
  for (;;) {
    std::unique_ptr<Request> request;
    {
      absl::MutexLock lock(&mu_);
      auto ready = [this]()
                       ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return stopping_ || !queue_.empty(); };
      mu_.Await(absl::Condition(&ready));
      if (queue_.empty()) return;  // stopping, nothing left
      request = std::move(queue_.front());
      queue_.pop_front();
    }
    request->reply = handler_.Handle(ring, request->header, request->payload, request->read_buffer);
    RequestSink* sink = request->sink;
    sink->Done(std::move(request));
  }
}

void DiskWorkers::Stop() {
  {
    absl::MutexLock lock(&mu_);
    if (stopping_ && threads_.empty()) return;
    stopping_ = true;
  }
  for (std::thread& thread : threads_) thread.join();
  threads_.clear();
}

}  // namespace ckptfs::storage
