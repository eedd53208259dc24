// See memory_kv_store.h.
#include "server/meta/memory_kv_store.h"

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"

namespace ckptfs::meta {

absl::StatusOr<std::optional<VersionedValue>> MemoryKvStore::Get(absl::string_view key) {
  absl::MutexLock lock(&mu_);
  auto it = data_.find(key);
  if (it == data_.end()) return std::optional<VersionedValue>();
  return std::optional<VersionedValue>(it->second);
}

absl::StatusOr<std::vector<KeyValue>> MemoryKvStore::Scan(absl::string_view prefix,
                                                          absl::string_view start_after,
                                                          size_t limit) {
  absl::MutexLock lock(&mu_);
  std::vector<KeyValue> out;
  const std::string start = absl::StrCat(prefix, start_after);
  auto it = start_after.empty() ? data_.lower_bound(start) : data_.upper_bound(start);
  for (; it != data_.end() && out.size() < limit; ++it) {
    if (!absl::StartsWith(it->first, prefix)) break;
    out.push_back(KeyValue{it->first, it->second.value, it->second.version});
  }
  return out;
}

absl::StatusOr<int64_t> MemoryKvStore::Commit(const Txn& txn) {
  absl::MutexLock lock(&mu_);
  for (const Compare& compare : txn.SortedCompares()) {
    auto it = data_.find(compare.key);
    const int64_t version = it == data_.end() ? 0 : it->second.version;
    if (version != compare.version) return TxnConflictError(compare.key);
  }
  if (txn.writes().empty()) return revision_;
  ++revision_;
  for (const auto& [key, value] : txn.writes()) {
    if (value.has_value()) {
      data_[key] = VersionedValue{*value, revision_};
    } else {
      data_.erase(key);
    }
  }
  return revision_;
}

}  // namespace ckptfs::meta
