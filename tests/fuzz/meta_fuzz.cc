// FuzzMetaOps: see fuzz_targets.h.
//
// The input is a sequence of operations, each one byte of kind then its
// fields. Inode ids come from the ones replies named so far (so that
// operations reach real files) or raw from the input (unknown ids); names
// from a small dictionary that the invalid ones are part of, or raw bytes.
// After the sequence the tree is walked: every listed entry looks up to the
// same inode, and without checkpoints (whose pending subdirectories are
// not listed) each directory's nlink is 2 + its subdirectories.
#include <sys/stat.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/time/time.h"
#include "common/entry_name.h"
#include "common/errno_status.h"
#include "common/reserved_xattrs.h"
#include "proto/meta.pb.h"
#include "server/meta/checkpoint/checkpoint_store.h"
#include "server/meta/clock.h"
#include "server/meta/membership.h"
#include "server/meta/memory_kv_store.h"
#include "server/meta/namespace.h"
#include "tests/fuzz/fuzz_input.h"
#include "tests/fuzz/fuzz_targets.h"

namespace ckptfs::fuzz {
namespace {

using namespace ::ckptfs::meta;  // NOLINT: the fuzz function drives all of it

constexpr size_t kMaxSteps = 96;
constexpr uint64_t kRoot = 1;

// CKPTFS_FUZZ_TRACE=1 prints every operation's outcome (to triage a crash).
bool Tracing() {
  static const bool tracing = std::getenv("CKPTFS_FUZZ_TRACE") != nullptr;
  return tracing;
}

void CheckError(const absl::Status& status, absl::string_view op) {
  if (Tracing()) {
    std::fprintf(stderr, "%.*s: %s\n", static_cast<int>(op.size()), op.data(),
                 status.ToString().c_str());
  }
  if (status.ok()) return;
  FUZZ_CHECK(ErrnoFromStatus(status) != 0,
             absl::StrCat(op, " failed without an errno: ", status.ToString()));
  FUZZ_CHECK(!status.message().empty(), absl::StrCat(op, " failed without a message"));
}
template <typename T>
void CheckError(const absl::StatusOr<T>& result, absl::string_view op) {
  CheckError(result.status(), op);
}

class Runner {
 public:
  Runner()
      : membership_(&kv_, &clock_, Membership::Options{}),
        ns_(&kv_, &membership_, &clock_, Namespace::Options{}),
        ckpts_(&kv_, &ns_.inodes(), &clock_, CheckpointStore::Options{}) {
    FUZZ_CHECK(ns_.Init().ok(), "Init");
    RegisterServerRequest server;
    server.set_address("127.0.0.1:1");
    server.set_uuid("fuzz-storage");
    server.set_capacity_bytes(1u << 30);
    FUZZ_CHECK(membership_.Register(server).ok(), "Register");
  }

  void Run(FuzzInput& in) {
    for (size_t step = 0; step < kMaxSteps && !in.empty(); ++step) Step(in);
    Walk();
  }

 private:
  uint64_t Ino(FuzzInput& in) {
    const uint8_t v = in.U8();
    if (v < 200) return inos_[v % inos_.size()];
    if (v < 250) return v - 200;  // small ids, mostly unknown (0 among them)
    return in.U64();
  }

  std::string Name(FuzzInput& in) {
    static const char* const kNames[] = {"a",      "b",      "c",      "run",
                                         "ckpt-1", "ckpt-2", "latest", "shard.pt"};
    const uint8_t v = in.U8();
    switch (v % 16) {
      case 0:
        return "";
      case 1:
        return "/";
      case 2:
        return ".";
      case 3:
        return "..";
      case 4:
        return "a/b";
      case 5:
        return std::string("a\0b", 3);
      case 6:
        return std::string(256, 'n');
      case 7:
        return std::string(255, 'n');
      case 8:
        return in.Bytes();
      default:
        return kNames[(v >> 4) % 8];
    }
  }

  void Learn(const Attr& attr) {
    for (uint64_t ino : inos_) {
      if (ino == attr.ino()) return;
    }
    if (inos_.size() < 64) inos_.push_back(attr.ino());
  }
  void Learn(const absl::StatusOr<Attr>& attr) {
    if (attr.ok()) Learn(*attr);
  }

