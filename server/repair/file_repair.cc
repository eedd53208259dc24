// See file_repair.h.
#include "server/repair/file_repair.h"

#include <algorithm>
#include <cerrno>
#include <optional>
#include <set>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "client/fragment_io.h"
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

// A version of an erasure-coded chunk whose fragments may be rewritten from
// the others: at least this long since the file's last write (its mtime).
// A write stores all k+m fragments anew, one request each, so while one is
// in flight some fragments hold the new write id and the others the old
// one; the group that decodes may then be the OLD version, and rewriting
// the fragments that "hold another version" would destroy the writer's new
// bytes (with 4+2, three new and three old fragments rewritten to old leave
// fewer than k of either once the write ends). The service's mtime moves
// when a file is created or truncated and at each writer's commit (flush,
// fsync, close), so a fragment of another version in a file written within
// this window is left alone (a later pass looks again); after it, the other
// version is most likely a write that failed part way (its writer was told)
// and the fragments that decode win. The gap: a writer that keeps the file
// open and writes for longer than this without a commit is not seen by the
// mtime (the service does not tell the repairer which files have writers
// registered), so the chunk is read a second time just before such a
// rewrite and left if anything changed (CheckFragments).
constexpr int64_t kQuietBeforeRewriteMs = 60'000;

// Reads and writes through `base`, except that a server not in `live` fails
// at once (EHOSTDOWN) instead of costing a connect or a timeout per chunk:
// fragment_io reads every fragment of a chunk, and a dead server's fragment
// is then just one that failed.
class LiveServersOnly : public client::ChunkTransport {
 public:
  LiveServersOnly(client::ChunkTransport& base, const std::vector<meta::ServerInfo>& servers)
      : base_(base) {
    for (const meta::ServerInfo& s : servers) {
      if (s.alive()) live_.insert(s.id());
    }
  }
  bool IsLive(uint32_t id) const { return live_.count(id) != 0; }

  using ChunkTransport::WriteChunk;
  absl::Status WriteChunk(uint32_t server_id, uint64_t ino, uint64_t chunk_index, uint32_t offset,
                          const void* data, size_t length, bool replace,
                          std::optional<uint32_t> crc32c) override {
    if (!IsLive(server_id)) return Dead(server_id);
    return base_.WriteChunk(server_id, ino, chunk_index, offset, data, length, replace, crc32c);
  }
  absl::Status FillChunk(uint32_t server_id, uint64_t ino, uint64_t chunk_index, const void* data,
                         size_t length) override {
    if (!IsLive(server_id)) return Dead(server_id);
    return base_.FillChunk(server_id, ino, chunk_index, data, length);
  }
  absl::StatusOr<size_t> ReadChunk(uint32_t server_id, uint64_t ino, uint64_t chunk_index,
                                   uint32_t offset, void* buf, size_t length) override {
    if (!IsLive(server_id)) return Dead(server_id);
    return base_.ReadChunk(server_id, ino, chunk_index, offset, buf, length);
  }
  absl::Status TrimChunks(uint32_t server_id, uint64_t ino, uint64_t trim_size,
                          uint32_t chunk_size) override {
    if (!IsLive(server_id)) return Dead(server_id);
    return base_.TrimChunks(server_id, ino, trim_size, chunk_size);
  }
  absl::Status SyncChunks(uint32_t server_id, uint64_t ino) override {
    if (!IsLive(server_id)) return Dead(server_id);
    return base_.SyncChunks(server_id, ino);
  }

 private:
  static absl::Status Dead(uint32_t id) {
    return ErrnoStatus(EHOSTDOWN, absl::StrCat("storage server ", id, " is down"));
  }

  client::ChunkTransport& base_;
  std::set<uint32_t> live_;
};

// What a fragment's server holds at the start of it: its header.
struct StoredHeader {
  absl::Status read;   // the READ's failure (ENOENT: no chunk file)
  bool valid = false;  // the magic is right
  uint32_t length = 0;
  uint64_t write_id = 0;
};

StoredHeader ReadStoredHeader(client::ChunkTransport& transport, uint32_t server_id, uint64_t ino,
                              uint64_t chunk_index) {
  StoredHeader header;
  unsigned char buf[client::kFragmentHeaderSize] = {};
  absl::StatusOr<size_t> n = transport.ReadChunk(server_id, ino, chunk_index, 0, buf, sizeof buf);
  if (!n.ok()) {
    header.read = n.status();
    return header;
  }
  if (*n < sizeof buf) return header;
  auto le = [&](int at, int bytes) {
    uint64_t v = 0;
    for (int b = bytes - 1; b >= 0; --b) v = (v << 8) | buf[at + b];
    return v;
  };
  header.valid = le(0, 4) == client::kFragmentMagic;
  header.length = static_cast<uint32_t>(le(4, 4));
  header.write_id = le(8, 8);
  return header;
}

