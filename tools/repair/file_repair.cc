// See file_repair.h.
#include "tools/repair/file_repair.h"

#include <algorithm>
#include <cerrno>
#include <set>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "client/layout.h"
#include "common/errno_status.h"
#include "common/placement.h"

namespace ckptfs::repair {
namespace {

// At most this many stripe moves (and re-reads after ESTALE) per file.
constexpr int kMaxMoveRounds = 16;

std::string Name(const std::string& path, uint64_t ino) {
  return absl::StrCat("file ", path, " (inode ", ino, ")");
}

std::string ChunkName(const std::string& path, uint64_t ino, uint64_t chunk_index) {
  return absl::StrCat(Name(path, ino), " chunk ", chunk_index);
}

// Equal over the first `length` bytes, each read as zeros past its end.
bool SameWithin(const std::string& a, const std::string& b, size_t length) {
  for (size_t i = 0; i < length; ++i) {
    const char x = i < a.size() ? a[i] : '\0';
    const char y = i < b.size() ? b[i] : '\0';
    if (x != y) return false;
  }
  return true;
}

}  // namespace

FileRepairer::FileRepairer(RepairMeta* meta, client::ChunkTransport* transport,
                           absl::Duration move_after)
    : meta_(meta), transport_(transport), move_after_(move_after) {}

FileRepairer::Copy FileRepairer::ReadCopy(uint32_t server_id, uint64_t ino,
                                          uint64_t chunk_index, uint32_t chunk_size) {
  Copy copy;
  copy.server_id = server_id;
  copy.bytes.resize(chunk_size);
  absl::StatusOr<size_t> n =
      transport_->ReadChunk(server_id, ino, chunk_index, 0, copy.bytes.data(), chunk_size);
  if (n.ok()) {
    copy.bytes.resize(*n);
    copy.state = Copy::State::kGood;
    return copy;
  }
  copy.bytes.clear();
  copy.error = std::string(n.status().message());
  switch (ErrnoFromStatus(n.status())) {
    case ENOENT:
      copy.state = Copy::State::kMissing;
      break;
    case EIO:  // the server's check of the stored CRC32C
      copy.state = Copy::State::kCorrupt;
      break;
    default:
      copy.state = Copy::State::kFailed;
  }
  return copy;
}

FileRepairResult FileRepairer::Repair(const std::string& path, meta::Attr attr,
                                      const std::vector<meta::ServerInfo>& servers,
                                      int64_t now_ms) {
  servers_ = servers;
  FileRepairResult result;
  auto info_of = [&](uint32_t id) -> const meta::ServerInfo* {
    for (const meta::ServerInfo& s : servers_) {
      if (s.id() == id) return &s;
    }
    return nullptr;
  };
  std::set<uint32_t> given_up;  // dead servers this file could not be moved off
  for (int round = 0; round < kMaxMoveRounds; ++round) {
    if (absl::Status s = client::ValidateLayout(attr.layout()); !s.ok()) {
      result.unrepairable = true;
      result.problems.push_back(absl::StrCat(Name(path, attr.ino()), ": ", s.message()));
      return result;
    }
    // The first stripe server dead for long enough.
    uint32_t dead = 0;
    int64_t dead_for_ms = 0;
    bool found = false;
    for (uint32_t id : attr.layout().stripe()) {
      const meta::ServerInfo* info = info_of(id);
      if ((info != nullptr && info->alive()) || given_up.count(id) != 0) continue;
      const int64_t last = info == nullptr ? 0 : info->last_heartbeat_ms();
      const int64_t for_ms = last <= 0 ? INT64_MAX : now_ms - last;
      if (for_ms < absl::ToInt64Milliseconds(move_after_)) continue;
      dead = id;
      dead_for_ms = for_ms;
      found = true;
      break;
    }
    if (!found) break;
    given_up.insert(dead);
    const std::string dead_text =
        dead_for_ms == INT64_MAX
            ? absl::StrCat("storage server ", dead, " (dead, no heartbeat known)")
            : absl::StrCat("storage server ", dead, " (dead for ", dead_for_ms / 1000, " s)");
    if (IsErasureCoded(attr.layout())) {
      // Its fragments differ by design: a lost one is decoded from the
      // others, which this repairer does not do yet.
      result.unrepairable = true;
      result.problems.push_back(absl::StrCat(
          Name(path, attr.ino()), ": ", dead_text,
          " holds fragments of its erasure-coded chunks; ckptfs repair does not rebuild "
          "fragments yet (reads decode them from the others)"));
      continue;
    }
    if (ReplicaCount(attr.layout()) <= 1) {
      result.unrepairable = true;
      result.problems.push_back(absl::StrCat(Name(path, attr.ino()), ": ", dead_text,
                                             " holds the only copy of some of its chunks "
                                             "(replicas 1); nothing to rebuild them from"));
      continue;
    }
    // The live server outside the stripe with the most free bytes.
    const std::set<uint32_t> in_stripe(attr.layout().stripe().begin(),
                                       attr.layout().stripe().end());
    const meta::ServerInfo* spare = nullptr;
    auto free_of = [](const meta::ServerInfo& s) {
      return s.capacity_bytes() > s.used_bytes() ? s.capacity_bytes() - s.used_bytes() : 0;
    };
    for (const meta::ServerInfo& s : servers_) {
      if (!s.alive() || in_stripe.count(s.id()) != 0) continue;
      if (spare == nullptr || free_of(s) > free_of(*spare)) spare = &s;
    }
    if (spare == nullptr) {
      result.unrepairable = true;
      result.problems.push_back(absl::StrCat(
          Name(path, attr.ino()), ": ", dead_text,
          " holds copies of its chunks, and no live server outside its stripe [",
          absl::StrJoin(attr.layout().stripe(), ","), "] can take them"));
      continue;
    }
    switch (MoveOff(path, attr, dead, spare->id(), result)) {
      case MoveOutcome::kMoved:
        break;
      case MoveOutcome::kStale: {
        // Someone moved it first: start over from the service's layout.
        absl::StatusOr<meta::Attr> fresh = meta_->GetAttr(attr.ino());
        if (!fresh.ok()) {
          if (ErrnoFromStatus(fresh.status()) == ENOENT) return result;
          result.unrepairable = true;
          result.problems.push_back(absl::StrCat(Name(path, attr.ino()),
                                                 ": re-reading its layout after a move: ",
                                                 fresh.status().message()));
          return result;
        }
        attr = *std::move(fresh);
        given_up.erase(dead);
        break;
      }
      case MoveOutcome::kFailed:
        result.unrepairable = true;
        break;
    }
  }
  // Erasure-coded fragments are not copies: nothing to compare or copy.
  if (IsErasureCoded(attr.layout()) || ReplicaCount(attr.layout()) < 2) return result;
  const uint64_t chunks = client::ChunkCount(attr.size(), attr.layout().chunk_size());
  for (uint64_t i = 0; i < chunks; ++i) CheckChunk(path, attr, i, result);
  return result;
}

FileRepairer::MoveOutcome FileRepairer::MoveOff(const std::string& path, meta::Attr& attr,
                                                uint32_t dead, uint32_t spare,
                                                FileRepairResult& result) {
  const meta::Layout& layout = attr.layout();
  const uint64_t ino = attr.ino();
  auto alive = [&](uint32_t id) {
    for (const meta::ServerInfo& s : servers_) {
      if (s.id() == id) return s.alive();
    }
    return false;
  };
  auto fail = [&](std::string problem) {
    result.problems.push_back(absl::StrCat(problem, "; its copies stay on dead server ", dead));
    return MoveOutcome::kFailed;
  };
  const uint64_t chunks = client::ChunkCount(attr.size(), layout.chunk_size());
  for (uint64_t i = 0; i < chunks; ++i) {
    const std::vector<uint32_t> holders = ReplicaServers(layout, i);
    if (std::find(holders.begin(), holders.end(), dead) == holders.end()) continue;
    const size_t length = client::ChunkLengthInFile(i, layout.chunk_size(), attr.size());
    std::vector<Copy> good;
    std::vector<std::string> bad;
    for (uint32_t id : holders) {
      if (id == dead || !alive(id)) continue;
      Copy copy = ReadCopy(id, ino, i, layout.chunk_size());
      if (copy.state == Copy::State::kGood) {
        good.push_back(std::move(copy));
      } else if (copy.state != Copy::State::kMissing) {
        bad.push_back(absl::StrCat("server ", id, ": ", copy.error));
      }
    }
    if (good.empty()) {
      if (bad.empty()) continue;  // a hole on every live copy
      return fail(absl::StrCat(ChunkName(path, ino, i), ": no good copy to move from (",
                               absl::StrJoin(bad, "; "), ")"));
    }
    for (const Copy& other : good) {
      if (!SameWithin(good[0].bytes, other.bytes, length)) {
        return fail(absl::StrCat(ChunkName(path, ino, i), ": copies on servers ",
                                 good[0].server_id, " and ", other.server_id,
                                 " differ, so neither is copied"));
      }
    }
    const Copy& source = *std::max_element(
        good.begin(), good.end(),
        [](const Copy& a, const Copy& b) { return a.bytes.size() < b.bytes.size(); });
    absl::Status written = transport_->WriteChunk(spare, ino, i, 0, source.bytes.data(),
                                                  source.bytes.size(), /*replace=*/true);
    if (!written.ok()) {
      return fail(absl::StrCat(ChunkName(path, ino, i), ": writing its copy onto server ",
                               spare, ": ", written.message()));
    }
    ++result.copies_moved;
    result.bytes_written += source.bytes.size();
  }
  absl::StatusOr<meta::Attr> moved = meta_->MoveStripeServer(ino, dead, spare);
  if (moved.ok()) {
    attr = *std::move(moved);
    return MoveOutcome::kMoved;
  }
  if (ErrnoFromStatus(moved.status()) == ESTALE) return MoveOutcome::kStale;
  return fail(absl::StrCat(Name(path, ino), ": moving its stripe from server ", dead,
                           " to server ", spare, ": ", moved.status().message()));
}

void FileRepairer::CheckChunk(const std::string& path, const meta::Attr& attr,
                              uint64_t chunk_index, FileRepairResult& result) {
  const meta::Layout& layout = attr.layout();
  const uint64_t ino = attr.ino();
  std::vector<Copy> copies;
  for (uint32_t id : ReplicaServers(layout, chunk_index)) {
    bool alive = false;
    for (const meta::ServerInfo& s : servers_) alive |= s.id() == id && s.alive();
    if (alive) copies.push_back(ReadCopy(id, ino, chunk_index, layout.chunk_size()));
  }
  if (copies.size() < 2) return;  // nothing to compare while the others are down
  ++result.chunks_checked;
  const std::string name = ChunkName(path, ino, chunk_index);
  const size_t length = client::ChunkLengthInFile(chunk_index, layout.chunk_size(), attr.size());
  std::vector<const Copy*> good;
  std::vector<const Copy*> missing;
  std::vector<const Copy*> corrupt;
  for (const Copy& copy : copies) {
    switch (copy.state) {
      case Copy::State::kGood:
        good.push_back(&copy);
        break;
      case Copy::State::kMissing:
        missing.push_back(&copy);
        break;
      case Copy::State::kCorrupt:
        corrupt.push_back(&copy);
        break;
      case Copy::State::kFailed:
        result.unrepairable = true;
        result.problems.push_back(absl::StrCat(name, ": reading its copy on server ",
                                               copy.server_id, ": ", copy.error));
        break;
    }
  }
  if (good.empty()) {
    if (corrupt.empty()) return;  // a hole (or nothing readable, reported above)
    std::vector<uint32_t> ids;
    for (const Copy* c : corrupt) ids.push_back(c->server_id);
    result.unrepairable = true;
    result.problems.push_back(absl::StrCat(name, ": no good copy; corrupt on server(s) ",
                                           absl::StrJoin(ids, ","),
                                           missing.empty() ? "" : ", missing on the others"));
    return;
  }
  for (const Copy* other : good) {
    if (!SameWithin(good[0]->bytes, other->bytes, length)) {
      result.unrepairable = true;
      result.problems.push_back(absl::StrCat(
          name, ": copies on servers ", good[0]->server_id, " and ", other->server_id,
          " differ (a write that failed on one of them); left as they are"));
      return;
    }
  }
  const Copy* source = *std::max_element(
      good.begin(), good.end(),
      [](const Copy* a, const Copy* b) { return a->bytes.size() < b->bytes.size(); });
  for (const Copy* copy : missing) {
    absl::Status filled = transport_->FillChunk(copy->server_id, ino, chunk_index,
                                                source->bytes.data(), source->bytes.size());
    if (ErrnoFromStatus(filled) == EEXIST) continue;  // a writer stored it meanwhile
    if (!filled.ok()) {
      result.unrepairable = true;
      result.problems.push_back(absl::StrCat(name, ": filling its missing copy on server ",
                                             copy->server_id, ": ", filled.message()));
      continue;
    }
    ++result.copies_rebuilt;
    result.bytes_written += source->bytes.size();
  }
  for (const Copy* copy : corrupt) {
    absl::Status written =
        transport_->WriteChunk(copy->server_id, ino, chunk_index, 0, source->bytes.data(),
                               source->bytes.size(), /*replace=*/true);
    if (!written.ok()) {
      result.unrepairable = true;
      result.problems.push_back(absl::StrCat(name, ": rewriting its corrupt copy on server ",
                                             copy->server_id, ": ", written.message()));
      continue;
    }
    ++result.copies_rebuilt;
    result.bytes_written += source->bytes.size();
  }
}

}  // namespace ckptfs::repair