  void Step(FuzzInput& in) {
    const uint8_t kind = in.U8();
    switch (kind % 30) {
      case 0: {
        auto attr = ns_.Lookup(Ino(in), Name(in));
        CheckError(attr, "Lookup");
        Learn(attr);
        break;
      }
      case 1:
        CheckError(ns_.GetAttr(Ino(in)), "GetAttr");
        break;
      case 2: {
        SetAttrRequest request;
        request.set_ino(Ino(in));
        request.set_valid(in.U8());
        request.set_mode(in.U32());
        request.set_uid(in.U32());
        request.set_gid(in.U32());
        request.set_size(in.Bool() ? in.U64() : in.U32() % 100000);
        request.set_atime_ns(static_cast<int64_t>(in.U64()));
        request.set_mtime_ns(static_cast<int64_t>(in.U64()));
        auto attr = ns_.SetAttr(request);
        CheckError(attr, "SetAttr");
        if (attr.ok()) {
          FUZZ_CHECK((attr->mode() & S_IFMT) != 0, attr->ShortDebugString());
        }
        break;
      }
      case 3: {
        CreateRequest request;
        request.set_parent(Ino(in));
        request.set_name(Name(in));
        request.set_mode(in.U32());
        const uint8_t flags = in.U8();
        request.set_exclusive((flags & 1) != 0);
        request.set_truncate((flags & 2) != 0);
        request.set_writer_handle((flags & 4) != 0 ? in.U64() : 0);
        auto reply = ns_.Create(request);
        CheckError(reply, "Create");
        if (reply.ok()) {
          FUZZ_CHECK(ValidateName(request.name()).ok(),
                     absl::StrCat("Create accepted the name '", request.name(), "'"));
          Learn(reply->attr());
        }
        break;
      }
      case 4: {
        MkdirRequest request;
        request.set_parent(Ino(in));
        request.set_name(Name(in));
        request.set_mode(in.U32());
        auto attr = ns_.Mkdir(request);
        CheckError(attr, "Mkdir");
        if (attr.ok()) {
          FUZZ_CHECK(ValidateName(request.name()).ok(),
                     absl::StrCat("Mkdir accepted the name '", request.name(), "'"));
          FUZZ_CHECK(attr->type() == DIRECTORY, attr->ShortDebugString());
          Learn(*attr);
        }
        break;
      }
      case 5: {
        SymlinkRequest request;
        request.set_parent(Ino(in));
        request.set_name(Name(in));
        switch (in.U8() % 4) {
          case 0:
            request.set_target("");
            break;
          case 1:
            request.set_target(std::string(4096, 't'));
            break;
          case 2:
            request.set_target(std::string("x\0y", 3));
            break;
          default:
            request.set_target(in.Bytes());
            break;
        }
        auto attr = ns_.Symlink(request);
        CheckError(attr, "Symlink");
        if (attr.ok()) {
          FUZZ_CHECK(ValidateName(request.name()).ok(), "Symlink accepted an invalid name");
          const std::string& t = request.target();
          FUZZ_CHECK(
              !t.empty() && t.size() <= kMaxSymlinkTarget && t.find('\0') == std::string::npos,
              "Symlink accepted an invalid target");
          Learn(*attr);
        }
        break;
      }
      case 6:
        CheckError(ns_.ReadLink(Ino(in)), "ReadLink");
        break;
      case 7:
        CheckError(ns_.Unlink(Ino(in), Name(in)), "Unlink");
        break;
      case 8:
        CheckError(ns_.Rmdir(Ino(in), Name(in)), "Rmdir");
        break;
      case 9: {
        RenameRequest request;
        request.set_parent(Ino(in));
        request.set_name(Name(in));
        request.set_new_parent(Ino(in));
        request.set_new_name(Name(in));
        request.set_no_replace(in.Bool());
        absl::Status status = ns_.Rename(request);
        CheckError(status, "Rename");
        if (status.ok()) {
          FUZZ_CHECK(ValidateName(request.new_name()).ok(),
                     absl::StrCat("Rename accepted the new name '", request.new_name(), "'"));
        }
        break;
      }
      case 10: {
        const uint64_t ino = Ino(in);
        const std::string start_after = in.Bool() ? Name(in) : "";
        uint32_t limit = 0;
        switch (in.U8() % 4) {
          case 0:
            limit = 0;
            break;
          case 1:
            limit = in.U32();
            break;
          case 2:
            limit = 0xffffffffu;
            break;
          default:
            limit = in.U8();
            break;
        }
        auto page = ns_.ReadDir(ino, start_after, limit);
        CheckError(page, "ReadDir");
        if (page.ok()) {
          const uint32_t max = ns_.options().readdir_max_limit;
          const size_t entries = static_cast<size_t>(page->entries_size());
          FUZZ_CHECK(entries <= max, "a page over the maximum");
          FUZZ_CHECK(limit == 0 || entries <= limit, "a page over its limit");
          for (const DirEntry& entry : page->entries()) {
            FUZZ_CHECK(ValidateName(entry.name()).ok(), "an invalid name listed");
          }
        }
        break;
      }
      case 11: {
        OpenRequest request;
        request.set_ino(Ino(in));
        request.set_truncate(in.Bool());
        request.set_writer_handle(in.Bool() ? in.U64() : 0);
        CheckError(ns_.Open(request), "Open");
        break;
      }
      case 12: {
        CommitWriteRequest request;
        request.set_ino(Ino(in));
        request.set_size(in.Bool() ? in.U64() : in.U32() % 100000);
        request.set_mtime_ns(static_cast<int64_t>(in.U64()));
        const uint8_t flags = in.U8();
        request.set_durable((flags & 1) != 0);
        request.set_release_writer((flags & 2) != 0 ? in.U64() : 0);
        request.set_failed((flags & 4) != 0);
        CheckError(ns_.CommitWrite(request), "CommitWrite");
        break;
      }
      case 13: {
        SetXattrRequest request;
        request.set_ino(Ino(in));
        switch (in.U8() % 8) {
          case 0:
            request.set_name(kChunkSizeXattr);
            break;
          case 1:
            request.set_name(kRanksXattr);
            break;
          case 6:
            request.set_name(kKeepXattr);
            break;
          case 7:
            request.set_name(kCommitTimeoutXattr);
            break;
          case 2:
            request.set_name(std::string(256, 'x'));
            break;
          case 3:
            request.set_name(std::string("user.a\0b", 8));
            break;
          case 4:
            request.set_name("user.k");
            break;
          default:
            request.set_name(in.Bytes());
            break;
        }
        const uint8_t value = in.U8();
        if ((value & 3) == 0) {
          request.set_value(std::string(kMaxXattrValueSize + (value >> 2) % 2, 'v'));
        } else {
          request.set_value(in.Bytes());
        }
        request.set_create_only(in.Bool());
        request.set_replace_only(in.Bool());
        absl::Status status = ns_.SetXattr(request);
        CheckError(status, "SetXattr");
        if (status.ok()) {
          FUZZ_CHECK(request.value().size() <= kMaxXattrValueSize, "an oversized xattr value");
          FUZZ_CHECK(!request.name().empty() && request.name().size() <= kMaxXattrNameLength &&
                         request.name().find('\0') == std::string::npos,
                     "an invalid xattr name accepted");
        }
        break;
      }
      case 14:
        CheckError(ns_.GetXattr(Ino(in), in.Bool() ? "user.k" : in.Bytes()), "GetXattr");
        break;
      case 15:
        CheckError(ns_.ListXattr(Ino(in)), "ListXattr");
        break;
      case 16:
        CheckError(ns_.RemoveXattr(Ino(in), in.Bool() ? "user.k" : in.Bytes()), "RemoveXattr");
        break;
      case 17:
        CheckError(ns_.StatFs(), "StatFs");
        break;
      case 18: {
        DeclareCheckpointRequest request;
        request.set_ino(Ino(in));
        switch (in.U8() % 4) {
          case 0:
            request.set_ranks(0);
            break;
          case 1:
            request.set_ranks(in.U32());
            break;
          case 2:
            request.set_ranks(kMaxCheckpointRanks + 1);
            break;
          default:
            request.set_ranks(1 + in.U8() % 4);
            break;
        }
        request.set_timeout_s(in.Bool() ? in.U32() : 0);
        auto info = ckpts_.Declare(request);
        CheckError(info, "Declare");
        if (info.ok()) {
          FUZZ_CHECK(request.ranks() >= 1 && request.ranks() <= kMaxCheckpointRanks,
                     absl::StrCat("declared with ", request.ranks(), " ranks"));
          declared_ = true;
        }
        break;
      }
      case 19: {
        const uint64_t ino = Ino(in);
        const uint32_t rank = in.Bool() ? in.U32() : in.U8() % 5;
        auto info = ckpts_.Arrive(ino, rank);
        CheckError(info, "Arrive");
        if (info.ok() && info->state() == CheckpointState::PENDING) {
          FUZZ_CHECK(rank < info->ranks(),
                     absl::StrCat("rank ", rank, " arrived at ", info->ShortDebugString()));
        }
        break;
      }
      case 20:
        CheckError(ckpts_.Get(Ino(in)), "GetCheckpoint");
        break;
      case 21:
        CheckError(ckpts_.List(Ino(in)), "ListCheckpoints");
        break;
      case 22: {
        const uint64_t run_dir = Ino(in);
        CheckError(ckpts_.Remove(run_dir, Name(in)), "RemoveCheckpoint");
        break;
      }
      case 23: {
        // The committer's steps without the storage sync.
        const uint64_t ino = Ino(in);
        auto prepared = ckpts_.PrepareCommit(ino);
        CheckError(prepared, "PrepareCommit");
        if (!prepared.ok() || prepared->info.state() != CheckpointState::PENDING) break;
        if (prepared->abort_errno != 0) {
          CheckError(ckpts_.Abort(ino, prepared->abort_errno, prepared->abort_reason), "Abort");
        } else {
          CheckError(ckpts_.FinishCommit(ino, *prepared), "FinishCommit");
        }
        break;
      }
      case 24: {
        const uint64_t ino = Ino(in);
        const int err = in.Bool() ? EIO : ETIMEDOUT;
        CheckError(ckpts_.Abort(ino, err, "fuzz"), "Abort");
        break;
      }
      case 25:
        CheckError(ckpts_.Retain(Ino(in)), "Retain");
        break;
      case 26:
        clock_.Advance(absl::Seconds(in.U8()));
        break;
      case 28: {
        LinkRequest request;
        request.set_ino(Ino(in));
        request.set_new_parent(Ino(in));
        request.set_new_name(Name(in));
        auto attr = ns_.Link(request);
        CheckError(attr, "Link");
        if (attr.ok()) {
          FUZZ_CHECK(attr->type() != DIRECTORY, "Link gave a directory a second name");
          FUZZ_CHECK(ValidateName(request.new_name()).ok(), "Link accepted an invalid name");
        }
        break;
      }
      case 29: {
        MknodRequest request;
        request.set_parent(Ino(in));
        request.set_name(Name(in));
        request.set_mode(in.U32());
        request.set_rdev(in.U64());
        auto attr = ns_.Mknod(request);
        CheckError(attr, "Mknod");
        if (attr.ok()) {
          FUZZ_CHECK(
              attr->type() != REGULAR && attr->type() != DIRECTORY && attr->type() != SYMLINK,
              "Mknod made a regular file, directory or symlink");
          Learn(*attr);
        }
        break;
      }
      default:
        CheckError(ckpts_.PendingCheckpointOf(Ino(in)), "PendingCheckpointOf");
        break;
    }
  }

