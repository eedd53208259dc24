// See keys.h.
#include "server/meta/keys.h"

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"

namespace ckptfs::meta {

namespace {

// Fixed-width big-endian encoding, by hand: absl's endian helpers are
// internal to absl.
template <typename T>
std::string EncodeBigEndian(T value) {
  std::string out(sizeof(T), '\0');
  for (size_t i = 0; i < sizeof(T); ++i) {
    out[sizeof(T) - 1 - i] = static_cast<char>(value & 0xff);
    value >>= 8;
  }
  return out;
}

template <typename T>
std::optional<T> DecodeBigEndian(absl::string_view bytes) {
  if (bytes.size() != sizeof(T)) return std::nullopt;
  T value = 0;
  for (char byte : bytes) value = static_cast<T>((value << 8) | static_cast<unsigned char>(byte));
  return value;
}

}  // namespace

std::string EncodeU64(uint64_t value) { return EncodeBigEndian(value); }
std::optional<uint64_t> DecodeU64(absl::string_view bytes) {
  return DecodeBigEndian<uint64_t>(bytes);
}
std::string EncodeU32(uint32_t value) { return EncodeBigEndian(value); }
std::optional<uint32_t> DecodeU32(absl::string_view bytes) {
  return DecodeBigEndian<uint32_t>(bytes);
}

std::string InodeKey(uint64_t ino) { return absl::StrCat(kInodePrefix, EncodeU64(ino)); }

std::string DentryPrefix(uint64_t parent) { return absl::StrCat(kDentryPrefix, EncodeU64(parent)); }

std::string DentryKey(uint64_t parent, absl::string_view name) {
  return absl::StrCat(kDentryPrefix, EncodeU64(parent), name);
}

std::string OrphanKey(uint64_t ino) { return absl::StrCat(kOrphanPrefix, EncodeU64(ino)); }

std::string ServerKey(uint32_t id) { return absl::StrCat(kServerPrefix, EncodeU32(id)); }

std::string ServerUuidKey(absl::string_view uuid) { return absl::StrCat(kServerUuidPrefix, uuid); }

std::string InodeCountKey(int shard) {
  return absl::StrCat(kInodeCountPrefix, std::string(1, static_cast<char>(shard)));
}

std::string ArrivalPrefix(uint64_t ckpt) { return absl::StrCat(kArrivalPrefix, EncodeU64(ckpt)); }

std::string ArrivalKey(uint64_t ckpt, uint32_t rank) {
  return absl::StrCat(kArrivalPrefix, EncodeU64(ckpt), EncodeU32(rank));
}

std::optional<uint32_t> RankFromArrivalKey(absl::string_view key) {
  if (!absl::StartsWith(key, kArrivalPrefix) || key.size() != kArrivalPrefix.size() + 12) {
    return std::nullopt;
  }
  return DecodeU32(key.substr(kArrivalPrefix.size() + 8));
}

std::string PendingCheckpointKey(uint64_t ckpt) {
  return absl::StrCat(kPendingCheckpointPrefix, EncodeU64(ckpt));
}

std::string ReaderHoldPrefix(uint64_t ino) {
  return absl::StrCat(kReaderHoldPrefix, EncodeU64(ino));
}

std::string ReaderHoldKey(uint64_t ino, uint64_t handle) {
  return absl::StrCat(ReaderHoldPrefix(ino), EncodeU64(handle));
}

std::optional<uint64_t> InoFromKey(absl::string_view key) {
  if (absl::StartsWith(key, kReaderHoldPrefix)) return DecodeU64(key.substr(2, 8));
  if (!absl::StartsWith(key, kInodePrefix) && !absl::StartsWith(key, kOrphanPrefix) &&
      !absl::StartsWith(key, kPendingCheckpointPrefix)) {
    return std::nullopt;
  }
  return DecodeU64(key.substr(2));
}

}  // namespace ckptfs::meta
