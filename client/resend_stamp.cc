// See resend_stamp.h.
#include "client/resend_stamp.h"

#include "common/random_id.h"

namespace ckptfs::client {

ResendStamp::ResendStamp() : client_id_(RandomNonzeroId()) {}

void ResendStamp::Stamp(data::RequestHeader& request) {
  if (request.op() != data::WRITE && request.op() != data::TRIM) return;
  if (request.write_id() != 0) request.add_supersedes(request.write_id());
  request.set_client_id(client_id_);
  request.set_write_id(next_write_id_.fetch_add(1, std::memory_order_relaxed));
}

}  // namespace ckptfs::client
