// See kv_store.h.
#include "server/meta/kv_store.h"

#include <algorithm>

#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"

namespace ckptfs::meta {

void Txn::ExpectVersion(absl::string_view key, int64_t version) {
  compares_.emplace(std::string(key), version);
}

void Txn::ExpectVersionOnce(absl::string_view key, int64_t version) {
  once_.push_back(OnceCompare{std::string(key), version});
}

std::vector<Compare> Txn::SortedCompares() const {
  auto by_key = [](const Compare& a, const Compare& b) { return a.key < b.key; };
  std::vector<Compare> once;
  once.reserve(once_.size());
  for (const OnceCompare& compare : once_) once.push_back(Compare{compare.key, compare.version});
  // Usually given in key order already (a scan's keys, read in turn).
  if (!std::is_sorted(once.begin(), once.end(), by_key)) {
    std::stable_sort(once.begin(), once.end(), by_key);
  }
  if (compares_.empty()) return once;
  std::vector<Compare> all;
  all.reserve(compares_.size() + once.size());
  auto next = once.begin();
  for (const auto& [key, version] : compares_) {
    for (; next != once.end() && next->key < key; ++next) all.push_back(*next);
    all.push_back(Compare{key, version});
  }
  all.insert(all.end(), next, once.end());
  return all;
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
