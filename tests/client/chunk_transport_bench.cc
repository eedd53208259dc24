// chunk_transport_bench: the chunk transports alone (no Client, no write
// buffers) against a running cluster's storage servers. T threads write
// C chunks of S MiB spread over the servers (as the IoExecutor would), then
// read them back; rounds alternate between the transports. Prints GB/s and
// this process's CPU seconds per GiB for each, then the medians; trims what
// it wrote. Not a test: run it by hand, e.g.
//   chunk_transport_bench --meta 127.0.0.1:23000 --rounds 5
// Flags: --transports uring,blocking; --threads T (16); --chunks C (512);
// --chunk-mib S (4); --rounds R (3); --connections N (2, uring only);
// --offload-kib K (uring only: UringDataLoop::Options::offload_bytes).
#include <sys/resource.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/time/clock.h"
#include "client/blocking_chunk_transport.h"
#include "client/grpc_meta_client.h"
#include "client/uring_chunk_transport.h"

namespace ckptfs::client {
namespace {

double ProcessCpuSeconds() {
  rusage usage{};
  ::getrusage(RUSAGE_SELF, &usage);
  return absl::ToDoubleSeconds(absl::DurationFromTimeval(usage.ru_utime) +
                               absl::DurationFromTimeval(usage.ru_stime));
}

double Median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v.empty() ? 0 : v[v.size() / 2];
}

int Main(int argc, char** argv) {
  std::string meta_address = "127.0.0.1:23000";
  std::vector<std::string> names = {"uring", "blocking"};
  int threads = 16;
  int chunks = 512;
  int chunk_mib = 4;
  int rounds = 3;
  int connections = 2;
  int64_t offload_kib = -1;  // the loop's default
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string flag = argv[i];
    const std::string value = argv[i + 1];
    if (flag == "--meta") {
      meta_address = value;
    } else if (flag == "--transports") {
      names = absl::StrSplit(value, ',');
    } else if (flag == "--threads") {
      threads = std::atoi(value.c_str());
    } else if (flag == "--chunks") {
      chunks = std::atoi(value.c_str());
    } else if (flag == "--chunk-mib") {
      chunk_mib = std::atoi(value.c_str());
    } else if (flag == "--rounds") {
      rounds = std::atoi(value.c_str());
    } else if (flag == "--connections") {
      connections = std::atoi(value.c_str());
    } else if (flag == "--offload-kib") {
      offload_kib = std::atoll(value.c_str());
    } else {
      std::fprintf(stderr, "unknown flag %s\n", flag.c_str());
      return 2;
    }
  }
  GrpcMetaClient meta(meta_address, absl::Seconds(10));
  auto servers = meta.ListServers(meta::Empty());
  if (!servers.ok() || servers->servers().empty()) {
    std::fprintf(stderr, "no storage servers at %s\n", meta_address.c_str());
    return 1;
  }
  std::vector<uint32_t> ids;
  for (const auto& s : servers->servers()) ids.push_back(s.id());
  std::vector<std::unique_ptr<ChunkTransport>> transports;
  for (const std::string& name : names) {
    if (name == "blocking") {
      transports.push_back(std::make_unique<BlockingChunkTransport>(&meta, absl::Seconds(60)));
    } else {
      UringChunkTransport::Options options;
      options.connections_per_server = connections;
      if (offload_kib >= 0) options.loop.offload_bytes = static_cast<size_t>(offload_kib) << 10;
      auto made = UringChunkTransport::Create(&meta, absl::Seconds(60), options);
      if (!made.ok()) {
        std::fprintf(stderr, "%s\n", std::string(made.status().message()).c_str());
        return 1;
      }
      transports.push_back(*std::move(made));
    }
  }
  const size_t chunk_bytes = static_cast<size_t>(chunk_mib) << 20;
  // One buffer per thread, touched before timing.
  std::vector<std::unique_ptr<char[]>> buffers;
  for (int t = 0; t < threads; ++t) {
    buffers.push_back(std::make_unique<char[]>(chunk_bytes));
    std::memset(buffers[t].get(), 'a' + t % 26, chunk_bytes);
  }
  const uint64_t ino = (uint64_t{1} << 40) + static_cast<uint64_t>(::getpid());
  const double gib = static_cast<double>(chunk_bytes) * chunks / (1u << 30);
  const double gb = static_cast<double>(chunk_bytes) * chunks / 1e9;
  std::vector<std::vector<std::vector<double>>> figures(names.size(),
                                                        std::vector<std::vector<double>>(4));
  for (int round = 0; round < rounds; ++round) {
    for (size_t k = 0; k < transports.size(); ++k) {
      ChunkTransport& transport = *transports[k];
      std::atomic<int> failures{0};
      double row[4];
      for (int phase = 0; phase < 2; ++phase) {
        std::atomic<int> next{0};
        const double cpu0 = ProcessCpuSeconds();
        const absl::Time start = absl::Now();
        std::vector<std::thread> workers;
        for (int t = 0; t < threads; ++t) {
          workers.emplace_back([&, t] {
            for (int c = next++; c < chunks; c = next++) {
              const uint32_t server = ids[c % ids.size()];
              if (phase == 0) {
                if (!transport.WriteChunk(server, ino, c, 0, buffers[t].get(), chunk_bytes, true)
                         .ok()) {
                  ++failures;
                }
              } else {
                auto n = transport.ReadChunk(server, ino, c, 0, buffers[t].get(), chunk_bytes);
                if (!n.ok() || *n != chunk_bytes) ++failures;
              }
            }
          });
        }
        for (std::thread& w : workers) w.join();
        const double seconds = absl::ToDoubleSeconds(absl::Now() - start);
        row[phase * 2] = gb / seconds;
        row[phase * 2 + 1] = (ProcessCpuSeconds() - cpu0) / gib;
      }
      if (failures > 0) {
        std::fprintf(stderr, "%s: %d requests failed\n", names[k].c_str(), failures.load());
        return 1;
      }
      for (int f = 0; f < 4; ++f) figures[k][f].push_back(row[f]);
      std::printf("%-8s write %.2f GB/s %.3f CPU s/GiB | read %.2f GB/s %.3f CPU s/GiB\n",
                  names[k].c_str(), row[0], row[1], row[2], row[3]);
      std::fflush(stdout);
    }
  }
  for (uint32_t id : ids) (void)transports[0]->TrimChunks(id, ino, 0, chunk_bytes);
  std::printf("medians of %d rounds, %d threads, %d chunks of %d MiB:\n", rounds, threads, chunks,
              chunk_mib);
  for (size_t k = 0; k < names.size(); ++k) {
    std::printf("%-8s write %.2f GB/s %.3f CPU s/GiB | read %.2f GB/s %.3f CPU s/GiB\n",
                names[k].c_str(), Median(figures[k][0]), Median(figures[k][1]),
                Median(figures[k][2]), Median(figures[k][3]));
  }
  return 0;
}

}  // namespace
}  // namespace ckptfs::client

int main(int argc, char** argv) { return ckptfs::client::Main(argc, argv); }
