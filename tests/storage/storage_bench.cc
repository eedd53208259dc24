// storage_bench: throughput and CPU cost of one ckptfs-storage process over
// loopback. Starts the given binary on a fresh data directory, then
// `--clients` connections each WRITE `--chunks` chunks of `--chunk_mb` MiB
// (replace) and READ them back, with `--depth` requests in flight per
// connection (1: strict request-reply, what any server speaks). Prints GB/s
// of each phase and the server's CPU seconds (utime + stime from
// /proc/PID/stat) per GiB moved. Not a test: a measuring tool, run by hand.
//
//   storage_bench --server=build/bin/ckptfs-storage --clients=8 --chunks=32
//
// Measuring starts once the server answers a PING and every client has
// written and read `--warmup_chunks` chunks, so start-up work and lazily
// allocated buffers are left out.
//
// The client side verifies nothing but reply headers (READ payload CRCs
// are not recomputed) so that its CPU use does not hide the server's.
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/time/clock.h"
#include "common/crc32c.h"
#include "common/frame.h"
#include "common/tcp.h"
#include "proto/data.pb.h"

ABSL_FLAG(std::string, server, "", "ckptfs-storage binary to measure");
ABSL_FLAG(std::string, server_args, "", "extra flags for it, comma-separated");
ABSL_FLAG(std::string, dir, "/tmp", "where to make the data directory");
ABSL_FLAG(int, clients, 8, "connections, one thread pair each");
ABSL_FLAG(int, chunks, 32, "chunks each client writes and reads");
ABSL_FLAG(int, chunk_mb, 4, "chunk size in MiB");
ABSL_FLAG(int, depth, 1, "requests in flight per connection");
ABSL_FLAG(int, port, 7391, "port for the server");
ABSL_FLAG(bool, read, true, "after writing, read everything back");
ABSL_FLAG(int, warmup_chunks, 2,
          "chunks each client writes and reads before measuring (not counted), so that "
          "a server allocating buffers lazily is measured warm");

