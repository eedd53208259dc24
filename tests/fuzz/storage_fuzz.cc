// FuzzStorageRequests: see fuzz_targets.h.
//
// The input is a sequence of steps, each one byte of kind, one of flags,
// then the kind's fields (fuzz_input.h reads zeros past the end). A model
// of the chunks (their bytes, or "damaged": reads give EIO or the right
// bytes, or "unknown": anything but a wrong errno-less error) says what
// every reply must be.
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <memory>
#include <string>
#include <utility>

#include "absl/strings/str_cat.h"
#include "common/crc32c.h"
#include "common/errno_status.h"
#include "common/uring.h"
#include "proto/data.pb.h"
#include "server/storage/aligned_buffer.h"
#include "server/storage/chunk_store.h"
#include "server/storage/request_handler.h"
#include "tests/fuzz/fuzz_input.h"
#include "tests/fuzz/fuzz_targets.h"
#include "tests/fuzz/scratch_dir.h"

namespace ckptfs::fuzz {
namespace {

using storage::AlignedBuffer;
using storage::kMaxChunkLength;

constexpr size_t kMaxSteps = 64;
constexpr size_t kKeepReadBuffer = 1u << 20;

struct ModelChunk {
  enum class State { kKnown, kDamaged, kUnknown };
  State state = State::kKnown;
  std::string data;  // kKnown, kDamaged: the bytes stored
};

using Model = std::map<std::pair<uint64_t, uint32_t>, ModelChunk>;

Ring& TheRing() {
  static Ring* ring = [] {
    auto made = Ring::Create(64);
    FUZZ_CHECK(made.ok(), made.status().ToString());
    return made->release();
  }();
  return *ring;
}

uint64_t PickIno(FuzzInput& in) {
  const uint8_t v = in.U8();
  return v < 240 ? 1 + v % 3 : in.U64();
}

uint32_t PickIndex(FuzzInput& in) {
  const uint8_t v = in.U8();
  return v < 240 ? v % 3 : in.U32();
}

uint32_t PickOffset(FuzzInput& in) {
  switch (in.U8() % 6) {
    case 0:
      return 0;
    case 1:
      return in.U32() % 16384;
    case 2:
      return in.U32() | 0x80000000u;  // far past the limit
    case 3:
      return kMaxChunkLength - in.U32() % 64;  // at the limit or just short of it
    case 4:
      return in.U32() % (1u << 20);
    default:
      return static_cast<uint32_t>(storage::kBlockSize * (in.U8() % 4));
  }
}

uint32_t PickLength(FuzzInput& in) {
  switch (in.U8() % 4) {
    case 0:
      return in.U32() % 16384;
    case 1:
      return in.U32();
    case 2:
      return kMaxChunkLength;
    default:
      return in.U32() % 256;
  }
}

std::string Describe(const data::RequestHeader& request, const data::ResponseHeader& reply) {
  return absl::StrCat("request {", request.ShortDebugString(), "} reply {",
                      reply.ShortDebugString(), "}");
}

class Runner {
 public:
  Runner(storage::ChunkStore& store) : store_(store), handler_(store) {}

  void Run(FuzzInput& in) {
    for (size_t step = 0; step < kMaxSteps && !in.empty(); ++step) Step(in);
  }

 private:
  void Step(FuzzInput& in) {
    const uint8_t kind = in.U8();
    const uint8_t flags = in.U8();
    data::RequestHeader request;
    request.set_request_id((flags & 1) != 0 ? 0 : ((flags & 2) != 0 ? in.U64() : ++next_id_));
    if (request.request_id() == 0 && (flags & 1) == 0) request.set_request_id(++next_id_);
    request.set_ino(PickIno(in));
    request.set_chunk_index(PickIndex(in));
    std::string payload;
    switch (kind % 8) {
      case 0:
      case 7:
        request.set_op(data::WRITE);
        request.set_offset(PickOffset(in));
        request.set_replace((flags & 8) != 0);
        payload = in.Bytes();
        if ((flags & 0x30) == 0x30) payload.append(in.U32() % (64 << 10), 'z');
        if (request.offset() > kMaxChunkLength - 64 &&
            request.offset() + payload.size() <= kMaxChunkLength) {
          // A write that fits at the limit builds a 64 MiB chunk, ~100 times
          // the work of a small input (chunk_store_test covers it): move it
          // one byte past the limit instead, which must fail.
          request.set_offset(static_cast<uint32_t>(kMaxChunkLength + 1 - payload.size()));
        }
        request.set_payload_crc32c((flags & 4) != 0 ? in.U32()
                                                    : Crc32c(payload.data(), payload.size()));
        break;
      case 1:
        request.set_op(data::READ);
        request.set_offset(PickOffset(in));
        request.set_length(PickLength(in));
        break;
      case 2:
        request.set_op(data::TRIM);
        request.set_trim_size((flags & 4) != 0 ? in.U64() : in.U32() % (1u << 20));
        switch (in.U8() % 4) {
          case 0:
            request.set_chunk_size(0);
            break;
          case 1:
            request.set_chunk_size(in.U32());
            break;
          default:
            request.set_chunk_size(4096u << (in.U8() % 4));
            break;
        }
        break;
      case 3:
        request.set_op(data::SYNC);
        // One syncfs per input at most: it waits for the whole file system.
        request.set_whole_store((flags & 16) != 0 && !synced_all_);
        synced_all_ = synced_all_ || request.whole_store();
        break;
      case 4:
        request.set_op(data::PING);
        break;
      case 5: {
        const uint32_t op = in.U32();
        request.set_op(static_cast<data::Op>(op >= 1 && op <= 5 ? op + 5 : op));
        request.set_offset(in.U32());
        request.set_length(in.U32());
        payload = in.Bytes();
        break;
      }
      default:
        Damage(in, request.ino(), request.chunk_index());
        return;
    }
    Execute(request, payload);
  }

