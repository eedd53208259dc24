// See meta_channel.h.
#include "common/meta_channel.h"

#include <arpa/inet.h>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <random>

#include "absl/status/status.h"
#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"

namespace ckptfs {
namespace {

enum class Family { kIpv4, kIpv6 };

struct Entry {
  Family family;
  std::string text;  // "a.b.c.d:port" or "[v6]:port"
};

absl::Status BadEntry(absl::string_view list, absl::string_view entry, absl::string_view why) {
  return absl::InvalidArgumentError(
      absl::StrCat("metadata address list '", list, "': entry '", entry, "' ", why));
}

absl::StatusOr<Entry> ParseNumericEntry(absl::string_view list, absl::string_view entry) {
  const size_t colon = entry.rfind(':');
  if (colon == absl::string_view::npos || colon + 1 == entry.size()) {
    return BadEntry(list, entry, "has no port (want IPv4:port or [IPv6]:port)");
  }
  uint32_t port = 0;
  if (!absl::SimpleAtoi(entry.substr(colon + 1), &port) || port == 0 || port > 65535) {
    return BadEntry(list, entry, "has a bad port (want 1-65535)");
  }
  absl::string_view host = entry.substr(0, colon);
  const std::string port_text = std::to_string(port);
  if (host.size() >= 2 && host.front() == '[' && host.back() == ']') {
    const std::string v6(host.substr(1, host.size() - 2));
    in6_addr addr6;
    if (inet_pton(AF_INET6, v6.c_str(), &addr6) != 1) {
      return BadEntry(list, entry, "is not a numeric IPv6 address in brackets");
    }
    return Entry{Family::kIpv6, absl::StrCat("[", v6, "]:", port_text)};
  }
  if (host == "localhost") host = "127.0.0.1";
  const std::string v4(host);
  in_addr addr4;
  if (inet_pton(AF_INET, v4.c_str(), &addr4) != 1) {
    return BadEntry(list, entry,
                    "is not IPv4:port, localhost:port or [IPv6]:port (a host name is "
                    "accepted only as the single metadata address)");
  }
  return Entry{Family::kIpv4, absl::StrCat(v4, ":", port_text)};
}

}  // namespace

absl::StatusOr<std::vector<std::string>> SplitMetaAddresses(absl::string_view list) {
  if (absl::StripAsciiWhitespace(list).empty()) {
    return absl::InvalidArgumentError("empty metadata address list");
  }
  std::vector<std::string> entries;
  for (absl::string_view piece : absl::StrSplit(list, ',')) {
    absl::string_view entry = absl::StripAsciiWhitespace(piece);
    if (entry.empty()) {
      return absl::InvalidArgumentError(
          absl::StrCat("metadata address list '", list, "' has an empty entry"));
    }
    entries.emplace_back(entry);
  }
  return entries;
}

absl::StatusOr<std::string> MetaChannelTarget(absl::string_view list) {
  return SpreadMetaChannelTarget(list, 0);
}

absl::StatusOr<std::string> SpreadMetaChannelTarget(absl::string_view list) {
  static const size_t offset = [] {
    std::random_device device;
    return static_cast<size_t>(device());
  }();
  return SpreadMetaChannelTarget(list, offset);
}

absl::StatusOr<std::string> SpreadMetaChannelTarget(absl::string_view list, size_t offset) {
  absl::StatusOr<std::vector<std::string>> entries = SplitMetaAddresses(list);
  if (!entries.ok()) return entries.status();
  if (entries->size() == 1) return entries->front();
  const auto first = static_cast<std::ptrdiff_t>(offset % entries->size());
  std::rotate(entries->begin(), entries->begin() + first, entries->end());
  std::vector<std::string> parts;
  Family family = Family::kIpv4;
  for (size_t i = 0; i < entries->size(); ++i) {
    absl::StatusOr<Entry> entry = ParseNumericEntry(list, (*entries)[i]);
    if (!entry.ok()) return entry.status();
    if (i == 0) {
      family = entry->family;
    } else if (entry->family != family) {
      return BadEntry(list, (*entries)[i], "mixes IPv4 and IPv6 (one channel takes one family)");
    }
    parts.push_back(std::move(entry->text));
  }
  return absl::StrCat(family == Family::kIpv4 ? "ipv4:" : "ipv6:", absl::StrJoin(parts, ","));
}

}  // namespace ckptfs
