// ckptfs-fuse-floor: a FUSE filesystem that keeps a namespace in memory and
// throws every written byte away — the "FUSE discard floor":
// what a save storm costs when the FUSE hop is all there is.
//
// It mounts with the settings ckptfs-fuse uses by default (max_write 1 MiB,
// direct_io for write-only opens, async direct I/O, parallel dirops,
// max_background 64, the multi-threaded loop with clone_fd, 16 idle and at
// most 512 workers, attribute and entry timeouts 0), so
//
//   ckptfs-bench --dir FLOOR/x --baseline PLAIN/x --phases save
//       --target-procs $(pidof ckptfs-fuse-floor)
//
// shows the most any FUSE filesystem can save on this machine and the CPU
// that the hop alone takes. With --copy each write's payload is also copied
// once into a reused buffer of the worker thread (ckptfs-fuse's one user
// space copy into its chunk buffer), separating the kernel's share from the
// daemon's.
//
// Semantics: directories, regular files and their sizes behave as in any
// file system (create, O_TRUNC, truncate, rename replacing its target,
// unlink, rmdir of empty directories, readdir); file contents are not kept:
// reads return zeros up to the file's size. Nothing is persisted. Runs in
// the foreground until SIGTERM/SIGINT or `fusermount3 -u`; exits 0 then.
#include <fcntl.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#define FUSE_USE_VERSION 314
#include <fuse_lowlevel.h>

#include "absl/base/thread_annotations.h"
#include "absl/container/btree_map.h"
#include "absl/container/node_hash_map.h"
#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/flags/usage.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"

ABSL_FLAG(std::string, mountpoint, "", "directory to mount on (required)");
ABSL_FLAG(bool, copy, false,
          "copy each write's payload once into a reused per-thread buffer, as ckptfs-fuse "
          "copies it into its chunk buffer");
ABSL_FLAG(int, threads, 16, "FUSE worker threads kept when idle (as ckptfs-fuse)");
ABSL_FLAG(int, max_threads, 512, "most FUSE worker threads at once (as ckptfs-fuse)");
ABSL_FLAG(int, max_background, 64, "FUSE max_background (as ckptfs-fuse)");

namespace {

constexpr uint32_t kMaxWrite = 1u << 20;  // ckptfs-fuse's max_write

// One file or directory. Contents are not kept, only the size.
struct Node {
  mode_t mode = 0;
  uid_t uid = 0;
  gid_t gid = 0;
  uint64_t size = 0;
  uint32_t nlink = 1;
  uint64_t lookups = 0;  // the kernel's references (lookup/create minus forget)
  struct timespec mtime = {};
  absl::btree_map<std::string, fuse_ino_t> children;  // directories
};

// The namespace: every node by inode number, under one mutex. A node stays
// while it has a name or the kernel still holds a reference to it; nodes
// never move (node_hash_map), so a Node* stays valid across insertions.
class Tree {
 public:
  Tree() {
    Node root;
    root.mode = S_IFDIR | 0755;
    root.nlink = 2;
    root.lookups = 1;  // the kernel's root reference, never forgotten
    clock_gettime(CLOCK_REALTIME, &root.mtime);
    nodes_.emplace(FUSE_ROOT_ID, std::move(root));
  }

  // Fills `e` for child `name` of `parent` and counts the kernel's new
  // reference. ENOENT / ENOTDIR as stat would say.
  int Lookup(fuse_ino_t parent, const char* name, struct fuse_entry_param* e) {
    absl::MutexLock lock(&mu_);
    Node* dir = Find(parent);
    if (dir == nullptr) return ENOENT;
    if (!S_ISDIR(dir->mode)) return ENOTDIR;
    auto it = dir->children.find(name);
    if (it == dir->children.end()) return ENOENT;
    FillEntry(it->second, e);
    return 0;
  }

