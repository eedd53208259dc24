// See file_type.h.
#include "common/file_type.h"

#include <sys/stat.h>

namespace ckptfs {

uint32_t ModeTypeBits(meta::FileType type) {
  switch (type) {
    case meta::DIRECTORY:
      return S_IFDIR;
    case meta::SYMLINK:
      return S_IFLNK;
    case meta::FIFO:
      return S_IFIFO;
    case meta::SOCKET:
      return S_IFSOCK;
    case meta::CHAR_DEVICE:
      return S_IFCHR;
    case meta::BLOCK_DEVICE:
      return S_IFBLK;
    case meta::REGULAR:
      return S_IFREG;
    default:
      return 0;
  }
}

std::optional<meta::FileType> FileTypeOfMode(uint32_t mode) {
  switch (mode & S_IFMT) {
    case S_IFREG:
      return meta::REGULAR;
    case S_IFDIR:
      return meta::DIRECTORY;
    case S_IFLNK:
      return meta::SYMLINK;
    case S_IFIFO:
      return meta::FIFO;
    case S_IFSOCK:
      return meta::SOCKET;
    case S_IFCHR:
      return meta::CHAR_DEVICE;
    case S_IFBLK:
      return meta::BLOCK_DEVICE;
    default:
      return std::nullopt;
  }
}

bool IsSpecialFile(meta::FileType type) {
  return type == meta::FIFO || type == meta::SOCKET || type == meta::CHAR_DEVICE ||
         type == meta::BLOCK_DEVICE;
}

uint32_t ModeAfterUnprivilegedWrite(uint32_t mode) {
  mode &= ~static_cast<uint32_t>(S_ISUID);
  if (mode & S_IXGRP) mode &= ~static_cast<uint32_t>(S_ISGID);
  return mode;
}

}  // namespace ckptfs
