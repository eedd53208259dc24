// See kv_store.h.
#include "server/meta/kv_store.h"

#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"

namespace ckptfs::meta {

void Txn::ExpectVersion(absl::string_view key, int64_t version) {
  compares_.emplace(std::string(key), version);
}

void Txn::Put(absl::string_view key, absl::string_view value) {
  writes_[std::string(key)] = std::string(value);
}

void Txn::Delete(absl::string_view key) { writes_[std::string(key)] = std::nullopt; }

absl::Status TxnConflictError(absl::string_view key) {
  return absl::AbortedError(
      absl::StrCat("transaction conflict on key \"", absl::CHexEscape(key), "\""));
}

bool IsTxnConflict(const absl::Status& status) {
  return status.code() == absl::StatusCode::kAborted;
}

}  // namespace ckptfs::meta