namespace ckptfs {
namespace {

double CpuSeconds(pid_t pid) {
  std::ifstream in(absl::StrCat("/proc/", pid, "/stat"));
  std::string line;
  std::getline(in, line);
  // Fields after the parenthesised command name; utime and stime are the
  // 14th and 15th fields of the whole line.
  const size_t close = line.rfind(')');
  std::vector<std::string> fields = absl::StrSplit(line.substr(close + 2), ' ');
  const double ticks = static_cast<double>(::sysconf(_SC_CLK_TCK));
  return (std::strtod(fields[11].c_str(), nullptr) + std::strtod(fields[12].c_str(), nullptr)) /
         ticks;
}

std::string Frame(const data::RequestHeader& header, size_t payload_len) {
  std::string out(kFramePrefixSize, '\0');
  header.AppendToString(&out);
  EncodeFramePrefix(
      {static_cast<uint32_t>(out.size() - kFramePrefixSize), static_cast<uint32_t>(payload_len)},
      out.data());
  return out;
}

// One connection: a sender thread keeps `depth` requests in flight, the
// calling thread reads the replies.
bool RunClient(const HostPort& server, int client, bool write, const std::string& payload,
               uint32_t payload_crc, int chunks, int depth, std::string& sink) {
  auto fd = ConnectTcp(server, absl::Seconds(10));
  if (!fd.ok()) {
    std::fprintf(stderr, "connect: %s\n", std::string(fd.status().message()).c_str());
    return false;
  }
  SetSocketTimeouts(fd->get(), absl::Seconds(60)).IgnoreError();
  std::atomic<int> answered{0};
  std::atomic<bool> failed{false};
  std::thread sender([&] {
    for (int i = 0; i < chunks && !failed; ++i) {
      while (i - answered.load() >= depth && !failed) std::this_thread::yield();
      data::RequestHeader request;
      request.set_request_id(static_cast<uint64_t>(i) + 1);
      request.set_ino(1000 + client);
      request.set_chunk_index(i);
      if (write) {
        request.set_op(data::WRITE);
        request.set_replace(true);
        request.set_payload_crc32c(payload_crc);
      } else {
        request.set_op(data::READ);
        request.set_length(static_cast<uint32_t>(payload.size()));
      }
      std::string head = Frame(request, write ? payload.size() : 0);
      iovec iov[2] = {{head.data(), head.size()},
                      {const_cast<char*>(payload.data()), write ? payload.size() : 0}};
      if (!SendAll(fd->get(), iov, write ? 2 : 1).ok()) failed = true;
    }
  });
  for (int i = 0; i < chunks && !failed; ++i) {
    data::ResponseHeader reply;
    auto prefix = ReadFrameHead(fd->get(), reply);
    if (!prefix.ok() || reply.error() != 0 ||
        !RecvAll(fd->get(), sink.data(), prefix->payload_len).ok()) {
      std::fprintf(stderr, "reply: %s %s\n",
                   prefix.ok() ? "" : std::string(prefix.status().message()).c_str(),
                   reply.message().c_str());
      failed = true;
      break;
    }
    ++answered;
  }
  sender.join();
  return !failed;
}

int Main() {
  const std::string binary = absl::GetFlag(FLAGS_server);
  const int clients = absl::GetFlag(FLAGS_clients);
  const int chunks = absl::GetFlag(FLAGS_chunks);
  const size_t chunk = size_t(absl::GetFlag(FLAGS_chunk_mb)) << 20;
  const int depth = absl::GetFlag(FLAGS_depth);
  const int port = absl::GetFlag(FLAGS_port);
  std::string dir = absl::StrCat(absl::GetFlag(FLAGS_dir), "/storage-bench.XXXXXX");
  if (::mkdtemp(dir.data()) == nullptr) return 1;
  std::vector<std::string> args = {binary, absl::StrCat("--listen=127.0.0.1:", port),
                                   "--data_dir=" + dir, "--log_level=warning"};
  for (absl::string_view extra :
       absl::StrSplit(absl::GetFlag(FLAGS_server_args), ',', absl::SkipEmpty())) {
    args.emplace_back(extra);
  }
  const pid_t pid = ::fork();
  if (pid == 0) {
    std::vector<char*> argv;
    for (auto& a : args) argv.push_back(a.data());
    argv.push_back(nullptr);
    ::execv(argv[0], argv.data());
    ::_exit(127);
  }
  const HostPort server{"127.0.0.1", static_cast<uint16_t>(port)};
  // Up means answering: a server may listen before it has finished
  // starting (allocating its buffers), and that must not be measured.
  bool up = false;
  for (int i = 0; i < 200 && !up; ++i) {
    auto fd = ConnectTcp(server, absl::Seconds(1));
    if (fd.ok()) {
      SetSocketTimeouts(fd->get(), absl::Seconds(30)).IgnoreError();
      data::RequestHeader ping;
      ping.set_request_id(1);
      ping.set_op(data::PING);
      data::ResponseHeader reply;
      up = WriteFrame(fd->get(), ping, nullptr, 0).ok() && ReadFrameHead(fd->get(), reply).ok();
    }
    if (!up) absl::SleepFor(absl::Milliseconds(50));
  }
  int rc = 0;
  if (up) {
    std::string payload(chunk, '\0');
    for (size_t i = 0; i < chunk; ++i) payload[i] = static_cast<char>(i * 2654435761u >> 13);
    const uint32_t crc = Crc32c(payload.data(), payload.size());
    const double gib = double(clients) * chunks * double(chunk) / double(1u << 30);
    if (const int warmup = absl::GetFlag(FLAGS_warmup_chunks); warmup > 0) {
      std::vector<std::thread> threads;
      for (int c = 0; c < clients; ++c) {
        threads.emplace_back([&, c] {
          std::string own(chunk, '\0');
          RunClient(server, c, true, payload, crc, warmup, 1, own);
          RunClient(server, c, false, payload, crc, warmup, 1, own);
        });
      }
      for (auto& t : threads) t.join();
    }
    for (bool write : {true, false}) {
      if (!write && !absl::GetFlag(FLAGS_read)) break;
      std::vector<std::string> sinks(clients, std::string(chunk, '\0'));
      std::atomic<int> failures{0};
      const double cpu0 = CpuSeconds(pid);
      const absl::Time t0 = absl::Now();
      std::vector<std::thread> threads;
      for (int c = 0; c < clients; ++c) {
        threads.emplace_back([&, c] {
          if (!RunClient(server, c, write, payload, crc, chunks, depth, sinks[c])) ++failures;
        });
      }
      for (auto& t : threads) t.join();
      const double seconds = absl::ToDoubleSeconds(absl::Now() - t0);
      const double cpu = CpuSeconds(pid) - cpu0;
      std::printf(
          "%s %s clients=%d depth=%d chunk=%zuMiB: %.2f GB/s (%.2f GiB in %.2f s), "
          "server CPU %.2f s = %.3f s/GiB%s\n",
          write ? "WRITE" : "READ ", binary.c_str(), clients, depth, chunk >> 20,
          gib * double(1u << 30) / seconds / 1e9, gib, seconds, cpu, cpu / gib,
          failures ? " FAILED" : "");
      if (failures) rc = 1;
    }
  } else {
    std::fprintf(stderr, "server did not come up\n");
    rc = 1;
  }
  ::kill(pid, SIGTERM);
  int status = 0;
  ::waitpid(pid, &status, 0);
  std::error_code ignored;
  std::filesystem::remove_all(dir, ignored);
  return rc;
}

}  // namespace
}  // namespace ckptfs

int main(int argc, char** argv) {
  absl::ParseCommandLine(argc, argv);
  return ckptfs::Main();
}