  // Creates `name` in `parent` with `mode` (S_IFDIR or S_IFREG) for the
  // caller; fills `e`. EEXIST, ENOENT, ENOTDIR, ENAMETOOLONG.
  int Make(fuse_ino_t parent, const char* name, mode_t mode, const fuse_ctx* ctx,
           struct fuse_entry_param* e) {
    if (std::strlen(name) > 255) return ENAMETOOLONG;
    absl::MutexLock lock(&mu_);
    Node* dir = Find(parent);
    if (dir == nullptr) return ENOENT;
    if (!S_ISDIR(dir->mode)) return ENOTDIR;
    if (dir->children.contains(name)) return EEXIST;
    const fuse_ino_t ino = next_ino_++;
    Node node;
    node.mode = mode & ~ctx->umask;
    node.uid = ctx->uid;
    node.gid = ctx->gid;
    node.nlink = S_ISDIR(mode) ? 2 : 1;
    clock_gettime(CLOCK_REALTIME, &node.mtime);
    if (S_ISDIR(mode)) ++dir->nlink;
    dir->children.emplace(name, ino);
    nodes_.emplace(ino, std::move(node));
    FillEntry(ino, e);
    return 0;
  }

  // Removes `name` from `parent`; `dir` says whether it must be a directory
  // (rmdir, which also needs it empty) or must not be (unlink).
  int Remove(fuse_ino_t parent, const char* name, bool dir) {
    absl::MutexLock lock(&mu_);
    Node* p = Find(parent);
    if (p == nullptr) return ENOENT;
    auto it = p->children.find(name);
    if (it == p->children.end()) return ENOENT;
    Node* victim = Find(it->second);
    if (dir && !S_ISDIR(victim->mode)) return ENOTDIR;
    if (!dir && S_ISDIR(victim->mode)) return EISDIR;
    if (dir && !victim->children.empty()) return ENOTEMPTY;
    Unlink(*p, it->second, *victim);
    p->children.erase(it);
    return 0;
  }

  // rename(2) without flags: replaces a target of the same kind (an empty
  // directory only). RENAME_NOREPLACE is honoured; RENAME_EXCHANGE is not
  // offered (EINVAL).
  int Rename(fuse_ino_t parent, const char* name, fuse_ino_t newparent, const char* newname,
             unsigned flags) {
    if ((flags & ~RENAME_NOREPLACE) != 0) return EINVAL;
    if (std::strlen(newname) > 255) return ENAMETOOLONG;
    absl::MutexLock lock(&mu_);
    Node* from = Find(parent);
    Node* to = Find(newparent);
    if (from == nullptr || to == nullptr) return ENOENT;
    if (!S_ISDIR(to->mode)) return ENOTDIR;
    auto src = from->children.find(name);
    if (src == from->children.end()) return ENOENT;
    const fuse_ino_t ino = src->second;
    Node* moved = Find(ino);
    // A directory into itself or below it.
    if (S_ISDIR(moved->mode)) {
      for (fuse_ino_t at = newparent; at != FUSE_ROOT_ID; at = ParentOf(at)) {
        if (at == ino) return EINVAL;
      }
    }
    auto dst = to->children.find(newname);
    if (dst != to->children.end()) {
      if (dst->second == ino) return 0;
      if (flags & RENAME_NOREPLACE) return EEXIST;
      Node* old = Find(dst->second);
      if (S_ISDIR(moved->mode) != S_ISDIR(old->mode)) {
        return S_ISDIR(old->mode) ? EISDIR : ENOTDIR;
      }
      if (!old->children.empty()) return ENOTEMPTY;
      Unlink(*to, dst->second, *old);
      to->children.erase(dst);
    }
    // By key: erasing from a btree_map invalidates its iterators, and the
    // target's erase above may have been in the same directory.
    from->children.erase(std::string(name));
    to->children.emplace(newname, ino);
    if (S_ISDIR(moved->mode) && from != to) {
      --from->nlink;
      ++to->nlink;
    }
    return 0;
  }

  // Drops `n` of the kernel's references to `ino`.
  void Forget(fuse_ino_t ino, uint64_t n) {
    absl::MutexLock lock(&mu_);
    Node* node = Find(ino);
    if (node == nullptr) return;
    node->lookups -= std::min(n, node->lookups);
    MaybeErase(ino, *node);
  }

  int GetAttr(fuse_ino_t ino, struct stat* st) {
    absl::MutexLock lock(&mu_);
    Node* node = Find(ino);
    if (node == nullptr) return ENOENT;
    FillStat(ino, *node, st);
    return 0;
  }