  void Execute(const data::RequestHeader& request, const std::string& payload) {
    AlignedBuffer payload_buffer;
    FUZZ_CHECK(payload_buffer.Reserve(payload.size()).ok(), "payload buffer");
    std::copy(payload.begin(), payload.end(), payload_buffer.data());
    payload_buffer.set_size(payload.size());
    if (request.op() == data::READ) {
      // The buffer ReadBufferSize asks for, as the connection leases it, but
      // at most kKeepReadBuffer: a 64 MiB allocation per READ would make
      // every input slow, and a smaller buffer takes the handler's path
      // that grows it (the frame target checks the size asked for).
      FUZZ_CHECK(
          read_buffer_.Reserve(std::min<size_t>(storage::ReadBufferSize(request), kKeepReadBuffer))
              .ok(),
          "read buffer");
    }
    storage::Reply reply = handler_.Handle(TheRing(), request, payload_buffer, read_buffer_);
    read_buffer_.ShrinkTo(kKeepReadBuffer);
    const data::ResponseHeader& header = reply.header;
    const std::string what = Describe(request, header);
    if (std::getenv("CKPTFS_FUZZ_TRACE") != nullptr) {
      std::fprintf(stderr, "%s payload %zu\n", what.c_str(), payload.size());
    }
    FUZZ_CHECK(header.request_id() == request.request_id(), what);
    if (header.error() != 0) {
      FUZZ_CHECK(!header.message().empty(), what);
      FUZZ_CHECK(reply.payload.empty(), what);
    }
    if (request.request_id() == 0) {
      FUZZ_CHECK(header.error() == EINVAL, what);
      return;
    }
    switch (request.op()) {
      case data::WRITE:
        return CheckWrite(request, payload, header, what);
      case data::READ:
        return CheckRead(request, reply, what);
      case data::TRIM:
        return CheckTrim(request, header, what);
      case data::SYNC:
      case data::PING:
        FUZZ_CHECK(header.error() == 0, what);
        return;
      default:
        FUZZ_CHECK(header.error() == EOPNOTSUPP, what);
        return;
    }
  }

  void CheckWrite(const data::RequestHeader& request, const std::string& payload,
                  const data::ResponseHeader& header, const std::string& what) {
    const int err = header.error();
    if (request.payload_crc32c() != Crc32c(payload.data(), payload.size())) {
      FUZZ_CHECK(err == EBADMSG, what);
      return;
    }
    if (uint64_t{request.offset()} + payload.size() > kMaxChunkLength ||
        (request.replace() && request.offset() != 0)) {
      FUZZ_CHECK(err == EINVAL, what);
      return;
    }
    const auto key = std::make_pair(request.ino(), request.chunk_index());
    auto it = model_.find(key);
    const bool trusted = it == model_.end() || it->second.state == ModelChunk::State::kKnown;
    const size_t known = it == model_.end() ? 0 : it->second.data.size();
    if (trusted && !request.replace() && !payload.empty() && request.offset() > known) {
      // A merge past the stored bytes is refused, never filled with zeros.
      FUZZ_CHECK(err == ENODATA, what);
      return;
    }
    if (err != 0) {
      // A chunk to merge into that is damaged is EIO; anything else fails
      // only when the disk does.
      // A chunk whose bytes the model does not know may also be shorter
      // than the offset (ENODATA).
      FUZZ_CHECK(
          !trusted ? err == EIO || err == ENOENT || err == ENODATA : err == ENOSPC || err == EDQUOT,
          what);
      return;
    }
    ModelChunk& chunk = model_[key];
    if (request.replace()) {
      chunk.state = ModelChunk::State::kKnown;
      chunk.data = payload;
      return;
    }
    if (chunk.state == ModelChunk::State::kUnknown) return;  // merged into unknown bytes
    chunk.state = ModelChunk::State::kKnown;                 // the new file is whole
    std::string& data = chunk.data;
    const size_t end = request.offset() + payload.size();
    if (data.size() < end) data.resize(end, '\0');
    std::copy(payload.begin(), payload.end(), data.begin() + request.offset());
  }

