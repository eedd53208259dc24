// client_transport_bench: the Client's chunk transports side by side on a
// running cluster. N writer threads each write a file of M MiB in 1 MiB
// writes, fsync and close it; then N readers read the files back. Prints
// GB/s and the CPU seconds per GiB of this process (the client) and of the
// daemons named by --daemon-pids. One Client per transport, in one process;
// rounds alternate between them and the medians close the report. Not a
// test: run it by hand on a running cluster, e.g.
//   client_transport_bench --meta 127.0.0.1:23000 --rounds 5
//       --daemon-pids $(grep -h '^daemon.*pid=' STATE_DIR/cluster.state | cut -d= -f2 | paste -sd,)
// Flags: --transports uring,blocking; --writers N (8); --mib M (256);
// --rounds R (3); --connections C (2, uring only).
#include <fcntl.h>
#include <sys/resource.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/time/clock.h"
#include "client/client.h"
#include "client/file.h"

namespace ckptfs::client {
namespace {

double ProcessCpuSeconds() {
  rusage usage{};
  ::getrusage(RUSAGE_SELF, &usage);
  return absl::ToDoubleSeconds(absl::DurationFromTimeval(usage.ru_utime) +
                               absl::DurationFromTimeval(usage.ru_stime));
}

// utime + stime of the given processes (the cluster's daemons), in seconds.
double DaemonCpuSeconds(const std::vector<int>& pids) {
  double total = 0;
  const double ticks = static_cast<double>(::sysconf(_SC_CLK_TCK));
  for (int pid : pids) {
    std::ifstream stat(absl::StrCat("/proc/", pid, "/stat"));
    std::string line;
    if (!std::getline(stat, line)) continue;
    const size_t close = line.rfind(')');
    if (close == std::string::npos) continue;
    // Fields after the name: state is the 3rd; utime and stime the 14th, 15th.
    std::vector<std::string> fields = absl::StrSplit(line.substr(close + 2), ' ');
    if (fields.size() < 13) continue;
    total += (std::atof(fields[11].c_str()) + std::atof(fields[12].c_str())) / ticks;
  }
  return total;
}

struct Phase {
  double seconds = 0;
  double client_cpu = 0;
  double daemon_cpu = 0;
};

template <typename Fn>
Phase Measure(const std::vector<int>& pids, int threads, Fn fn) {
  Phase phase;
  const double cpu0 = ProcessCpuSeconds();
  const double daemons0 = DaemonCpuSeconds(pids);
  const absl::Time start = absl::Now();
  std::vector<std::thread> workers;
  for (int i = 0; i < threads; ++i) workers.emplace_back([&fn, i] { fn(i); });
  for (std::thread& t : workers) t.join();
  phase.seconds = absl::ToDoubleSeconds(absl::Now() - start);
  phase.client_cpu = ProcessCpuSeconds() - cpu0;
  phase.daemon_cpu = DaemonCpuSeconds(pids) - daemons0;
  return phase;
}

struct Result {
  Phase write;
  Phase read;
};

// One round on one client: `writers` files of `file_bytes` written (1 MiB
// writes, fsync, close), read back, removed. Empty error on success.
std::string RunRound(Client& client, const std::vector<int>& pids, int writers, size_t file_bytes,
                     std::vector<std::unique_ptr<char[]>>& buffers, Result& result) {
  constexpr size_t kWrite = size_t{1} << 20;
  static int round = 0;
  const std::string dir = absl::StrCat("/transport-bench-", ::getpid(), "-", round++);
  auto made = client.MkdirAll(dir, 0755);
  if (!made.ok()) return absl::StrCat("mkdir: ", made.status().message());
  std::vector<std::string> errors(writers);
  auto path = [&](int i) { return absl::StrCat(dir, "/rank", i); };
  result.write = Measure(pids, writers, [&](int i) {
    auto file = client.OpenPath(path(i), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    if (!file.ok()) {
      errors[i] = std::string(file.status().message());
      return;
    }
    for (size_t at = 0; at < file_bytes; at += kWrite) {
      auto n = (*file)->Write(at, buffers[i].get(), kWrite);
      if (!n.ok()) {
        errors[i] = std::string(n.status().message());
        return;
      }
    }
    if (absl::Status s = (*file)->Fsync(); !s.ok()) errors[i] = std::string(s.message());
    if (absl::Status s = (*file)->Close(); !s.ok()) errors[i] = std::string(s.message());
  });
  result.read = Measure(pids, writers, [&](int i) {
    auto file = client.OpenPath(path(i), O_RDONLY, 0);
    if (!file.ok()) {
      errors[i] = std::string(file.status().message());
      return;
    }
    size_t total = 0;
    for (;;) {
      auto n = (*file)->Read(total, buffers[i].get(), kWrite);
      if (!n.ok()) {
        errors[i] = std::string(n.status().message());
        return;
      }
      if (*n == 0) break;
      total += *n;
    }
    if (total != file_bytes) errors[i] = absl::StrCat("read back ", total, " bytes");
    if (buffers[i][12345] != static_cast<char>((12345 * 31 + i) & 0xff)) {
      errors[i] = "read back wrong bytes";
    }
    (void)(*file)->Close();
  });
  for (int i = 0; i < writers; ++i) {
    // Truncated first: the storage servers free the chunks now, not after
    // the service's orphan grace.
    if (auto attr = client.LookupPath(path(i)); attr.ok()) {
      meta::SetAttrRequest truncate;
      truncate.set_ino(attr->ino());
      truncate.set_valid(meta::SET_SIZE);
      truncate.set_size(0);
      (void)client.SetAttr(truncate);
    }
    (void)client.Unlink(made->ino(), absl::StrCat("rank", i));
  }
  (void)client.Rmdir(kRootIno, dir.substr(1));
  for (int i = 0; i < writers; ++i) {
    if (!errors[i].empty()) return absl::StrCat("rank ", i, ": ", errors[i]);
  }
  return "";
}

double Median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v.empty() ? 0 : v[v.size() / 2];
}

int Main(int argc, char** argv) {
  std::string meta = "127.0.0.1:23000";
  std::vector<std::string> transports = {"uring", "blocking"};
  int writers = 8;
  int mib = 256;
  int rounds = 3;
  int connections = 2;
  std::vector<int> pids;
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string flag = argv[i];
    const std::string value = argv[i + 1];
    if (flag == "--meta") {
      meta = value;
    } else if (flag == "--transports") {
      transports = absl::StrSplit(value, ',');
    } else if (flag == "--writers") {
      writers = std::atoi(value.c_str());
    } else if (flag == "--mib") {
      mib = std::atoi(value.c_str());
    } else if (flag == "--rounds") {
      rounds = std::atoi(value.c_str());
    } else if (flag == "--connections") {
      connections = std::atoi(value.c_str());
    } else if (flag == "--daemon-pids") {
      for (absl::string_view pid : absl::StrSplit(value, ',')) {
        int n = 0;
        if (absl::SimpleAtoi(pid, &n)) pids.push_back(n);
      }
    } else {
      std::fprintf(stderr, "unknown flag %s\n", flag.c_str());
      return 2;
    }
  }
  std::vector<std::unique_ptr<Client>> clients;
  for (const std::string& transport : transports) {
    ClientOptions options;
    options.meta_address = meta;
    options.data_transport = transport == "blocking" ? ClientOptions::DataTransport::kBlocking
                                                     : ClientOptions::DataTransport::kUring;
    options.data_connections_per_server = connections;
    options.local_reads = false;  // the transports themselves, also on one host
    auto client = Client::Connect(options);
    if (!client.ok()) {
      std::fprintf(stderr, "%s\n", std::string(client.status().message()).c_str());
      return 1;
    }
    clients.push_back(*std::move(client));
  }
  constexpr size_t kWrite = size_t{1} << 20;
  const size_t file_bytes = static_cast<size_t>(mib) << 20;
  std::vector<std::unique_ptr<char[]>> buffers;
  for (int i = 0; i < writers; ++i) {
    buffers.push_back(std::make_unique<char[]>(kWrite));
    for (size_t j = 0; j < kWrite; ++j) buffers[i][j] = static_cast<char>((j * 31 + i) & 0xff);
  }
  const double gib = static_cast<double>(file_bytes) * writers / (1u << 30);
  const double gb = static_cast<double>(file_bytes) * writers / 1e9;
  // Per transport: write GB/s, write client s/GiB, write daemons s/GiB, and the same for read.
  std::vector<std::vector<std::vector<double>>> figures(transports.size(),
                                                        std::vector<std::vector<double>>(6));
  for (int round = 0; round < rounds; ++round) {
    for (size_t t = 0; t < transports.size(); ++t) {
      Result r;
      if (std::string error = RunRound(*clients[t], pids, writers, file_bytes, buffers, r);
          !error.empty()) {
        std::fprintf(stderr, "%s: %s\n", transports[t].c_str(), error.c_str());
        return 1;
      }
      const double row[6] = {gb / r.write.seconds,     r.write.client_cpu / gib,
                             r.write.daemon_cpu / gib, gb / r.read.seconds,
                             r.read.client_cpu / gib,  r.read.daemon_cpu / gib};
      for (int k = 0; k < 6; ++k) figures[t][k].push_back(row[k]);
      std::printf(
          "%-8s write %.2f GB/s client %.3f s/GiB daemons %.3f s/GiB | read %.2f GB/s "
          "client %.3f s/GiB daemons %.3f s/GiB\n",
          transports[t].c_str(), row[0], row[1], row[2], row[3], row[4], row[5]);
      std::fflush(stdout);
    }
  }
  std::printf("medians of %d rounds, %d writers x %d MiB:\n", rounds, writers, mib);
  for (size_t t = 0; t < transports.size(); ++t) {
    std::printf(
        "%-8s write %.2f GB/s client %.3f s/GiB daemons %.3f s/GiB | read %.2f GB/s "
        "client %.3f s/GiB daemons %.3f s/GiB\n",
        transports[t].c_str(), Median(figures[t][0]), Median(figures[t][1]), Median(figures[t][2]),
        Median(figures[t][3]), Median(figures[t][4]), Median(figures[t][5]));
  }
  return 0;
}

}  // namespace
}  // namespace ckptfs::client

int main(int argc, char** argv) { return ckptfs::client::Main(argc, argv); }
