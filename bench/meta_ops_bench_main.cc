// ckptfs-meta-bench: metadata operations per second of one or more
// metadata services, side by side in one run (RocksDB vs etcd).
// Through libckptfs, as a mount would issue them:
//   create   create + close of empty files, all in one directory (a DCP
//            checkpoint writes every rank's file into one directory), from
//            --threads threads;
//   stat     a name lookup of each of those files (what stat(2) costs on a
//            mount with entry_timeout 0);
//   readdir  full listings of that directory (--files entries), paged as
//            the mount pages them.
// Each target gets a fresh directory; targets are run in turn, --repeat
// times, alternating, and the table gives the median of the repeats.
//
//   ckptfs-meta-bench --meta rocksdb=127.0.0.1:7000 --meta etcd=127.0.0.1:7100
//   ckptfs-meta-bench --meta 127.0.0.1:7000 --files 10000 --threads 16 --repeat 3
//
// Each target needs at least one storage server registered (files are
// created with a layout), nothing is written to them. scripts/
// bench-meta-backends.sh starts both backends and runs this.
#include <fcntl.h>

#include <algorithm>
#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <iostream>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/string_view.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "client/client.h"
#include "client/file.h"
#include "tools/table.h"

namespace ckptfs::bench {
namespace {

using client::Client;
using client::ClientOptions;
using client::kRootIno;

struct Target {
  std::string label;
  std::string address;
};

struct Options {
  std::vector<Target> targets;
  int files = 10000;
  int threads = 16;
  int repeat = 3;
  int listings = 5;
};

int Usage(const std::string& problem) {
  std::cerr << "ckptfs-meta-bench: " << problem << "\n"
            << "usage: ckptfs-meta-bench --meta [LABEL=]HOST:PORT [--meta ...] [--files N]"
               " [--threads T] [--repeat R] [--listings L]\n";
  return 2;
}

// Runs fn(i) for i in [0, n) on `threads` threads, stopping early once a
// call returns false; false if any did.
bool ParallelFor(int n, int threads, const std::function<bool(int)>& fn) {
  std::atomic<int> next{0};
  std::atomic<bool> failed{false};
  std::vector<std::thread> pool;
  for (int t = 0; t < threads; ++t) {
    pool.emplace_back([&] {
      for (int i = next.fetch_add(1); i < n && !failed.load(); i = next.fetch_add(1)) {
        if (!fn(i)) failed.store(true);
      }
    });
  }
  for (std::thread& t : pool) t.join();
  return !failed.load();
}

// ops/s of create, stat, readdir (listings/s and entries/s) for one round.
struct Round {
  double create_per_s = 0;
  double stat_per_s = 0;
  double listing_ms = 0;
};

absl::StatusOr<Round> RunRound(Client& client, const Options& options, int round) {
  const std::string dir_name =
      absl::StrCat("meta-bench-", absl::ToUnixMicros(absl::Now()), "-", round);
  absl::StatusOr<meta::Attr> dir = client.Mkdir(kRootIno, dir_name, 0755, 0, 0);
  if (!dir.ok()) return dir.status();
  const uint64_t dir_ino = dir->ino();
  Round result;
  std::string error;
  std::mutex error_mu;
  auto note = [&](const absl::Status& status) {
    std::lock_guard<std::mutex> lock(error_mu);
    if (error.empty()) error = std::string(status.message());
    return false;
  };

  absl::Time start = absl::Now();
  bool ok = ParallelFor(options.files, options.threads, [&](int i) {
    absl::StatusOr<Client::Created> created = client.Create(
        dir_ino, absl::StrCat("rank_", i, ".distcp"), 0644, 0, 0, O_CREAT | O_EXCL | O_WRONLY);
    if (!created.ok()) return note(created.status());
    absl::Status closed = created->file->Close();
    return closed.ok() ? true : note(closed);
  });
  if (!ok) return absl::InternalError(absl::StrCat("create: ", error));
  result.create_per_s = options.files / absl::ToDoubleSeconds(absl::Now() - start);

  start = absl::Now();
  ok = ParallelFor(options.files, options.threads, [&](int i) {
    absl::StatusOr<meta::Attr> attr = client.Lookup(dir_ino, absl::StrCat("rank_", i, ".distcp"));
    return attr.ok() ? true : note(attr.status());
  });
  if (!ok) return absl::InternalError(absl::StrCat("stat: ", error));
  result.stat_per_s = options.files / absl::ToDoubleSeconds(absl::Now() - start);

  start = absl::Now();
  for (int l = 0; l < options.listings; ++l) {
    std::string after;
    int entries = 0;
    for (;;) {
      absl::StatusOr<meta::ReadDirReply> page = client.ReadDir(dir_ino, after, 1024);
      if (!page.ok()) return page.status();
      entries += page->entries_size();
      if (page->entries_size() > 0) after = page->entries(page->entries_size() - 1).name();
      if (!page->more()) break;
    }
    if (entries != options.files) {
      return absl::InternalError(
          absl::StrCat("readdir listed ", entries, " entries, not ", options.files));
    }
  }
  result.listing_ms = absl::ToDoubleMilliseconds(absl::Now() - start) / options.listings;
  return result;
}

double Median(std::vector<double> values) {
  std::sort(values.begin(), values.end());
  return values.empty() ? 0 : values[values.size() / 2];
}

int Main(int argc, char** argv) {
  Options options;
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    auto value = [&]() -> std::string { return i + 1 < argc ? argv[++i] : ""; };
    int* number = arg == "--files"      ? &options.files
                  : arg == "--threads"  ? &options.threads
                  : arg == "--repeat"   ? &options.repeat
                  : arg == "--listings" ? &options.listings
                                        : nullptr;
    if (arg == "--meta") {
      const std::string spec = value();
      if (spec.empty()) return Usage("--meta needs [LABEL=]HOST:PORT");
      const size_t eq = spec.find('=');
      options.targets.push_back(eq == std::string::npos
                                    ? Target{spec, spec}
                                    : Target{spec.substr(0, eq), spec.substr(eq + 1)});
    } else if (number != nullptr) {
      if (!absl::SimpleAtoi(value(), number) || *number <= 0) {
        return Usage(arg + " needs a positive number");
      }
    } else if (arg == "--help" || arg == "-h") {
      return Usage("metadata operations per second");
    } else {
      return Usage("unknown argument " + arg);
    }
  }
  if (options.targets.empty()) return Usage("give at least one --meta");