// True when no live fragment server of the chunk has a chunk file for it
// (a hole, as far as the live servers tell).
bool MissingOnEveryLiveServer(LiveServersOnly& transport, const meta::Layout& layout, uint64_t ino,
                              uint64_t chunk_index) {
  for (uint32_t id : ReplicaServers(layout, chunk_index)) {
    if (!transport.IsLive(id)) continue;
    if (ErrnoFromStatus(ReadStoredHeader(transport, id, ino, chunk_index).read) != ENOENT) {
      return false;
    }
  }
  return true;
}

// Whether chunk `chunk_index` still decodes to the version `seen` (same
// write id and length, every fragment good then still good; fragments this
// pass restored meanwhile may have joined) with fragment `r` still not part
// of it: read again just before a fragment of another version is rewritten.
bool StillTheSame(LiveServersOnly& transport, const meta::Layout& layout, uint64_t ino,
                  uint64_t chunk_index, const client::DecodedChunk& seen, int r) {
  absl::StatusOr<client::DecodedChunk> again = client::ReadWholeChunkFragments(
      transport, nullptr, layout, ino, chunk_index, /*check_all=*/true);
  if (!again.ok() || again->write_id != seen.write_id || again->length != seen.length ||
      again->fragment_good[static_cast<size_t>(r)]) {
    return false;
  }
  for (size_t j = 0; j < seen.fragment_good.size(); ++j) {
    if (seen.fragment_good[j] && !again->fragment_good[j]) return false;
  }
  return true;
}

}  // namespace

FileRepairer::FileRepairer(RepairMeta* meta, client::ChunkTransport* transport,
                           absl::Duration move_after)
    : meta_(meta), transport_(transport), move_after_(move_after) {}

FileRepairer::Copy FileRepairer::ReadCopy(uint32_t server_id, uint64_t ino, uint64_t chunk_index,
                                          uint32_t chunk_size) {
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
  rebuilt_.clear();
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
    if (!IsErasureCoded(attr.layout()) && ReplicaCount(attr.layout()) <= 1) {
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
          IsErasureCoded(attr.layout()) ? " holds fragments of its erasure-coded chunks"
                                        : " holds copies of its chunks",
          ", and no live server outside its stripe [", absl::StrJoin(attr.layout().stripe(), ","),
          "] can take them"));
      continue;
    }
    // The spare is outside the stripe, so nothing it holds of this inode is
    // the file's: chunks from an earlier time in the stripe (a server that
    // was moved off and came back) would otherwise outlive the move in the
    // holes and past the end, and be served as the file's bytes.
    if (absl::Status cleared =
            transport_->TrimChunks(spare->id(), attr.ino(), 0, attr.layout().chunk_size());
        !cleared.ok()) {
      result.unrepairable = true;
      result.problems.push_back(absl::StrCat(Name(path, attr.ino()), ": clearing spare server ",
                                             spare->id(), " before the move: ", cleared.message()));
      continue;
    }
    const MoveOutcome outcome = IsErasureCoded(attr.layout())
                                    ? MoveFragmentsOff(path, attr, dead, spare->id(), result)
                                    : MoveOff(path, attr, dead, spare->id(), result);
    switch (outcome) {
      case MoveOutcome::kMoved:
        break;
      case MoveOutcome::kStale: {
        // Someone moved it first: start over from the service's layout.
        absl::StatusOr<meta::Attr> fresh = meta_->GetAttr(attr.ino());
        if (!fresh.ok()) {
          if (ErrnoFromStatus(fresh.status()) == ENOENT) return result;
          result.unrepairable = true;
          result.problems.push_back(
              absl::StrCat(Name(path, attr.ino()),
                           ": re-reading its layout after a move: ", fresh.status().message()));
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
  const uint64_t chunks = client::ChunkCount(attr.size(), attr.layout().chunk_size());
  if (IsErasureCoded(attr.layout())) {
    for (uint64_t i = 0; i < chunks; ++i) CheckFragments(path, attr, i, now_ms, result);
  } else if (ReplicaCount(attr.layout()) >= 2) {
    for (uint64_t i = 0; i < chunks; ++i) CheckChunk(path, attr, i, result);
  }
  SyncRebuilt(path, attr.ino(), result);
  return result;
}

void FileRepairer::Rebuilt(uint32_t server_id, size_t bytes) {
  Unsynced& unsynced = rebuilt_[server_id];
  ++unsynced.copies;
  unsynced.bytes += bytes;
}

void FileRepairer::SyncRebuilt(const std::string& path, uint64_t ino, FileRepairResult& result) {
  for (const auto& [server_id, unsynced] : rebuilt_) {
    if (absl::Status synced = transport_->SyncChunks(server_id, ino); !synced.ok()) {
      result.unrepairable = true;
      result.problems.push_back(absl::StrCat(Name(path, ino), ": ", unsynced.copies,
                                             " copies written again on server ", server_id,
                                             " could not be made durable there (", synced.message(),
                                             "); the next pass checks them again"));
      continue;
    }
    result.copies_rebuilt += unsynced.copies;
    result.bytes_written += unsynced.bytes;
  }
  rebuilt_.clear();
}

template <typename Fail>
FileRepairer::MoveOutcome FileRepairer::FinishMove(const std::string& path, meta::Attr& attr,
                                                   uint32_t dead, uint32_t spare, Fail& fail) {
  // What the spare now holds of the file (and no longer holds: the clearing
  // trim) must survive a power loss there before the stripe names it.
  if (absl::Status synced = transport_->SyncChunks(spare, attr.ino()); !synced.ok()) {
    return fail(absl::StrCat(Name(path, attr.ino()), ": syncing its copies on server ", spare,
                             " before moving its stripe there: ", synced.message()));
  }
  absl::StatusOr<meta::Attr> moved = meta_->MoveStripeServer(attr.ino(), dead, spare);
  if (moved.ok()) {
    attr = *std::move(moved);
    return MoveOutcome::kMoved;
  }
  if (ErrnoFromStatus(moved.status()) == ESTALE) return MoveOutcome::kStale;
  return fail(absl::StrCat(Name(path, attr.ino()), ": moving its stripe from server ", dead,
                           " to server ", spare, ": ", moved.status().message()));
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
  uint64_t moved = 0;  // counted once the spare synced them
  uint64_t bytes = 0;
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
        return fail(absl::StrCat(ChunkName(path, ino, i), ": copies on servers ", good[0].server_id,
                                 " and ", other.server_id, " differ, so neither is copied"));
      }
    }
    const Copy& source = *std::max_element(
        good.begin(), good.end(),
        [](const Copy& a, const Copy& b) { return a.bytes.size() < b.bytes.size(); });
    absl::Status written = transport_->WriteChunk(spare, ino, i, 0, source.bytes.data(),
                                                  source.bytes.size(), /*replace=*/true);
    if (!written.ok()) {
      return fail(absl::StrCat(ChunkName(path, ino, i), ": writing its copy onto server ", spare,
                               ": ", written.message()));
    }
    ++moved;
    bytes += source.bytes.size();
  }
  const MoveOutcome outcome = FinishMove(path, attr, dead, spare, fail);
  if (outcome != MoveOutcome::kFailed) {
    result.copies_moved += moved;
    result.bytes_written += bytes;
  }
  return outcome;
}

