// RandomNonzeroId: a random nonzero 64-bit number for identities that must
// differ between processes and runs (a storage server's incarnation, a
// client transport's id): the kernel's randomness (getrandom), or where
// that fails the clock and the process id mixed.
//
// Thread-safety: thread-safe.
#ifndef CKPTFS_COMMON_RANDOM_ID_H_
#define CKPTFS_COMMON_RANDOM_ID_H_

#include <cstdint>

namespace ckptfs {

uint64_t RandomNonzeroId();

}  // namespace ckptfs

#endif  // CKPTFS_COMMON_RANDOM_ID_H_