  // setattr: size, mode, owner and times as `to_set` says; fills `st`.
  int SetAttr(fuse_ino_t ino, const struct stat& attr, int to_set, struct stat* st) {
    absl::MutexLock lock(&mu_);
    Node* node = Find(ino);
    if (node == nullptr) return ENOENT;
    if (to_set & FUSE_SET_ATTR_SIZE) {
      if (S_ISDIR(node->mode)) return EISDIR;
      node->size = static_cast<uint64_t>(attr.st_size);
    }
    if (to_set & FUSE_SET_ATTR_MODE) node->mode = (node->mode & S_IFMT) | (attr.st_mode & 07777);
    if (to_set & FUSE_SET_ATTR_UID) node->uid = attr.st_uid;
    if (to_set & FUSE_SET_ATTR_GID) node->gid = attr.st_gid;
    if (to_set & (FUSE_SET_ATTR_MTIME | FUSE_SET_ATTR_MTIME_NOW | FUSE_SET_ATTR_SIZE)) {
      clock_gettime(CLOCK_REALTIME, &node->mtime);
    }
    FillStat(ino, *node, st);
    return 0;
  }

  // Cuts a regular file to zero (open with O_TRUNC).
  int Truncate(fuse_ino_t ino) {
    absl::MutexLock lock(&mu_);
    Node* node = Find(ino);
    if (node == nullptr) return ENOENT;
    node->size = 0;
    return 0;
  }

  // A write of `n` bytes at `offset` took place: grows the size.
  void Wrote(fuse_ino_t ino, uint64_t offset, size_t n) {
    absl::MutexLock lock(&mu_);
    Node* node = Find(ino);
    if (node != nullptr) node->size = std::max(node->size, offset + n);
  }

  // Bytes a read of `size` at `offset` returns.
  size_t Readable(fuse_ino_t ino, uint64_t offset, size_t size) {
    absl::MutexLock lock(&mu_);
    Node* node = Find(ino);
    if (node == nullptr || offset >= node->size) return 0;
    return static_cast<size_t>(std::min<uint64_t>(size, node->size - offset));
  }

  // The entries of directory `ino` ("." and ".." first), or ENOTDIR/ENOENT.
  int List(fuse_ino_t ino, std::vector<std::pair<std::string, struct stat>>* out) {
    absl::MutexLock lock(&mu_);
    Node* dir = Find(ino);
    if (dir == nullptr) return ENOENT;
    if (!S_ISDIR(dir->mode)) return ENOTDIR;
    struct stat st = {};
    st.st_mode = S_IFDIR;
    st.st_ino = ino;
    out->emplace_back(".", st);
    st.st_ino = ParentOf(ino);
    out->emplace_back("..", st);
    for (const auto& [name, child] : dir->children) {
      st = {};
      st.st_ino = child;
      st.st_mode = Find(child)->mode;
      out->emplace_back(name, st);
    }
    return 0;
  }

 private:
  Node* Find(fuse_ino_t ino) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    auto it = nodes_.find(ino);
    return it == nodes_.end() ? nullptr : &it->second;
  }

  // The directory naming `ino` (the root for the root and for nodes without
  // a name). Linear in the tree's size; used only by rename and readdir's "..".
  fuse_ino_t ParentOf(fuse_ino_t ino) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    for (const auto& [candidate, node] : nodes_) {
      for (const auto& child : node.children) {
        if (child.second == ino) return candidate;
      }
    }
    return FUSE_ROOT_ID;
  }

  void Unlink(Node& parent, fuse_ino_t ino, Node& victim) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    if (S_ISDIR(victim.mode)) {
      --parent.nlink;
      victim.nlink = 0;
    } else {
      --victim.nlink;
    }
    MaybeErase(ino, victim);
  }

  void MaybeErase(fuse_ino_t ino, const Node& node) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    if (node.nlink == 0 && node.lookups == 0 && ino != FUSE_ROOT_ID) nodes_.erase(ino);
  }

  static void FillStat(fuse_ino_t ino, const Node& node, struct stat* st) {
    *st = {};
    st->st_ino = ino;
    st->st_mode = node.mode;
    st->st_nlink = node.nlink;
    st->st_uid = node.uid;
    st->st_gid = node.gid;
    st->st_size = static_cast<off_t>(node.size);
    st->st_blksize = kMaxWrite;
    st->st_blocks = static_cast<blkcnt_t>((node.size + 511) / 512);
    st->st_mtim = st->st_ctim = st->st_atim = node.mtime;
  }

  void FillEntry(fuse_ino_t ino, struct fuse_entry_param* e) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    Node* node = Find(ino);
    ++node->lookups;
    *e = {};
    e->ino = ino;
    e->generation = 1;
    FillStat(ino, *node, &e->attr);
    // Timeouts 0, as ckptfs-fuse: every open looks the name up again.
  }

  absl::Mutex mu_;
  absl::node_hash_map<fuse_ino_t, Node> nodes_ ABSL_GUARDED_BY(mu_);
  fuse_ino_t next_ino_ ABSL_GUARDED_BY(mu_) = FUSE_ROOT_ID + 1;
};

