// ReaderHold: what a read-only handle of a checkpoint file holds at the
// metadata service (OpenRequest.reader_handle): while it lives, a removal of
// the checkpoint (retention, `ckptfs ckpt rm`, an abort) keeps the file's
// chunks for this handle, within the service's --orphan_grace_s. Released
// once, by Release or the destructor (one ReleaseReader call). A handle
// that dies with its process is never released: the grace ends its hold.
//
// Thread-safety: one owner at a time (a File releases it under its close
// lock). The MetaClient is borrowed and must outlive the hold.
#ifndef CKPTFS_CLIENT_READER_HOLD_H_
#define CKPTFS_CLIENT_READER_HOLD_H_

#include <cstdint>
#include <utility>

#include "client/meta_client.h"

namespace ckptfs::client {

class ReaderHold {
 public:
  ReaderHold() = default;  // holds nothing
  // The hold the service granted `handle` on `ino`.
  ReaderHold(MetaClient* meta, uint64_t ino, uint64_t handle)
      : meta_(meta), ino_(ino), handle_(handle) {}
  ReaderHold(ReaderHold&& other) noexcept { *this = std::move(other); }
  ReaderHold& operator=(ReaderHold&& other) noexcept;
  ReaderHold(const ReaderHold&) = delete;
  ReaderHold& operator=(const ReaderHold&) = delete;
  ~ReaderHold() { Release(); }

  bool held() const { return meta_ != nullptr; }

  // Tells the service the handle closed; nothing if nothing is held. An
  // error is logged, not returned: the grace ends the hold then, and a
  // reader's close has nothing else to fail.
  void Release();

 private:
  MetaClient* meta_ = nullptr;  // null: nothing held
  uint64_t ino_ = 0;
  uint64_t handle_ = 0;
};

}  // namespace ckptfs::client

#endif  // CKPTFS_CLIENT_READER_HOLD_H_
