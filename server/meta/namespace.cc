// Namespace construction, root bootstrap and layout choice. The operations
// themselves live in server/meta/ops/, one file per operation group.
#include "server/meta/namespace.h"

#include <cerrno>
#include <optional>

#include "absl/numeric/bits.h"
#include "absl/strings/escaping.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "common/errno_status.h"
#include "common/log.h"
#include "server/meta/checkpoint/xattr_rules.h"
#include "server/meta/keys.h"
#include "server/meta/meta_txn.h"
#include "server/meta/ops/ops_util.h"

namespace ckptfs::meta {

absl::Status ValidateChunkSize(uint64_t chunk_size) {
  if (chunk_size < kMinChunkSize || chunk_size > kMaxChunkSize ||
      !absl::has_single_bit(chunk_size)) {
    return ErrnoStatus(EINVAL,
                       absl::StrCat("chunk size ", chunk_size, " is not a power of two between ",
                                    kMinChunkSize, " and ", kMaxChunkSize));
  }
  return absl::OkStatus();
}

absl::Status ValidateReplicas(uint64_t replicas) {
  if (replicas < 1 || replicas > kMaxReplicas) {
    return ErrnoStatus(
        EINVAL, absl::StrCat("replica count ", replicas, " is not between 1 and ", kMaxReplicas));
  }
  return absl::OkStatus();
}

absl::StatusOr<uint32_t> ParseReplicas(absl::string_view value) {
  const std::optional<uint32_t> replicas = ParsePositiveDecimal(value);
  if (!replicas.has_value() || *replicas > kMaxReplicas) {
    return ErrnoStatus(
        EINVAL, absl::StrCat(kReplicasXattr, " must be a decimal number from 1 to ", kMaxReplicas,
                             ", not \"", absl::CHexEscape(value), "\""));
  }
  return *replicas;
}

absl::StatusOr<ErasureCodeSpec> ParseErasureCode(absl::string_view value) {
  absl::string_view text = value;
  if (absl::EndsWith(text, "\n")) text.remove_suffix(1);
  if (text == "none") return ErasureCodeSpec{};
  auto bad = [&] {
    return ErrnoStatus(EINVAL, absl::StrCat(kErasureCodeXattr,
                                            " must be K+M (K data and M "
                                            "parity fragments, K >= 2, M >= 1, K + M <= ",
                                            kMaxErasureFragments, ", e.g. 4+2) or none, not \"",
                                            absl::CHexEscape(value), "\""));
  };
  const size_t plus = text.find('+');
  if (plus == absl::string_view::npos) return bad();
  const std::optional<uint32_t> k = ParsePositiveDecimal(text.substr(0, plus));
  const std::optional<uint32_t> m = ParsePositiveDecimal(text.substr(plus + 1));
  if (!k.has_value() || !m.has_value() || *k < 2 || uint64_t{*k} + *m > kMaxErasureFragments) {
    return bad();
  }
  return ErasureCodeSpec{*k, *m};
}

Namespace::Namespace(KvStore* kv, Membership* membership, Clock* clock, const Options& options)
    : kv_(kv), membership_(membership), clock_(clock), options_(options), inodes_(kv) {}

absl::Status Namespace::Init() {
  return RunTxn(kv_, "create root directory", [&](MetaTxn& txn) -> absl::Status {
    absl::StatusOr<std::optional<std::string>> root = txn.Get(InodeKey(kRootIno));
    if (!root.ok()) return root.status();
    if (root->has_value()) return absl::OkStatus();  // commits only the compare
    InodeRecord inode = NewInode(kRootIno, DIRECTORY, 0755, 0, 0, clock_->NowNs());
    inode.set_parent(kRootIno);
    txn.PutInode(inode);
    CKPTFS_LOG(kInfo) << "created the root directory of a new namespace";
    return txn.AddInodeCount(1);
  });
}

absl::StatusOr<Layout> Namespace::NewLayout(const InodeRecord& parent, uint64_t ino) {
  Layout layout;
  layout.set_chunk_size(options_.default_chunk_size);
  auto xattr = parent.xattrs().find(std::string(kChunkSizeXattr));
  if (xattr != parent.xattrs().end()) {
    uint64_t chunk_size = 0;
    // SetXattr validated it; a bad value can only come from an older
    // version, and then the default is the safe choice.
    if (absl::SimpleAtoi(xattr->second, &chunk_size) && ValidateChunkSize(chunk_size).ok()) {
      layout.set_chunk_size(static_cast<uint32_t>(chunk_size));
    }
  }
  uint32_t replicas = options_.default_replicas;
  const char* replicas_from = "the cluster's --replicas";
  if (auto it = parent.xattrs().find(std::string(kReplicasXattr)); it != parent.xattrs().end()) {
    // As for the chunk size: SetXattr validated it.
    if (absl::StatusOr<uint32_t> parsed = ParseReplicas(it->second); parsed.ok()) {
      replicas = *parsed;
      replicas_from = "the directory's user.ckptfs.replicas";
    }
  }
  ErasureCodeSpec ec = options_.default_ec;
  const char* ec_from = "the cluster's --ec";
  if (auto it = parent.xattrs().find(std::string(kErasureCodeXattr)); it != parent.xattrs().end()) {
    if (absl::StatusOr<ErasureCodeSpec> parsed = ParseErasureCode(it->second); parsed.ok()) {
      ec = *parsed;
      ec_from = "the directory's user.ckptfs.ec";
    }
  }
  layout.set_replicas(ec.enabled() ? 1 : replicas);
  if (ec.enabled()) {
    layout.set_ec_data(ec.k);
    layout.set_ec_parity(ec.m);
  }
  // Read outside the caller's transaction on purpose: the stripe is a
  // placement choice, and a heartbeat landing meanwhile must not abort it.
  absl::StatusOr<std::vector<ServerInfo>> alive = membership_->AliveServers();
  if (!alive.ok()) return alive.status();
  if (alive->empty()) {
    return ErrnoStatus(EIO, "cannot place a new file: no storage servers are alive");
  }
  if (ec.enabled() && alive->size() < ec.k + ec.m) {
    // Each fragment of a chunk needs a server of its own.
    return ErrnoStatus(
        ENOSPC, absl::StrCat("cannot place a new file with erasure code ", ec.k, "+", ec.m, " (",
                             ec_from, "): it needs ", ec.k + ec.m, " storage servers and only ",
                             alive->size(), alive->size() == 1 ? " is" : " are",
                             " alive; start more or check `ckptfs status`"));
  }
  if (!ec.enabled() && alive->size() < replicas) {
    // Each copy of a chunk needs a server of its own; fewer copies than
    // asked for would be a redundancy the user believes in and does not
    // have.
    return ErrnoStatus(ENOSPC, absl::StrCat("cannot place a new file with ", replicas,
                                            " replicas (", replicas_from, "): only ", alive->size(),
                                            " storage server", alive->size() == 1 ? " is" : "s are",
                                            " alive; start more or check `ckptfs status`"));
  }
  // Rotating by the inode number (a counter) spreads first chunks, and so
  // load, evenly over the servers.
  const size_t n = alive->size();
  const size_t first = static_cast<size_t>(ino % n);
  for (size_t i = 0; i < n; ++i) layout.add_stripe((*alive)[(first + i) % n].id());
  return layout;
}

}  // namespace ckptfs::meta
