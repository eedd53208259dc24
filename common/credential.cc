// See credential.h.
#include "common/credential.h"

#include <fcntl.h>
#include <grpcpp/client_context.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdint>
#include <cstdlib>
#include <string>
#include <utility>

#include "absl/strings/ascii.h"
#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/synchronization/mutex.h"
#include "common/data_connection.h"
#include "common/errno_status.h"
#include "common/frame.h"
#include "common/tcp.h"
#include "common/unique_fd.h"
#include "proto/data.pb.h"

namespace ckptfs {
namespace {

// A credential file is a few dozen bytes; anything much larger is not one.
constexpr size_t kMaxCredentialFileBytes = 4096;

absl::Mutex process_credential_mu(absl::kConstInit);
std::string* process_credential ABSL_GUARDED_BY(process_credential_mu) = nullptr;

data::RequestHeader Hello(const std::string& credential) {
  data::RequestHeader hello;
  hello.set_op(data::HELLO);
  hello.set_credential(credential);
  return hello;
}

}  // namespace

absl::StatusOr<std::string> LoadCredential(const std::string& path) {
  UniqueFd fd(::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NOFOLLOW));
  if (!fd.valid()) return SyscallError(errno, absl::StrCat("credential file ", path));
  struct stat st {};
  if (::fstat(fd.get(), &st) != 0) {
    return SyscallError(errno, absl::StrCat("credential file ", path));
  }
  if (!S_ISREG(st.st_mode)) {
    return ErrnoStatus(EINVAL, absl::StrCat("credential file ", path, " is not a regular file"));
  }
  if (st.st_uid != ::geteuid()) {
    // Else a file planted by another user (in a shared or world-writable
    // directory) would make the cluster run on a secret they know.
    return ErrnoStatus(EACCES, absl::StrCat("credential file ", path, " belongs to uid ", st.st_uid,
                                            ", not to this process's user (uid ", ::geteuid(),
                                            "): use a credential file of your own"));
  }
  if ((st.st_mode & (S_IRWXG | S_IRWXO)) != 0) {
    return ErrnoStatus(
        EACCES, absl::StrFormat("credential file %s has mode %04o: other users could read or "
                                "replace the cluster's secret; run `chmod 600 %s`",
                                path, st.st_mode & 07777, path));
  }
  std::string content(kMaxCredentialFileBytes + 1, '\0');
  size_t got = 0;
  while (got < content.size()) {
    const ssize_t n = ::read(fd.get(), content.data() + got, content.size() - got);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return SyscallError(errno, absl::StrCat("reading credential file ", path));
    if (n == 0) break;
    got += static_cast<size_t>(n);
  }
  if (got > kMaxCredentialFileBytes) {
    return ErrnoStatus(EINVAL, absl::StrCat("credential file ", path, " is larger than ",
                                            kMaxCredentialFileBytes, " bytes"));
  }
  content.resize(got);
  const absl::string_view secret = absl::StripAsciiWhitespace(content);
  if (secret.empty()) {
    return ErrnoStatus(
        EINVAL, absl::StrCat("credential file ", path, " is empty (`ckptfs up` creates one)"));
  }
  for (char c : secret) {
    if (!absl::ascii_isgraph(static_cast<unsigned char>(c))) {
      return ErrnoStatus(EINVAL, absl::StrCat("credential file ", path,
                                              " holds blanks or control characters inside "
                                              "the secret"));
    }
  }
  return std::string(secret);
}

