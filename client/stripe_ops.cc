// See stripe_ops.h.
#include "client/stripe_ops.h"

#include <algorithm>
#include <memory>

#include "absl/strings/str_cat.h"
#include "absl/synchronization/blocking_counter.h"
#include "absl/synchronization/mutex.h"
#include "client/fragment_io.h"
#include "client/io_errors.h"
#include "client/layout.h"
#include "common/placement.h"

namespace ckptfs::client {

absl::Status ForEachServer(IoExecutor& executor, std::vector<uint32_t> server_ids,
                           const std::function<absl::Status(uint32_t)>& op) {
  std::sort(server_ids.begin(), server_ids.end());
  server_ids.erase(std::unique(server_ids.begin(), server_ids.end()), server_ids.end());
  if (server_ids.empty()) return absl::OkStatus();
  absl::BlockingCounter done(static_cast<int>(server_ids.size()));
  absl::Mutex mu;
  absl::Status first_error;
  for (uint32_t id : server_ids) {
    executor.Submit([&, id] {
      absl::Status status = op(id);
      if (!status.ok()) {
        absl::MutexLock lock(&mu);
        if (first_error.ok()) first_error = std::move(status);
      }
      done.DecrementCount();
    });
  }
  done.Wait();
  absl::MutexLock lock(&mu);
  return first_error;
}

absl::Status TrimStripe(ChunkTransport& transport, IoExecutor& executor, uint64_t ino,
                        const meta::Layout& layout, uint64_t trim_size) {
  std::vector<uint32_t> ids(layout.stripe().begin(), layout.stripe().end());
  const uint32_t chunk_size = layout.chunk_size();
  // Servers cut chunks by byte offset, which does not fit fragments: they
  // drop whole chunks, and the chunk the new size falls in is re-encoded.
  const bool fragments = IsErasureCoded(layout);
  const uint64_t server_trim =
      fragments ? ChunkCount(trim_size, chunk_size) * uint64_t{chunk_size} : trim_size;
  absl::Status status = ForEachServer(executor, std::move(ids), [&](uint32_t id) {
    return transport.TrimChunks(id, ino, server_trim, chunk_size);
  });
  if (status.ok() && fragments && trim_size % chunk_size != 0) {
    status = CutChunkFragments(transport, layout, ino, trim_size / chunk_size,
                               static_cast<uint32_t>(trim_size % chunk_size));
  }
  if (status.ok()) return status;
  return FileIoError(status, absl::StrCat("trim of inode ", ino, " to ", trim_size, " bytes"));
}

}  // namespace ckptfs::client
