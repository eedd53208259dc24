// See keys.h.
#include "server/meta/keys.h"

#include "absl/base/internal/endian.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"

namespace ckptfs::meta {

std::string EncodeU64(uint64_t value) {
  char buf[8];
  absl::big_endian::Store64(buf, value);
  return std::string(buf, sizeof(buf));
}

std::optional<uint64_t> DecodeU64(absl::string_view bytes) {
  if (bytes.size() != 8) return std::nullopt;
  return absl::big_endian::Load64(bytes.data());
}

std::string EncodeU32(uint32_t value) {
  char buf[4];
  absl::big_endian::Store32(buf, value);
  return std::string(buf, sizeof(buf));
}

std::optional<uint32_t> DecodeU32(absl::string_view bytes) {
  if (bytes.size() != 4) return std::nullopt;
  return absl::big_endian::Load32(bytes.data());
}

std::string InodeKey(uint64_t ino) { return absl::StrCat(kInodePrefix, EncodeU64(ino)); }

std::string DentryPrefix(uint64_t parent) {
  return absl::StrCat(kDentryPrefix, EncodeU64(parent));
}

std::string DentryKey(uint64_t parent, absl::string_view name) {
  return absl::StrCat(kDentryPrefix, EncodeU64(parent), name);
}

std::string OrphanKey(uint64_t ino) { return absl::StrCat(kOrphanPrefix, EncodeU64(ino)); }

std::string ServerKey(uint32_t id) { return absl::StrCat(kServerPrefix, EncodeU32(id)); }

std::string ServerUuidKey(absl::string_view uuid) {
  return absl::StrCat(kServerUuidPrefix, uuid);
}

std::string InodeCountKey(int shard) {
  return absl::StrCat(kInodeCountPrefix, std::string(1, static_cast<char>(shard)));
}

std::optional<uint64_t> InoFromKey(absl::string_view key) {
  if (!absl::StartsWith(key, kInodePrefix) && !absl::StartsWith(key, kOrphanPrefix)) {
    return std::nullopt;
  }
  return DecodeU64(key.substr(2));
}

}  // namespace ckptfs::meta