absl::StatusOr<std::string> CreateCredential(const std::string& path) {
  unsigned char random[kCredentialBytes];
  size_t got = 0;
  while (got < sizeof(random)) {
    const ssize_t n = ::getrandom(random + got, sizeof(random) - got, 0);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return SyscallError(errno, "getrandom for a new credential");
    got += static_cast<size_t>(n);
  }
  const std::string secret = absl::BytesToHexString(
      absl::string_view(reinterpret_cast<const char*>(random), sizeof(random)));
  UniqueFd fd(::open(path.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW, 0600));
  if (!fd.valid()) return SyscallError(errno, absl::StrCat("creating credential file ", path));
  // The umask cannot widen 0600, but a file made by an earlier, failed try
  // is never reused: O_EXCL.
  const std::string line = secret + "\n";
  for (size_t done = 0; done < line.size();) {
    const ssize_t n = ::write(fd.get(), line.data() + done, line.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) {
      const int err = errno;
      ::unlink(path.c_str());
      return SyscallError(err, absl::StrCat("writing credential file ", path));
    }
    done += static_cast<size_t>(n);
  }
  if (::fsync(fd.get()) != 0) {
    const int err = errno;
    ::unlink(path.c_str());
    return SyscallError(err, absl::StrCat("syncing credential file ", path));
  }
  return secret;
}

absl::StatusOr<std::string> LoadOrCreateCredential(const std::string& path) {
  absl::StatusOr<std::string> created = CreateCredential(path);
  if (created.ok() || ErrnoFromStatus(created.status()) != EEXIST) return created;
  return LoadCredential(path);
}

absl::StatusOr<std::string> LoadCredentialFlag(const std::string& path) {
  if (path.empty()) return std::string();
  return LoadCredential(path);
}

std::string CredentialFromEnvironment() {
  const char* file = std::getenv(kCredentialFileEnv);
  if (file == nullptr || *file == '\0') return std::string();
  absl::StatusOr<std::string> credential = LoadCredential(file);
  return credential.ok() ? *std::move(credential) : std::string();
}

bool CredentialMatches(absl::string_view presented, absl::string_view expected) {
  if (presented.size() != expected.size()) return false;
  unsigned char diff = 0;
  for (size_t i = 0; i < expected.size(); ++i) {
    diff |= static_cast<unsigned char>(presented[i] ^ expected[i]);
  }
  return diff == 0;
}

void AttachCredential(grpc::ClientContext& context, const std::string& credential) {
  if (!credential.empty()) context.AddMetadata(kCredentialMetadataKey, credential);
}

absl::Status PresentCredential(DataConnection& connection, const std::string& credential) {
  if (credential.empty()) return absl::OkStatus();
  return connection.Call(Hello(credential), nullptr, 0, nullptr, 0).status();
}

absl::Status PresentCredential(int fd, const std::string& credential, absl::Duration timeout,
                               absl::string_view server) {
  if (credential.empty()) return absl::OkStatus();
  auto failed = [server](const absl::Status& s) {
    return ErrnoStatusWithCode(s.code(), ErrnoFromStatus(s) == 0 ? EIO : ErrnoFromStatus(s),
                               absl::StrCat("storage server ", server, ": ", s.message()));
  };
  if (absl::Status s = SetSocketTimeouts(fd, timeout); !s.ok()) return failed(s);
  data::RequestHeader hello = Hello(credential);
  hello.set_request_id(1);
  if (absl::Status s = WriteFrame(fd, hello, nullptr, 0); !s.ok()) return failed(s);
  data::ResponseHeader reply;
  absl::StatusOr<FramePrefix> prefix = ReadFrameHead(fd, reply);
  if (!prefix.ok()) {
    return failed(IsEndOfStream(prefix.status())
                      ? ErrnoStatus(ECONNRESET, "connection closed by the server")
                      : prefix.status());
  }
  if (prefix->payload_len > 0) {
    if (absl::Status s = DiscardPayload(fd, prefix->payload_len); !s.ok()) return failed(s);
  }
  if (reply.error() != 0) return failed(ErrnoStatus(reply.error(), reply.message()));
  // Back to no timeout: whoever takes the socket over sets its own.
  return SetSocketTimeouts(fd, absl::ZeroDuration());
}

void SetProcessCredential(std::string credential) {
  absl::MutexLock lock(&process_credential_mu);
  if (process_credential == nullptr) process_credential = new std::string();  // never freed
  *process_credential = std::move(credential);
}

std::string ProcessCredential() {
  absl::MutexLock lock(&process_credential_mu);
  return process_credential == nullptr ? std::string() : *process_credential;
}

}  // namespace ckptfs