  std::vector<std::unique_ptr<Client>> clients;
  for (const Target& target : options.targets) {
    ClientOptions client_options;
    client_options.meta_address = target.address;
    absl::StatusOr<std::unique_ptr<Client>> client = Client::Connect(client_options);
    if (!client.ok()) {
      std::cerr << "ckptfs-meta-bench: " << target.label << " (" << target.address
                << "): " << client.status().message() << "\n";
      return 1;
    }
    clients.push_back(*std::move(client));
  }
  std::map<std::string, std::vector<Round>> rounds;
  for (int r = 0; r < options.repeat; ++r) {
    for (size_t t = 0; t < options.targets.size(); ++t) {
      absl::StatusOr<Round> round = RunRound(*clients[t], options, r);
      if (!round.ok()) {
        std::cerr << "ckptfs-meta-bench: " << options.targets[t].label << ": "
                  << round.status().message() << "\n";
        return 1;
      }
      std::cerr << absl::StrFormat("  %s round %d: create %.0f/s, stat %.0f/s, readdir %.1f ms\n",
                                   options.targets[t].label, r + 1, round->create_per_s,
                                   round->stat_per_s, round->listing_ms);
      rounds[options.targets[t].label].push_back(*round);
    }
  }
  std::vector<std::vector<std::string>> rows = {{"BACKEND", "CREATE+CLOSE/s", "STAT/s",
                                                 absl::StrCat("READDIR ", options.files, " (ms)"),
                                                 "READDIR entries/s"}};
  for (const Target& target : options.targets) {
    std::vector<double> create, stat, listing;
    for (const Round& round : rounds[target.label]) {
      create.push_back(round.create_per_s);
      stat.push_back(round.stat_per_s);
      listing.push_back(round.listing_ms);
    }
    const double ms = Median(listing);
    rows.push_back({target.label, absl::StrFormat("%.0f", Median(create)),
                    absl::StrFormat("%.0f", Median(stat)), absl::StrFormat("%.1f", ms),
                    absl::StrFormat("%.0f", options.files / (ms / 1000))});
  }
  std::cout << absl::StrFormat("%d files in one directory, %d threads, median of %d rounds\n",
                               options.files, options.threads, options.repeat)
            << tools::FormatTable(rows);
  return 0;
}

}  // namespace
}  // namespace ckptfs::bench

int main(int argc, char** argv) { return ckptfs::bench::Main(argc, argv); }
