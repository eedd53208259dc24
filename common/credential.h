// The cluster credential: a random secret every metadata RPC and every data
// connection presents, so that only clients given it get in.
//
// It lives in a file of mode 0600 (`ckptfs up` creates <state>/credential):
// 64 hex digits (32 bytes from getrandom) and a newline. Daemons and clients
// take its path (--credential_file); a daemon without one serves anyone and
// says so once at start.
//
// On the metadata path the secret rides in each call's metadata under
// kCredentialMetadataKey (the server checks it before any handler runs:
// server/meta/credential_check.h). On the data path it is the HELLO frame
// that opens a connection (proto/data.proto); PresentCredential sends it.
//
// Thread-safety: pure functions, except that the functions that touch files
// or sockets do I/O on the caller's thread.
#ifndef CKPTFS_COMMON_CREDENTIAL_H_
#define CKPTFS_COMMON_CREDENTIAL_H_

#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"

namespace grpc {
class ClientContext;
}  // namespace grpc

namespace ckptfs {

class DataConnection;

// gRPC metadata key of the credential (lowercase, ASCII value).
inline constexpr char kCredentialMetadataKey[] = "ckptfs-credential";
// The environment variable naming a credential file that libckptfs clients
// (ClientOptions' default) and the `ckptfs` tools use when not told one.
inline constexpr char kCredentialFileEnv[] = "CKPTFS_CREDENTIAL_FILE";
// Random bytes in a new credential (written as twice as many hex digits).
inline constexpr size_t kCredentialBytes = 32;

// Reads the credential at `path`: its content with surrounding blanks and
// newlines removed. Fails (EACCES) on a file any group or other user may
// read or write ("chmod 600 PATH"), (EINVAL) on an empty one or one with
// blanks or control characters inside, and with the errno of a file that
// cannot be read, each naming the path.
absl::StatusOr<std::string> LoadCredential(const std::string& path);

// Creates `path` (O_EXCL, mode 0600) holding a new random credential, synced
// before it returns; EEXIST if it exists.
absl::StatusOr<std::string> CreateCredential(const std::string& path);

// LoadCredential(path), or CreateCredential(path) when there is no file.
absl::StatusOr<std::string> LoadOrCreateCredential(const std::string& path);

// LoadCredential(path) for an optional flag: "" when `path` is empty.
absl::StatusOr<std::string> LoadCredentialFlag(const std::string& path);

// The credential in $CKPTFS_CREDENTIAL_FILE; "" when it is unset or cannot
// be loaded (a service that wants it then refuses, saying what to give).
std::string CredentialFromEnvironment();

// Whether `presented` equals `expected`, in time that depends only on their
// lengths (no early exit on the first differing byte).
bool CredentialMatches(absl::string_view presented, absl::string_view expected);

// Adds `credential` to a call's metadata; nothing when it is empty.
void AttachCredential(grpc::ClientContext& context, const std::string& credential);

// Sends HELLO with `credential` on a fresh connection and waits for the
// answer. Nothing when `credential` is empty (the server says so on the
// first request if it wants one). A refusal fails with the server's errno
// (EACCES) and message; the connection is then broken().
absl::Status PresentCredential(DataConnection& connection, const std::string& credential);

// The same on a connected blocking socket nothing else uses yet (a socket
// about to be handed to an event loop). `timeout` bounds the exchange.
// `server` names the peer in errors.
absl::Status PresentCredential(int fd, const std::string& credential, absl::Duration timeout,
                               absl::string_view server);

// The credential this process presents on the data connections it dials on
// its own behalf (the metadata service's commit SYNC and orphan TRIM): set
// once at start-up by whoever knows it (MetaServer::Start); "" until then.
// Thread-safe.
void SetProcessCredential(std::string credential);
std::string ProcessCredential();

}  // namespace ckptfs

#endif  // CKPTFS_COMMON_CREDENTIAL_H_
