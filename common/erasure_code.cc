// See erasure_code.h.
#include "common/erasure_code.h"

#include <isa-l/erasure_code.h>

#include <cerrno>

#include "absl/strings/str_cat.h"
#include "common/errno_status.h"

namespace ckptfs {

absl::StatusOr<ErasureCode> ErasureCode::Create(int k, int m) {
  if (k < 1 || m < 1 || k + m > kMaxFragments) {
    return ErrnoStatus(EINVAL, absl::StrCat("erasure code ", k, "+", m,
                                            ": want k >= 1, m >= 1 "
                                            "and k + m <= ",
                                            kMaxFragments));
  }
  return ErasureCode(k, m);
}

ErasureCode::ErasureCode(int k, int m)
    : k_(k),
      m_(m),
      matrix_(static_cast<size_t>((k + m) * k)),
      encode_tables_(static_cast<size_t>(32 * k * m)) {
  gf_gen_cauchy1_matrix(matrix_.data(), k + m, k);
  ec_init_tables(k, m, matrix_.data() + k * k, encode_tables_.data());
}

void ErasureCode::Encode(size_t len, const unsigned char* const* data,
                         unsigned char* const* parity) const {
  if (len == 0) return;
  // ISA-L's signature is not const-correct; it only reads `data` and the tables.
  ec_encode_data(static_cast<int>(len), k_, m_, const_cast<unsigned char*>(encode_tables_.data()),
                 const_cast<unsigned char**>(data), const_cast<unsigned char**>(parity));
}

absl::Status ErasureCode::Decode(size_t len, const std::vector<int>& have,
                                 const unsigned char* const* have_bytes,
                                 const std::vector<int>& want, unsigned char* const* out) const {
  const int n = k_ + m_;
  if (static_cast<int>(have.size()) != k_) {
    return ErrnoStatus(EINVAL, absl::StrCat("decode needs ", k_, " fragments, got ", have.size()));
  }
  std::vector<bool> seen(static_cast<size_t>(n), false);
  for (int f : have) {
    if (f < 0 || f >= n || seen[static_cast<size_t>(f)]) {
      return ErrnoStatus(EINVAL, absl::StrCat("decode: fragment ", f, " invalid or repeated"));
    }
    seen[static_cast<size_t>(f)] = true;
  }
  for (int f : want) {
    if (f < 0 || f >= n) return ErrnoStatus(EINVAL, absl::StrCat("decode: no fragment ", f));
  }
  if (want.empty() || len == 0) return absl::OkStatus();
  // The rows of the survivors, inverted, map them back to the data; a wanted
  // fragment's own row times that inverse maps the survivors to it.
  const size_t kk = static_cast<size_t>(k_);
  std::vector<unsigned char> survivors(kk * kk);
  for (size_t i = 0; i < kk; ++i) {
    for (size_t j = 0; j < kk; ++j) {
      survivors[i * kk + j] = matrix_[static_cast<size_t>(have[i]) * kk + j];
    }
  }
  std::vector<unsigned char> inverse(kk * kk);
  if (gf_invert_matrix(survivors.data(), inverse.data(), k_) != 0) {
    return ErrnoStatus(EIO, "decode: the surviving fragments' matrix is singular");
  }
  std::vector<unsigned char> rows(want.size() * kk);
  for (size_t w = 0; w < want.size(); ++w) {
    const unsigned char* row = &matrix_[static_cast<size_t>(want[w]) * kk];
    for (size_t j = 0; j < kk; ++j) {
      unsigned char s = 0;
      for (size_t t = 0; t < kk; ++t) s ^= gf_mul(row[t], inverse[t * kk + j]);
      rows[w * kk + j] = s;
    }
  }
  std::vector<unsigned char> tables(32 * kk * want.size());
  ec_init_tables(k_, static_cast<int>(want.size()), rows.data(), tables.data());
  ec_encode_data(static_cast<int>(len), k_, static_cast<int>(want.size()), tables.data(),
                 const_cast<unsigned char**>(have_bytes), const_cast<unsigned char**>(out));
  return absl::OkStatus();
}

}  // namespace ckptfs
