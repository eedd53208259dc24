// TempDir: a fresh directory under /tmp for one test, removed (recursively)
// when the object goes away, even when the test failed.
// Thread-safety: none needed; one test owns it.
#ifndef CKPTFS_TESTS_STORAGE_TEMP_DIR_H_
#define CKPTFS_TESTS_STORAGE_TEMP_DIR_H_

#include <cstdlib>
#include <filesystem>
#include <string>
#include <system_error>

namespace ckptfs::storage {

class TempDir {
 public:
  TempDir() {
    std::string tmpl = "/tmp/ckptfs-storage-test.XXXXXX";
    if (::mkdtemp(tmpl.data()) != nullptr) path_ = tmpl;
  }
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;
  ~TempDir() {
    std::error_code ignored;
    if (!path_.empty()) std::filesystem::remove_all(path_, ignored);
  }
  // Empty if the directory could not be made.
  const std::string& path() const { return path_; }

 private:
  std::string path_;
};

}  // namespace ckptfs::storage

#endif  // CKPTFS_TESTS_STORAGE_TEMP_DIR_H_
