// See local_etcd.h.
#include "tools/local_etcd.h"

#include <arpa/inet.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iostream>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/tcp.h"
#include "tools/process.h"

namespace ckptfs::tools {

absl::StatusOr<std::string> FindEtcdBinary() {
  if (const char* env = std::getenv("CKPTFS_ETCD_BINARY"); env != nullptr && *env != '\0') {
    if (::access(env, X_OK) == 0) return std::string(env);
    return absl::NotFoundError(
        absl::StrCat("CKPTFS_ETCD_BINARY=", env, " is not an executable file"));
  }
  for (const char* path : {"/usr/bin/etcd", "/usr/local/bin/etcd"}) {
    if (::access(path, X_OK) == 0) return std::string(path);
  }
  return absl::NotFoundError(
      "--meta-backend etcd needs etcd: install it (apt-get install etcd-server) or set "
      "CKPTFS_ETCD_BINARY to its path");
}

std::string LocalEtcd::Endpoints() const {
  std::vector<std::string> endpoints;
  for (int i = 0; i < kEtcdMembers; ++i) {
    endpoints.push_back(HostPort{host, ClientPort(i)}.ToString());
  }
  return absl::StrJoin(endpoints, ",");
}

std::vector<std::string> LocalEtcd::Argv(int member) const {
  const std::string scheme = tls ? "https://" : "http://";
  std::vector<std::string> peers;
  for (int i = 0; i < kEtcdMembers; ++i) {
    peers.push_back(absl::StrCat(Name(i), "=", scheme, HostPort{host, PeerPort(i)}.ToString()));
  }
  const std::string client_url = scheme + HostPort{host, ClientPort(member)}.ToString();
  const std::string peer_url = scheme + HostPort{host, PeerPort(member)}.ToString();
  std::vector<std::string> argv = {
      binary,
      "--name=" + Name(member),
      "--data-dir=" + DataDir(member),
      "--listen-client-urls=" + client_url,
      "--advertise-client-urls=" + client_url,
      "--listen-peer-urls=" + peer_url,
      "--initial-advertise-peer-urls=" + peer_url,
      "--initial-cluster=" + absl::StrJoin(peers, ","),
      "--initial-cluster-state=new",
      "--initial-cluster-token=ckptfs-local",
      // A checkpoint commit compares every file of the checkpoint in one Txn.
      "--max-txn-ops=100000",
      "--max-request-bytes=67108864",
      "--logger=zap",
      "--log-level=warn",
  };
  if (tls) {
    argv.insert(argv.end(),
                {"--client-cert-auth", "--trusted-ca-file=" + CaFile(),
                 "--cert-file=" + MemberCertFile(), "--key-file=" + MemberKeyFile(),
                 "--peer-client-cert-auth", "--peer-trusted-ca-file=" + CaFile(),
                 "--peer-cert-file=" + MemberCertFile(), "--peer-key-file=" + MemberKeyFile()});
  }
  return argv;
}

namespace {

absl::Status RunOpenssl(const std::vector<std::string>& args, absl::string_view what) {
  std::vector<std::string> argv = {"openssl"};
  argv.insert(argv.end(), args.begin(), args.end());
  absl::StatusOr<CommandResult> run = RunCommand(argv);
  if (!run.ok()) {
    return absl::Status(
        run.status().code(),
        absl::StrCat("making the etcd members' certificates (", what, "): ", run.status().message(),
                     "; install openssl (apt-get install openssl)"));
  }
  if (run->exit_status != 0) {
    return absl::InternalError(absl::StrCat("making the etcd members' certificates (", what,
                                            "): openssl exited with ", run->exit_status, ": ",
                                            run->output));
  }
  return absl::OkStatus();
}

// A key and a certificate signed by the CA in `dir`, for `subject` with the
// extensions in `extensions` (openssl's x509v3 config lines).
absl::Status MakeSigned(const std::string& dir, const std::string& name, const std::string& subject,
                        const std::string& extensions) {
  const std::string ext_file = dir + "/" + name + ".ext";
  {
    std::ofstream out(ext_file);
    out << extensions;
    if (!out.good()) return absl::InternalError(absl::StrCat("cannot write ", ext_file));
  }
  if (absl::Status s =
          RunOpenssl({"req", "-new", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1",
                      "-nodes", "-keyout", dir + "/" + name + ".key", "-out",
                      dir + "/" + name + ".csr", "-subj", subject},
                     name + " key");
      !s.ok()) {
    return s;
  }
  return RunOpenssl({"x509", "-req", "-in", dir + "/" + name + ".csr", "-CA", dir + "/ca.crt",
                     "-CAkey", dir + "/ca.key", "-CAcreateserial", "-days", "3650", "-out",
                     dir + "/" + name + ".crt", "-extfile", ext_file},
                    name + " certificate");
}

}  // namespace

absl::Status MakeLocalEtcdTls(const LocalEtcd& etcd) {
  const std::string dir = etcd.TlsDir();
  if (::access(dir.c_str(), F_OK) == 0) return absl::OkStatus();
  // Made under a temporary name and renamed when complete, so that a
  // failure halfway leaves nothing that looks finished.
  const std::string making = dir + ".making";
  std::error_code ec;
  std::filesystem::remove_all(making, ec);
  if (!std::filesystem::create_directories(making, ec) || ec) {
    return absl::InternalError(absl::StrCat("cannot create ", making, ": ", ec.message()));
  }
  ::chmod(making.c_str(), 0700);
  if (absl::Status s =
          RunOpenssl({"req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1",
                      "-nodes", "-keyout", making + "/ca.key", "-out", making + "/ca.crt", "-days",
                      "3650", "-subj", "/CN=ckptfs local etcd CA"},
                     "CA");
      !s.ok()) {
    return s;
  }
  std::string names = "IP:127.0.0.1,DNS:localhost";
  if (etcd.host != "127.0.0.1" && etcd.host != "localhost") {
    in6_addr ignored;
    const bool numeric = ::inet_pton(AF_INET, etcd.host.c_str(), &ignored) == 1 ||
                         ::inet_pton(AF_INET6, etcd.host.c_str(), &ignored) == 1;
    absl::StrAppend(&names, ",", numeric ? "IP:" : "DNS:", etcd.host);
  }
  if (absl::Status s = MakeSigned(
          making, "member", "/CN=ckptfs etcd member",
          absl::StrCat("subjectAltName=", names, "\nextendedKeyUsage=serverAuth,clientAuth\n"));
      !s.ok()) {
    return s;
  }
  if (absl::Status s =
          MakeSigned(making, "client", "/CN=ckptfs-meta", "extendedKeyUsage=clientAuth\n");
      !s.ok()) {
    return s;
  }
  for (const char* key : {"ca.key", "member.key", "client.key"}) {
    ::chmod((making + "/" + key).c_str(), 0600);
  }
  std::filesystem::rename(making, dir, ec);
  if (ec) return absl::InternalError(absl::StrCat("cannot rename ", making, ": ", ec.message()));
  return absl::OkStatus();
}

bool LocalEtcdUsesTls(const LocalEtcd& etcd) {
  if (::access(etcd.TlsDir().c_str(), F_OK) == 0) return true;
  for (int i = 0; i < kEtcdMembers; ++i) {
    if (::access(etcd.DataDir(i).c_str(), F_OK) == 0) {
      std::cerr << "ckptfs up: the etcd members' data in " << etcd.root
                << " predates TLS: they stay plain text and take any client. To start over "
                   "with TLS and client certificates, `ckptfs down`, remove "
                << etcd.root << " (the namespace goes with it) and `up` again\n";
      return false;
    }
  }
  return true;
}

}  // namespace ckptfs::tools
