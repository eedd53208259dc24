// The fuzz entry functions of ckptfs's bad-input defences,
// in plain C++ so that two builds use them: the libFuzzer binaries of
// tests/fuzz/libfuzzer/ (clang, ASan, coverage-guided) and fuzz_replay_test
// (the normal build), which replays every input under tests/fuzz/corpus/ on
// each CI run. Each function takes any bytes; it crashes (FUZZ_CHECK, or a
// sanitizer) only when the code under test broke a property, never because
// the input is odd.
//
// Thread-safety: each call is self-contained; do not call one function from
// two threads at once (they keep a per-process scratch directory or ring).
#ifndef CKPTFS_TESTS_FUZZ_FUZZ_TARGETS_H_
#define CKPTFS_TESTS_FUZZ_FUZZ_TARGETS_H_

#include <cstddef>
#include <cstdint>

namespace ckptfs::fuzz {

// The data-path frame parsers: DecodeFramePrefix on the bytes; the storage
// server's way through a stream of request frames (prefix, RequestHeader,
// the buffer its op asks for, payload); the chunk-file header decoder; and
// the blocking reader (ReadFrameHead + DiscardPayload) over a socket fed the
// bytes. Properties: every frame accepted is within the limits and encodes
// back to the same prefix; the buffer a request asks for is bounded by the
// largest chunk; every refusal carries an errno; reading ends.
void FuzzFrame(const uint8_t* data, size_t size);

// The storage server's request handling (RequestHandler over a real
// ChunkStore in a scratch directory), fed a sequence of requests decoded
// from the bytes: WRITE/READ/TRIM/SYNC/PING and unknown ops with fuzzed ids,
// inodes, offsets, lengths, CRCs and payloads, and chunk files damaged on
// disk between requests. Properties: every reply echoes its id; an error has
// an errno and a message; a READ returns exactly the bytes a model of the
// chunks says, with their CRC, or ENOENT for a missing chunk — a damaged
// chunk reads as EIO or as its right bytes, never as wrong ones.
void FuzzStorageRequests(const uint8_t* data, size_t size);

// The metadata service's request handling below gRPC — Namespace and the
// checkpoint store on a MemoryKvStore — fed a sequence of operations with
// fuzzed or known inode ids, names (valid, "/", NUL, ".", "..", over 255
// bytes), modes, sizes, xattrs, readdir limits and checkpoint ranks.
// Properties: every error carries an errno; a name that ValidateName
// refuses is never created; the root stays a directory; a readdir page is
// never longer than the largest page.
void FuzzMetaOps(const uint8_t* data, size_t size);

}  // namespace ckptfs::fuzz

#endif  // CKPTFS_TESTS_FUZZ_FUZZ_TARGETS_H_