  // The tree as a whole after the sequence.
  void Walk() {
    auto root = ns_.GetAttr(kRoot);
    FUZZ_CHECK(root.ok() && root->type() == DIRECTORY, "the root is gone");
    // Every inode a reply named still reads back, or is gone: a record
    // that was stored but cannot be read is damage done by bad input.
    for (uint64_t ino : inos_) {
      auto attr = ns_.GetAttr(ino);
      FUZZ_CHECK(attr.ok() || ErrnoFromStatus(attr.status()) == ENOENT,
                 absl::StrCat("inode ", ino, ": ", attr.status().ToString()));
      auto names = ns_.ListXattr(ino);
      FUZZ_CHECK(names.ok() || ErrnoFromStatus(names.status()) == ENOENT,
                 absl::StrCat("xattrs of inode ", ino, ": ", names.status().ToString()));
    }
    std::vector<uint64_t> dirs = {kRoot};
    std::map<uint64_t, uint32_t> names;  // names found of each non-directory
    size_t seen = 0;
    while (!dirs.empty()) {
      const uint64_t dir = dirs.back();
      dirs.pop_back();
      uint32_t subdirs = 0;
      std::string after;
      for (;;) {
        auto page = ns_.ReadDir(dir, after, 0);
        FUZZ_CHECK(page.ok(), page.status().ToString());
        for (const DirEntry& entry : page->entries()) {
          FUZZ_CHECK(++seen < 100000, "the tree does not end");
          auto attr = ns_.Lookup(dir, entry.name());
          FUZZ_CHECK(attr.ok() && attr->ino() == entry.ino(),
                     absl::StrCat("entry '", entry.name(), "' of ", dir, " does not look up"));
          if (attr->type() == DIRECTORY) {
            ++subdirs;
            dirs.push_back(attr->ino());
          } else {
            ++names[attr->ino()];
          }
          after = entry.name();
        }
        if (!page->more()) break;
      }
      if (!declared_) {
        auto attr = ns_.GetAttr(dir);
        FUZZ_CHECK(attr.ok() && attr->nlink() == 2 + subdirs,
                   absl::StrCat("directory ", dir, " has nlink ", attr->nlink(), " and ", subdirs,
                                " subdirectories"));
      }
    }
    // Without checkpoints every name is listed: a file's nlink counts them.
    for (const auto& [ino, count] : names) {
      if (declared_) break;
      auto attr = ns_.GetAttr(ino);
      FUZZ_CHECK(attr.ok() && attr->nlink() == count,
                 absl::StrCat("inode ", ino, " has nlink ", attr.ok() ? attr->nlink() : 0, " and ",
                              count, " names"));
    }
  }

  MemoryKvStore kv_;
  ManualClock clock_;
  Membership membership_;
  Namespace ns_;
  CheckpointStore ckpts_;
  std::vector<uint64_t> inos_ = {kRoot};
  bool declared_ = false;  // a checkpoint exists: pending subdirectories are not listed
};

}  // namespace

void FuzzMetaOps(const uint8_t* data, size_t size) {
  FuzzInput in(data, size);
  Runner runner;
  runner.Run(in);
}

}  // namespace ckptfs::fuzz