  void CheckRead(const data::RequestHeader& request, const storage::Reply& reply,
                 const std::string& what) {
    const data::ResponseHeader& header = reply.header;
    if (uint64_t{request.offset()} + request.length() > kMaxChunkLength) {
      FUZZ_CHECK(header.error() == EINVAL, what);
      return;
    }
    auto it = model_.find({request.ino(), request.chunk_index()});
    if (it == model_.end()) {
      FUZZ_CHECK(header.error() == ENOENT, what);
      return;
    }
    const ModelChunk& chunk = it->second;
    if (header.error() != 0) {
      FUZZ_CHECK(chunk.state != ModelChunk::State::kKnown, what);
      FUZZ_CHECK(header.error() == EIO || chunk.state == ModelChunk::State::kUnknown, what);
      return;
    }
    FUZZ_CHECK(header.payload_crc32c() == Crc32c(reply.payload.data(), reply.payload.size()), what);
    if (chunk.state == ModelChunk::State::kUnknown) return;
    const std::string& data = chunk.data;
    const size_t begin = std::min<size_t>(request.offset(), data.size());
    const size_t end =
        std::min<uint64_t>(uint64_t{request.offset()} + request.length(), data.size());
    FUZZ_CHECK(header.chunk_length() == data.size(),
               absl::StrCat(what, " model length ", data.size()));
    FUZZ_CHECK(reply.payload == absl::string_view(data).substr(begin, end - begin),
               absl::StrCat(what, ": wrong bytes"));
  }

  void CheckTrim(const data::RequestHeader& request, const data::ResponseHeader& header,
                 const std::string& what) {
    const uint64_t new_size = request.trim_size();
    const uint32_t chunk_size = request.chunk_size();
    if (chunk_size == 0 && new_size != 0) {
      FUZZ_CHECK(header.error() == EINVAL, what);
      return;
    }
    bool may_fail = false;
    for (auto it = model_.lower_bound({request.ino(), 0});
         it != model_.end() && it->first.first == request.ino();) {
      const uint64_t start = uint64_t{it->first.second} * chunk_size;
      ModelChunk& chunk = it->second;
      if (new_size == 0 || start >= new_size) {
        it = model_.erase(it);
        continue;
      }
      if (new_size - start < chunk_size) {
        const uint64_t keep = new_size - start;
        if (chunk.state != ModelChunk::State::kKnown) {
          // Cutting it reads it first: EIO, or cut if the damage was benign.
          may_fail = true;
          chunk.state = ModelChunk::State::kUnknown;
        } else if (chunk.data.size() > keep) {
          chunk.data.resize(keep);
        }
      }
      ++it;
    }
    FUZZ_CHECK(header.error() == 0 || (may_fail && header.error() == EIO), what);
  }

  // Damages a stored chunk file on disk: flips a byte, or cuts the file.
  void Damage(FuzzInput& in, uint64_t ino, uint32_t index) {
    auto it = model_.find({ino, index});
    const uint32_t where = in.U32();
    const uint8_t mask = in.U8() | 1;
    const bool cut = (mask & 2) != 0;
    if (std::getenv("CKPTFS_FUZZ_TRACE") != nullptr) {
      std::fprintf(stderr, "damage chunk %u of %lu at %u mask %u%s\n", index,
                   static_cast<unsigned long>(ino), where, mask, cut ? " (cut)" : "");
    }
    if (it == model_.end()) return;
    const std::string path = store_.ChunkPath({ino, index});
    struct stat st {};
    if (::stat(path.c_str(), &st) != 0 || st.st_size == 0) return;
    const off_t at = static_cast<off_t>(where % static_cast<uint64_t>(st.st_size));
    if (cut) {
      FUZZ_CHECK(::truncate(path.c_str(), at) == 0, path);
    } else {
      const int fd = ::open(path.c_str(), O_RDWR | O_CLOEXEC);
      FUZZ_CHECK(fd >= 0, path);
      char byte = 0;
      FUZZ_CHECK(::pread(fd, &byte, 1, at) == 1, path);
      byte = static_cast<char>(byte ^ mask);
      FUZZ_CHECK(::pwrite(fd, &byte, 1, at) == 1, path);
      ::close(fd);
    }
    if (it->second.state == ModelChunk::State::kKnown)
      it->second.state = ModelChunk::State::kDamaged;
  }

  storage::ChunkStore& store_;
  storage::RequestHandler handler_;
  AlignedBuffer read_buffer_;
  Model model_;
  uint64_t next_id_ = 0;
  bool synced_all_ = false;
};

}  // namespace

void FuzzStorageRequests(const uint8_t* data, size_t size) {
  const std::string dir = FreshScratchDir();
  auto store = storage::ChunkStore::Open(dir);
  FUZZ_CHECK(store.ok(), store.status().ToString());
  FuzzInput in(data, size);
  Runner runner(**store);
  runner.Run(in);
}

}  // namespace ckptfs::fuzz