Tree& TreeOf(fuse_req_t req) { return *static_cast<Tree*>(fuse_req_userdata(req)); }

bool copy_payload = false;  // --copy; set before the session starts

// --- requests -----------------------------------------------------------------

void Init(void*, struct fuse_conn_info* conn) {
  conn->max_write = std::min(conn->max_write, kMaxWrite);
  auto want_if_offered = [conn](unsigned cap) {
    if (conn->capable & cap) conn->want |= cap;
  };
  want_if_offered(FUSE_CAP_ASYNC_READ);
  want_if_offered(FUSE_CAP_ATOMIC_O_TRUNC);
  want_if_offered(FUSE_CAP_PARALLEL_DIROPS);
  want_if_offered(FUSE_CAP_ASYNC_DIO);
  conn->want &= ~(FUSE_CAP_WRITEBACK_CACHE | FUSE_CAP_SPLICE_READ | FUSE_CAP_SPLICE_WRITE |
                  FUSE_CAP_SPLICE_MOVE | FUSE_CAP_READDIRPLUS | FUSE_CAP_READDIRPLUS_AUTO |
                  FUSE_CAP_POSIX_LOCKS | FUSE_CAP_FLOCK_LOCKS | FUSE_CAP_AUTO_INVAL_DATA);
  conn->max_background = static_cast<unsigned>(absl::GetFlag(FLAGS_max_background));
  conn->congestion_threshold = conn->max_background * 3 / 4;
  conn->time_gran = 1;
}

void ReplyEntryOrError(fuse_req_t req, int err, const struct fuse_entry_param& e) {
  if (err != 0) {
    fuse_reply_err(req, err);
  } else {
    fuse_reply_entry(req, &e);
  }
}

void Lookup(fuse_req_t req, fuse_ino_t parent, const char* name) {
  struct fuse_entry_param e;
  ReplyEntryOrError(req, TreeOf(req).Lookup(parent, name, &e), e);
}

void Forget(fuse_req_t req, fuse_ino_t ino, uint64_t nlookup) {
  TreeOf(req).Forget(ino, nlookup);
  fuse_reply_none(req);
}

void ForgetMulti(fuse_req_t req, size_t count, struct fuse_forget_data* forgets) {
  for (size_t i = 0; i < count; ++i) TreeOf(req).Forget(forgets[i].ino, forgets[i].nlookup);
  fuse_reply_none(req);
}

void GetAttr(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info*) {
  struct stat st;
  if (int err = TreeOf(req).GetAttr(ino, &st); err != 0) return (void)fuse_reply_err(req, err);
  fuse_reply_attr(req, &st, 0);
}

void SetAttr(fuse_req_t req, fuse_ino_t ino, struct stat* attr, int to_set,
             struct fuse_file_info*) {
  struct stat st;
  if (int err = TreeOf(req).SetAttr(ino, *attr, to_set, &st); err != 0) {
    return (void)fuse_reply_err(req, err);
  }
  fuse_reply_attr(req, &st, 0);
}

void MkDir(fuse_req_t req, fuse_ino_t parent, const char* name, mode_t mode) {
  struct fuse_entry_param e;
  ReplyEntryOrError(
      req, TreeOf(req).Make(parent, name, S_IFDIR | (mode & 07777), fuse_req_ctx(req), &e), e);
}

// As ckptfs-fuse: write-only opens bypass the page cache, others may use it.
void SetCacheMode(struct fuse_file_info* fi) {
  fi->direct_io = (fi->flags & O_ACCMODE) == O_WRONLY;
  fi->keep_cache = 0;
  fi->noflush = (fi->flags & O_ACCMODE) == O_RDONLY;
}

void Create(fuse_req_t req, fuse_ino_t parent, const char* name, mode_t mode,
            struct fuse_file_info* fi) {
  struct fuse_entry_param e;
  const int err = TreeOf(req).Make(parent, name, S_IFREG | (mode & 07777), fuse_req_ctx(req), &e);
  if (err != 0) return (void)fuse_reply_err(req, err);
  SetCacheMode(fi);
  if (fuse_reply_create(req, &e, fi) != 0) TreeOf(req).Forget(e.ino, 1);
}

