// ErasureCode: Reed–Solomon k+m over GF(2^8), the math of erasure-coded
// chunks (client/fragment_io.h), done by Intel ISA-L.
//
// A chunk's bytes are cut into k data fragments of equal length; Encode
// computes m parity fragments of that length such that any k of the k+m
// fragments give back all the others (Decode). The code is systematic (the
// data fragments are the chunk's bytes as they are) and uses ISA-L's Cauchy
// matrix, for which every k x k submatrix is invertible, so any k survivors
// do.
//
// Thread-safety: immutable after Create; Encode and Decode may run
// concurrently from any threads.
#ifndef CKPTFS_COMMON_ERASURE_CODE_H_
#define CKPTFS_COMMON_ERASURE_CODE_H_

#include <cstddef>
#include <cstdint>
#include <vector>

#include "absl/status/statusor.h"

namespace ckptfs {

class ErasureCode {
 public:
  // The most fragments a chunk may have (k + m).
  static constexpr int kMaxFragments = 32;

  // A k+m code. EINVAL unless k >= 1, m >= 1 and k + m <= kMaxFragments.
  static absl::StatusOr<ErasureCode> Create(int k, int m);

  int k() const { return k_; }
  int m() const { return m_; }

  // Computes parity[0..m) (each `len` bytes) from data[0..k) (each `len`
  // bytes). Buffers may not overlap.
  void Encode(size_t len, const unsigned char* const* data, unsigned char* const* parity) const;

  // Rebuilds fragments `want` (fragment numbers in [0, k+m): data first,
  // then parity) into out[i] (len bytes each) from `have`: exactly k
  // distinct fragment numbers with their bytes in have_bytes[i]. EINVAL
  // when `have` is not k distinct valid numbers or `want` has an invalid
  // one.
  absl::Status Decode(size_t len, const std::vector<int>& have,
                      const unsigned char* const* have_bytes, const std::vector<int>& want,
                      unsigned char* const* out) const;

 private:
  ErasureCode(int k, int m);

  int k_;
  int m_;
  std::vector<unsigned char> matrix_;         // (k+m) x k: identity, then Cauchy rows
  std::vector<unsigned char> encode_tables_;  // ISA-L tables of the m parity rows
};

}  // namespace ckptfs

#endif  // CKPTFS_COMMON_ERASURE_CODE_H_
