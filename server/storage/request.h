// Request: one data-path request on its way through the storage server —
// received on a network loop (event_loop.h), executed on a disk worker
// (disk_workers.h), its reply sent back on the same loop.
//
// Ownership moves with the std::unique_ptr: the loop owns it while the
// frame arrives and while the reply is sent, a disk worker while it runs.
// Its buffers are views into one PayloadArena lease, held as long as the
// request needs them (a WRITE's until the disk is done, a READ's until its
// reply is sent).
//
// Thread-safety: none; one owner at a time.
#ifndef CKPTFS_SERVER_STORAGE_REQUEST_H_
#define CKPTFS_SERVER_STORAGE_REQUEST_H_

#include <cstddef>
#include <memory>
#include <string>

#include "proto/data.pb.h"
#include "server/storage/aligned_buffer.h"
#include "server/storage/payload_arena.h"
#include "server/storage/request_handler.h"

namespace ckptfs::storage {

class Connection;
struct Request;

// Where a disk worker hands a finished request back (its network loop).
class RequestSink {
 public:
  virtual ~RequestSink() = default;
  // Any thread.
  virtual void Done(std::unique_ptr<Request> request) = 0;
};

struct Request {
  data::RequestHeader header;
  PayloadArena::Lease lease;  // backs `payload` and `read_buffer`; may be empty
  AlignedBuffer payload;      // WRITE: the payload (a view into `lease`)
  AlignedBuffer read_buffer;  // READ: where the chunk is read (a view into `lease`)
  Reply reply;                // set by the disk worker

  // Network-loop bookkeeping.
  Connection* connection = nullptr;  // the connection it came on
  RequestSink* sink = nullptr;       // its loop
  bool counted = false;              // counts against the connection's requests in flight
  std::string head;                  // the reply's frame prefix and serialized header
  size_t sent = 0;                   // reply bytes sent so far (head, then payload)
  int zc_refs = 0;                   // zero-copy sends of it whose notification is due
};

}  // namespace ckptfs::storage

#endif  // CKPTFS_SERVER_STORAGE_REQUEST_H_
