// FuzzInput: reads typed values off the front of a fuzzer's byte string, so
// that one input decodes into a sequence of requests. Reading past the end
// yields zeros (and empty strings), never fails: every byte string is a
// valid program, and a shorter one is a prefix of a longer one's program.
// Also CHECK-style oracles for the fuzz functions: a broken property
// prints what broke and aborts (a crash to libFuzzer; a failed test to the
// GoogleTest replay).
//
// Thread-safety: none; one owner.
#ifndef CKPTFS_TESTS_FUZZ_FUZZ_INPUT_H_
#define CKPTFS_TESTS_FUZZ_FUZZ_INPUT_H_

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>

#include "absl/strings/string_view.h"

namespace ckptfs::fuzz {

class FuzzInput {
 public:
  FuzzInput(const uint8_t* data, size_t size)
      : data_(reinterpret_cast<const char*>(data)), size_(size) {}

  bool empty() const { return at_ >= size_; }
  size_t remaining() const { return empty() ? 0 : size_ - at_; }

  uint8_t U8() { return at_ < size_ ? static_cast<uint8_t>(data_[at_++]) : 0; }
  bool Bool() { return (U8() & 1) != 0; }
  uint32_t U32() { return static_cast<uint32_t>(Le(4)); }
  uint64_t U64() { return Le(8); }
  // A value in [0, n) (0 when n is 0).
  uint32_t Below(uint32_t n) { return n == 0 ? 0 : U8() % n; }

  // A length-prefixed byte string: one byte of length, or with the top bit
  // set, two (up to 32 KiB), then that many bytes (fewer at the end).
  std::string Bytes() {
    size_t n = U8();
    if ((n & 0x80) != 0) n = ((n & 0x7f) << 8) | U8();
    return Take(n);
  }
  // Up to `n` bytes, fewer at the end.
  std::string Take(size_t n) {
    const size_t k = n < remaining() ? n : remaining();
    std::string out(data_ + at_, k);
    at_ += k;
    return out;
  }

 private:
  uint64_t Le(int bytes) {
    uint64_t v = 0;
    for (int i = 0; i < bytes; ++i) v |= uint64_t{U8()} << (8 * i);
    return v;
  }

  const char* data_;
  size_t size_;
  size_t at_ = 0;
};

[[noreturn]] inline void FuzzCheckFailed(const char* file, int line, const char* what,
                                         absl::string_view detail) {
  std::fprintf(stderr, "%s:%d: fuzz check failed: %s %.*s\n", file, line, what,
               static_cast<int>(detail.size()), detail.data());
  std::abort();
}

}  // namespace ckptfs::fuzz

// FUZZ_CHECK(cond, detail): aborts with `detail` (a string) when !cond.
#define FUZZ_CHECK(cond, detail)                                                       \
  do {                                                                                 \
    if (!(cond)) ::ckptfs::fuzz::FuzzCheckFailed(__FILE__, __LINE__, #cond, (detail)); \
  } while (0)

#endif  // CKPTFS_TESTS_FUZZ_FUZZ_INPUT_H_
