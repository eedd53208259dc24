// See scratch_dir.h.
#include "tests/fuzz/scratch_dir.h"

#include <sys/stat.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <system_error>

#include "absl/strings/str_cat.h"

namespace ckptfs::fuzz {
namespace {

std::string BaseDir() {
  if (const char* dir = std::getenv("CKPTFS_FUZZ_DIR"); dir != nullptr && *dir != '\0') {
    return dir;
  }
  struct stat st {};
  if (::stat("/dev/shm", &st) == 0 && S_ISDIR(st.st_mode) && ::access("/dev/shm", W_OK) == 0) {
    return "/dev/shm";
  }
  if (const char* dir = std::getenv("TMPDIR"); dir != nullptr && *dir != '\0') return dir;
  return "/tmp";
}

std::string& Path() {
  static std::string* path = [] {
    std::string pattern = BaseDir() + "/ckptfs-fuzz.XXXXXX";
    auto* made = new std::string(::mkdtemp(pattern.data()) != nullptr ? pattern : "");
    if (!made->empty()) {
      std::atexit([] {
        std::error_code ignored;
        std::filesystem::remove_all(Path(), ignored);
      });
    }
    return made;
  }();
  return *path;
}

}  // namespace

const std::string& ScratchPath() { return Path(); }

std::string FreshScratchDir() {
  static uint64_t next = 0;
  std::error_code ignored;
  if (next > 0) std::filesystem::remove_all(absl::StrCat(Path(), "/", next - 1), ignored);
  const std::string dir = absl::StrCat(Path(), "/", next++);
  std::filesystem::create_directories(dir, ignored);
  return dir;
}

}  // namespace ckptfs::fuzz