void Open(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info* fi) {
  if (fi->flags & O_TRUNC) {
    if (int err = TreeOf(req).Truncate(ino); err != 0) return (void)fuse_reply_err(req, err);
  }
  SetCacheMode(fi);
  fuse_reply_open(req, fi);
}

void WriteBuf(fuse_req_t req, fuse_ino_t ino, struct fuse_bufvec* bufv, off_t offset,
              struct fuse_file_info*) {
  const size_t size = fuse_buf_size(bufv);
  if (copy_payload) {
    // One reused, page-aligned buffer per worker thread: the copy costs
    // what copying into warm chunk buffers costs, nothing more.
    static thread_local std::unique_ptr<char, decltype(&std::free)> buffer(
        static_cast<char*>(std::aligned_alloc(4096, kMaxWrite)), &std::free);
    struct fuse_bufvec to = FUSE_BUFVEC_INIT(std::min<size_t>(size, kMaxWrite));
    to.buf[0].mem = buffer.get();
    const ssize_t copied = fuse_buf_copy(&to, bufv, static_cast<fuse_buf_copy_flags>(0));
    if (copied < 0) return (void)fuse_reply_err(req, static_cast<int>(-copied));
  }
  TreeOf(req).Wrote(ino, static_cast<uint64_t>(offset), size);
  fuse_reply_write(req, size);
}

void Read(fuse_req_t req, fuse_ino_t ino, size_t size, off_t offset, struct fuse_file_info*) {
  static const std::vector<char> zeros(kMaxWrite, 0);
  const size_t n = TreeOf(req).Readable(ino, static_cast<uint64_t>(offset),
                                        std::min<size_t>(size, zeros.size()));
  fuse_reply_buf(req, zeros.data(), n);
}

void ReplyOk(fuse_req_t req) { fuse_reply_err(req, 0); }
void Flush(fuse_req_t req, fuse_ino_t, struct fuse_file_info*) { ReplyOk(req); }
void Release(fuse_req_t req, fuse_ino_t, struct fuse_file_info*) { ReplyOk(req); }
void Fsync(fuse_req_t req, fuse_ino_t, int, struct fuse_file_info*) { ReplyOk(req); }

void Unlink(fuse_req_t req, fuse_ino_t parent, const char* name) {
  fuse_reply_err(req, TreeOf(req).Remove(parent, name, /*dir=*/false));
}

void RmDir(fuse_req_t req, fuse_ino_t parent, const char* name) {
  fuse_reply_err(req, TreeOf(req).Remove(parent, name, /*dir=*/true));
}

void Rename(fuse_req_t req, fuse_ino_t parent, const char* name, fuse_ino_t newparent,
            const char* newname, unsigned int flags) {
  fuse_reply_err(req, TreeOf(req).Rename(parent, name, newparent, newname, flags));
}

// A directory handle: the entries as they were at opendir.
using Listing = std::vector<std::pair<std::string, struct stat>>;

void OpenDir(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info* fi) {
  auto listing = std::make_unique<Listing>();
  if (int err = TreeOf(req).List(ino, listing.get()); err != 0) {
    return (void)fuse_reply_err(req, err);
  }
  fi->fh = reinterpret_cast<uint64_t>(listing.get());
  if (fuse_reply_open(req, fi) == 0) listing.release();
}

void ReadDir(fuse_req_t req, fuse_ino_t, size_t size, off_t offset, struct fuse_file_info* fi) {
  const Listing& listing = *reinterpret_cast<const Listing*>(fi->fh);
  std::vector<char> buf(size);
  size_t used = 0;
  for (size_t i = static_cast<size_t>(offset); i < listing.size(); ++i) {
    const size_t need =
        fuse_add_direntry(req, buf.data() + used, size - used, listing[i].first.c_str(),
                          &listing[i].second, static_cast<off_t>(i + 1));
    if (need > size - used) break;
    used += need;
  }
  fuse_reply_buf(req, buf.data(), used);
}

void ReleaseDir(fuse_req_t req, fuse_ino_t, struct fuse_file_info* fi) {
  delete reinterpret_cast<Listing*>(fi->fh);
  ReplyOk(req);
}