void FileRepairer::CheckChunk(const std::string& path, const meta::Attr& attr, uint64_t chunk_index,
                              FileRepairResult& result) {
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
        result.problems.push_back(
            absl::StrCat(name, ": reading its copy on server ", copy.server_id, ": ", copy.error));
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
      result.problems.push_back(
          absl::StrCat(name, ": copies on servers ", good[0]->server_id, " and ", other->server_id,
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
    Rebuilt(copy->server_id, source->bytes.size());
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
    Rebuilt(copy->server_id, source->bytes.size());
  }
}

FileRepairer::MoveOutcome FileRepairer::MoveFragmentsOff(const std::string& path, meta::Attr& attr,
                                                         uint32_t dead, uint32_t spare,
                                                         FileRepairResult& result) {
  const meta::Layout& layout = attr.layout();
  const uint64_t ino = attr.ino();
  LiveServersOnly live(*transport_, servers_);
  auto fail = [&](std::string problem) {
    result.problems.push_back(absl::StrCat(problem, "; its fragments stay on dead server ", dead));
    return MoveOutcome::kFailed;
  };
  const uint64_t chunks = client::ChunkCount(attr.size(), layout.chunk_size());
  uint64_t moved = 0;  // counted once the spare synced them
  uint64_t bytes = 0;
  for (uint64_t i = 0; i < chunks; ++i) {
    const std::vector<uint32_t> holders = ReplicaServers(layout, i);
    const auto at = std::find(holders.begin(), holders.end(), dead);
    if (at == holders.end()) continue;
    const int r = static_cast<int>(at - holders.begin());
    // The dead server's read fails at once; the others decode.
    absl::StatusOr<client::DecodedChunk> chunk =
        client::ReadWholeChunkFragments(live, nullptr, layout, ino, i, /*check_all=*/false);
    if (!chunk.ok()) {
      if (ErrnoFromStatus(chunk.status()) == ENOENT ||
          MissingOnEveryLiveServer(live, layout, ino, i)) {
        continue;  // a hole
      }
      return fail(absl::StrCat(ChunkName(path, ino, i), ": cannot decode its fragment ", r + 1,
                               " (", chunk.status().message(), ")"));
    }
    const std::vector<char> fragment = client::EncodeFragment(layout, *chunk, r);
    absl::Status written = transport_->WriteChunk(spare, ino, i, 0, fragment.data(),
                                                  fragment.size(), /*replace=*/true);
    if (!written.ok()) {
      return fail(absl::StrCat(ChunkName(path, ino, i), ": writing its fragment ", r + 1,
                               " onto server ", spare, ": ", written.message()));
    }
    ++moved;
    bytes += fragment.size();
  }
  const MoveOutcome outcome = FinishMove(path, attr, dead, spare, fail);
  if (outcome != MoveOutcome::kFailed) {
    result.copies_moved += moved;
    result.bytes_written += bytes;
  }
  return outcome;
}

void FileRepairer::CheckFragments(const std::string& path, const meta::Attr& attr,
                                  uint64_t chunk_index, int64_t now_ms, FileRepairResult& result) {
  const meta::Layout& layout = attr.layout();
  const uint64_t ino = attr.ino();
  const std::string name = ChunkName(path, ino, chunk_index);
  LiveServersOnly live(*transport_, servers_);
  absl::StatusOr<client::DecodedChunk> chunk =
      client::ReadWholeChunkFragments(live, nullptr, layout, ino, chunk_index, /*check_all=*/true);
  if (!chunk.ok()) {
    if (ErrnoFromStatus(chunk.status()) == ENOENT ||
        MissingOnEveryLiveServer(live, layout, ino, chunk_index)) {
      return;  // a hole
    }
    ++result.chunks_checked;
    result.unrepairable = true;
    result.problems.push_back(absl::StrCat(name, ": cannot be decoded, so no fragment is rebuilt (",
                                           chunk.status().message(), ")"));
    return;
  }
  ++result.chunks_checked;
  const std::vector<uint32_t> servers = ReplicaServers(layout, chunk_index);
  const int64_t written_ms_ago = now_ms - attr.mtime_ns() / 1'000'000;
  for (int r = 0; r < static_cast<int>(servers.size()); ++r) {
    const size_t i = static_cast<size_t>(r);
    const uint32_t id = servers[i];
    if (chunk->fragment_good[i] || !live.IsLive(id)) continue;
    const absl::Status& why = chunk->fragment_status[i];
    const std::string which = absl::StrCat(name, ": fragment ", r + 1, " on server ", id);
    const int err = ErrnoFromStatus(why);
    if (err == ENOENT) {
      const std::vector<char> fragment = client::EncodeFragment(layout, *chunk, r);
      absl::Status filled =
          transport_->FillChunk(id, ino, chunk_index, fragment.data(), fragment.size());
      if (ErrnoFromStatus(filled) == EEXIST) continue;  // a writer stored it meanwhile
      if (!filled.ok()) {
        result.unrepairable = true;
        result.problems.push_back(
            absl::StrCat(which, " is missing; filling it: ", filled.message()));
        continue;
      }
      Rebuilt(id, fragment.size());
      continue;
    }
    if (err != EIO) {  // the server answered with something else, or not at all
      result.unrepairable = true;
      result.problems.push_back(absl::StrCat(which, ": ", why.message()));
      continue;
    }
    // EIO: the server's CRC32C check, a bad header, bytes that differ from
    // what the version encodes to (all corrupt), or another version.
    const StoredHeader header = ReadStoredHeader(*transport_, id, ino, chunk_index);
    const bool other_version =
        header.read.ok() && header.valid &&
        (header.write_id != chunk->write_id || header.length != chunk->length);
    if (other_version && written_ms_ago < kQuietBeforeRewriteMs) {
      // See kQuietBeforeRewriteMs: maybe a write in flight.
      result.problems.push_back(
          absl::StrCat(which,
                       " holds another version of the chunk; the file is being written (last "
                       "written ",
                       std::max<int64_t>(0, written_ms_ago) / 1000, " s ago), so it is left"));
      continue;
    }
    if (other_version && !StillTheSame(live, layout, ino, chunk_index, *chunk, r)) {
      // See kQuietBeforeRewriteMs: the chunk changed between two reads.
      result.problems.push_back(
          absl::StrCat(which,
                       " holds another version of the chunk, and the chunk changed while it was "
                       "checked: it is being written, so it is left"));
      continue;
    }
    const std::vector<char> fragment = client::EncodeFragment(layout, *chunk, r);
    absl::Status written = transport_->WriteChunk(id, ino, chunk_index, 0, fragment.data(),
                                                  fragment.size(), /*replace=*/true);
    if (!written.ok()) {
      result.unrepairable = true;
      result.problems.push_back(
          absl::StrCat(which, other_version ? " holds another version" : " is corrupt",
                       "; rewriting it: ", written.message()));
      continue;
    }
    Rebuilt(id, fragment.size());
  }
}

}  // namespace ckptfs::repair
