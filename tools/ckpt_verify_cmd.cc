// `ckptfs ckpt show|verify DIR`: a checkpoint's files with their chunks and
// CRC32C, read from the storage servers (ckpt_check.h); verify reads every
// chunk, reports each file OK or BAD (naming the chunk, the server and what
// failed) and exits 1 if any is bad. The metadata service is the one the
// mount holding DIR uses, unless --meta or --state-dir says otherwise.
// Runs on main's thread only.
#include <iostream>
#include <memory>
#include <optional>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "common/errno_status.h"
#include "tools/ckpt_check.h"
#include "tools/cluster_address.h"
#include "tools/commands.h"
#include "tools/mount_transactions.h"
#include "tools/table.h"

namespace ckptfs::tools {
namespace {

constexpr absl::Duration kTimeout = absl::Seconds(30);

std::string Hex(uint32_t crc) { return absl::StrFormat("%08x", crc); }

// "committed, 4/4 ranks" for a checkpoint; "not a checkpoint" otherwise.
std::string StateLine(const std::string& dir) {
  absl::StatusOr<std::string> text = ReadXattr(dir, kInfoXattr);
  if (!text.ok()) return "not a checkpoint";
  absl::StatusOr<meta::CheckpointInfo> info = ParseCheckpointInfo(*text);
  if (!info.ok()) return "checkpoint (state unreadable)";
  return absl::StrCat(CheckpointStateName(info->state()), ", ", info->arrived(), "/", info->ranks(),
                      " ranks");
}

struct Prepared {
  std::string address;
  std::unique_ptr<MetaProbe> probe;
  std::unique_ptr<CheckpointReader> reader;
  std::vector<std::string> files;
};

// Resolves the service, loads the server map and lists DIR's files; on
// failure prints the error and returns nullopt with *exit_status set.
std::optional<Prepared> Prepare(const CommandSpec& spec, const ParsedFlags& flags,
                                const std::string& dir, int* exit_status) {
  Prepared p;
  absl::StatusOr<std::string> address = ResolveMetaAddress(flags, dir);
  if (!address.ok()) {
    *exit_status = Failure(spec, std::string(address.status().message()));
    return std::nullopt;
  }
  p.address = *address;
  absl::StatusOr<std::string> credential = ResolveCredential(flags, dir);
  if (!credential.ok()) {
    *exit_status = Failure(spec, std::string(credential.status().message()));
    return std::nullopt;
  }
  p.probe = std::make_unique<MetaProbe>(p.address, *credential);
  p.reader = std::make_unique<CheckpointReader>(p.probe.get(), kTimeout);
  if (absl::Status s = p.reader->Init(); !s.ok()) {
    *exit_status = Failure(spec, absl::StrCat(s.message(), " (check `ckptfs status`)"));
    return std::nullopt;
  }
  absl::StatusOr<std::vector<std::string>> files = p.reader->ListFiles(dir);
  if (!files.ok()) {
    *exit_status = Failure(spec, std::string(files.status().message()));
    return std::nullopt;
  }
  p.files = *std::move(files);
  return p;
}

}  // namespace

CommandSpec CkptShowSpec() {
  return CommandSpec{
      "ckpt show",
      "Show the files of checkpoint DIR: size, chunks, CRC32C per file (and chunk).",
      "Every chunk is read from its storage server; the CRC32C shown is computed\n"
      "over the bytes read (a file's equals `crc32c` of a copy of it), after the\n"
      "server checked its stored CRC32C. An erasure-coded file's chunks are decoded\n"
      "from their fragments. --chunks lists each chunk with its server.\n"
      "Exit status 1 if a chunk cannot be read (see `ckptfs ckpt verify`).",
      {MetaFlag(), StateDirFlag(), CredentialFileFlag(), {"chunks", "", "also list every chunk"}},
      {"DIR"}};
}

int RunCkptShow(const ParsedFlags& flags) {
  static const CommandSpec spec = CkptShowSpec();
  const std::string& dir = flags.positionals()[0];
  int exit_status = 0;
  std::optional<Prepared> p = Prepare(spec, flags, dir, &exit_status);
  if (!p) return exit_status;
  const bool chunks = flags.GetBool("chunks");
  std::vector<std::vector<std::string>> rows = {{"FILE", "SIZE", "CHUNKS", "CRC32C", ""}};
  uint64_t total = 0;
  int bad = 0;
  for (const std::string& name : p->files) {
    FileCheck f = p->reader->CheckFile(dir, name);
    total += f.size;
    bad += f.ok() ? 0 : 1;
    rows.push_back({f.path, FormatBytes(f.size), absl::StrCat(f.chunks.size()),
                    f.ok() ? Hex(f.crc32c) : "-", f.ok() ? "" : std::string(f.status.message())});
    if (!chunks) continue;
    for (const ChunkCheck& c : f.chunks) {
      rows.push_back({absl::StrCat("  chunk ", c.index), FormatBytes(c.length),
                      absl::StrCat("server ", c.server_id, " ", c.server.empty() ? "?" : c.server),
                      c.status.ok() ? Hex(c.crc32c) : "-",
                      !c.status.ok() ? std::string(c.status.message())
                      : c.hole       ? std::string("hole (never written, reads as zeros)")
                                     : std::string()});
    }
  }
  std::cout << dir << ": " << StateLine(dir) << ", " << p->files.size() << " file"
            << (p->files.size() == 1 ? "" : "s") << ", " << FormatBytes(total)
            << " (CRC32C computed over the data read from the storage servers)\n"
            << FormatTable(rows);
  if (bad > 0) {
    std::cerr << "ckptfs ckpt show: " << bad << " file" << (bad == 1 ? "" : "s")
              << " could not be read completely; `ckptfs ckpt verify " << dir
              << "` says which chunks\n";
    return 1;
  }
  return 0;
}

CommandSpec CkptVerifySpec() {
  return CommandSpec{
      "ckpt verify",
      "Read every chunk of every file of checkpoint DIR and check its CRC32C.",
      "Each chunk is read from its storage server, which checks the CRC32C stored\n"
      "with it on disk; the CRC32C of the bytes on the wire is checked here. Every\n"
      "copy of a replicated chunk is read and compared; an erasure-coded chunk is\n"
      "decoded from its fragments and each fragment checked against what the chunk\n"
      "encodes to (a missing, damaged or stale fragment is bad). One line per file:\n"
      "OK with its CRC32C, or BAD naming the chunk, the server (and copy or\n"
      "fragment) and what failed. Exit status 0 if every file is intact, 1 if any\n"
      "is bad.",
      {MetaFlag(), StateDirFlag(), CredentialFileFlag()},
      {"DIR"}};
}

int RunCkptVerify(const ParsedFlags& flags) {
  static const CommandSpec spec = CkptVerifySpec();
  const std::string& dir = flags.positionals()[0];
  int exit_status = 0;
  std::optional<Prepared> p = Prepare(spec, flags, dir, &exit_status);
  if (!p) return exit_status;
  std::cout << "verifying " << dir << " (" << StateLine(dir) << "): " << p->files.size() << " file"
            << (p->files.size() == 1 ? "" : "s") << std::endl;
  uint64_t bytes = 0, chunks = 0, bad_chunks = 0;
  std::vector<std::string> bad_files;
  for (const std::string& name : p->files) {
    FileCheck f = p->reader->CheckFile(dir, name);
    bytes += f.size;
    chunks += f.chunks.size();
    if (f.ok()) {
      std::cout << "OK   " << f.path << "  " << FormatBytes(f.size) << ", " << f.chunks.size()
                << " chunk" << (f.chunks.size() == 1 ? "" : "s") << ", crc32c " << Hex(f.crc32c)
                << "\n";
      continue;
    }
    bad_files.push_back(f.path);
    std::cout << "BAD  " << f.path << "  " << FormatBytes(f.size) << "\n";
    bool any_chunk = false;
    for (const ChunkCheck& c : f.chunks) {
      if (c.status.ok()) continue;
      any_chunk = true;
      ++bad_chunks;
      std::cout << "       " << c.status.message() << "\n";
    }
    if (!any_chunk) std::cout << "       " << f.status.message() << "\n";
  }
  std::cout << "verified " << p->files.size() << " file" << (p->files.size() == 1 ? "" : "s")
            << ", " << chunks << " chunk" << (chunks == 1 ? "" : "s") << ", " << FormatBytes(bytes)
            << ": ";
  if (bad_files.empty()) {
    std::cout << "all intact\n";
    return 0;
  }
  std::cout << bad_files.size() << " file" << (bad_files.size() == 1 ? "" : "s") << " BAD ("
            << bad_chunks << " chunk" << (bad_chunks == 1 ? "" : "s") << ")\n";
  std::cerr
      << "ckptfs ckpt verify: " << dir << " is damaged: " << absl::StrJoin(bad_files, ", ")
      << " (a chunk failing its CRC32C is damaged on the server's disk: restore the file "
         "from another checkpoint, or, for one bad copy or fragment of a file with replicas or "
         "erasure coding, run `ckptfs repair`; an unreachable server: check `ckptfs "
         "status`)\n";
  return 1;
}

}  // namespace ckptfs::tools