void FsyncDir(fuse_req_t req, fuse_ino_t, int, struct fuse_file_info*) { ReplyOk(req); }

void StatFs(fuse_req_t req, fuse_ino_t) {
  struct statvfs st = {};
  st.f_bsize = st.f_frsize = 4096;
  st.f_blocks = st.f_bfree = st.f_bavail = uint64_t{1} << 40;  // 4 PiB: never full
  st.f_files = st.f_ffree = st.f_favail = uint64_t{1} << 32;
  st.f_namemax = 255;
  fuse_reply_statfs(req, &st);
}

fuse_lowlevel_ops Ops() {
  fuse_lowlevel_ops ops = {};
  ops.init = Init;
  ops.lookup = Lookup;
  ops.forget = Forget;
  ops.forget_multi = ForgetMulti;
  ops.getattr = GetAttr;
  ops.setattr = SetAttr;
  ops.mkdir = MkDir;
  ops.create = Create;
  ops.open = Open;
  ops.write_buf = WriteBuf;
  ops.read = Read;
  ops.flush = Flush;
  ops.release = Release;
  ops.fsync = Fsync;
  ops.unlink = Unlink;
  ops.rmdir = RmDir;
  ops.rename = Rename;
  ops.opendir = OpenDir;
  ops.readdir = ReadDir;
  ops.releasedir = ReleaseDir;
  ops.fsyncdir = FsyncDir;
  ops.statfs = StatFs;
  return ops;
}

int Fail(const std::string& message) {
  std::fprintf(stderr, "ckptfs-fuse-floor: %s\n", message.c_str());
  return 1;
}

}  // namespace

int main(int argc, char** argv) {
  absl::SetProgramUsageMessage(
      "A FUSE filesystem that discards every written byte (the FUSE floor of a save storm).\n"
      "usage: ckptfs-fuse-floor --mountpoint=DIR [--copy]");
  absl::ParseCommandLine(argc, argv);
  const std::string mountpoint = absl::GetFlag(FLAGS_mountpoint);
  if (mountpoint.empty()) return Fail("no mountpoint given (--mountpoint=DIR)");
  if (absl::GetFlag(FLAGS_threads) < 1 || absl::GetFlag(FLAGS_max_threads) < 1 ||
      absl::GetFlag(FLAGS_max_background) < 1) {
    return Fail("--threads, --max_threads and --max_background must be at least 1");
  }
  copy_payload = absl::GetFlag(FLAGS_copy);

  std::string options = "default_permissions,fsname=ckptfs-floor,subtype=ckptfs-floor";
  if (geteuid() == 0) options += ",allow_other";
  std::vector<std::string> arg_strings = {"ckptfs-fuse-floor", "-o", options};
  std::vector<char*> args_v;
  for (std::string& s : arg_strings) args_v.push_back(s.data());
  struct fuse_args args = FUSE_ARGS_INIT(static_cast<int>(args_v.size()), args_v.data());

  Tree tree;
  const fuse_lowlevel_ops ops = Ops();
  struct fuse_session* se = fuse_session_new(&args, &ops, sizeof(ops), &tree);
  fuse_opt_free_args(&args);
  if (se == nullptr) return Fail("libfuse rejected the mount options (see its message above)");
  int rc = 1;
  if (fuse_set_signal_handlers(se) != 0) {
    Fail("installing the FUSE signal handlers failed");
  } else {
    if (fuse_session_mount(se, mountpoint.c_str()) != 0) {
      Fail(absl::StrCat("mounting at ", mountpoint, " failed (see libfuse's message above)"));
    } else {
      struct fuse_loop_config* config = fuse_loop_cfg_create();
      fuse_loop_cfg_set_clone_fd(config, 1);
      fuse_loop_cfg_set_max_threads(config,
                                    static_cast<unsigned>(absl::GetFlag(FLAGS_max_threads)));
      fuse_loop_cfg_set_idle_threads(config, static_cast<unsigned>(absl::GetFlag(FLAGS_threads)));
      const int loop = fuse_session_loop_mt(se, config);
      fuse_loop_cfg_destroy(config);
      rc = loop < 0 ? 1 : 0;  // > 0: the signal that ended it, a clean end
      if (loop < 0) Fail(absl::StrCat("FUSE session loop: ", std::strerror(-loop)));
      fuse_session_unmount(se);
    }
    fuse_remove_signal_handlers(se);
  }
  fuse_session_destroy(se);
  return rc;
}
