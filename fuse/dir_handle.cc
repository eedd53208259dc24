// See dir_handle.h.
#include "fuse/dir_handle.h"

#include <sys/stat.h>

#include <utility>

#include "common/file_type.h"

namespace ckptfs::fuse {

DirHandle::DirHandle(uint64_t ino, uint64_t parent_ino, Fetcher fetcher)
    : ino_(ino), fetcher_(std::move(fetcher)) {
  absl::MutexLock lock(&mu_);
  entries_.push_back(Entry{".", ino, S_IFDIR});
  entries_.push_back(Entry{"..", parent_ino, S_IFDIR});
}

absl::StatusOr<const DirHandle::Entry*> DirHandle::At(uint64_t offset) {
  while (true) {
    std::string start_after;
    size_t known = 0;
    {
      absl::MutexLock lock(&mu_);
      if (offset < entries_.size()) return &entries_[offset];
      if (complete_) return nullptr;
      start_after = last_name_;
      known = entries_.size();
    }
    absl::StatusOr<meta::ReadDirReply> page = fetcher_(start_after);
    if (!page.ok()) return page.status();

    absl::MutexLock lock(&mu_);
    if (entries_.size() != known) continue;  // another reader got there first
    for (const meta::DirEntry& e : page->entries()) {
      entries_.push_back(Entry{e.name(), e.ino(), ModeTypeBits(e.type())});
    }
    if (page->entries_size() > 0) last_name_ = page->entries().rbegin()->name();
    // An empty page that claims "more" would loop forever; treat it as the end.
    if (!page->more() || page->entries_size() == 0) complete_ = true;
  }
}

}  // namespace ckptfs::fuse
