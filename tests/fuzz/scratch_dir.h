// ScratchDir: the per-process directory the fuzz functions keep their
// stores in, created on first use and removed at exit. Under
// $CKPTFS_FUZZ_DIR when set, else /dev/shm (tmpfs: no disk I/O, so many
// more inputs per second; chunk files use buffered I/O there), else $TMPDIR
// or /tmp.
//
// Thread-safety: Path() and Fresh() may be called from one thread at a time.
#ifndef CKPTFS_TESTS_FUZZ_SCRATCH_DIR_H_
#define CKPTFS_TESTS_FUZZ_SCRATCH_DIR_H_

#include <string>

namespace ckptfs::fuzz {

// The process's scratch directory (empty when it cannot be made).
const std::string& ScratchPath();

// A new, empty directory under it for one input; the previous one returned
// is removed first.
std::string FreshScratchDir();

}  // namespace ckptfs::fuzz

#endif  // CKPTFS_TESTS_FUZZ_SCRATCH_DIR_H_
