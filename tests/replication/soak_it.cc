// Soak: 32 writers save files for minutes while a
// storage server is killed (-9) and restarted every minute, then every byte
// is verified.
//
// A LocalCluster of 4 storage servers with two copies of every chunk. Each
// writer has its own libckptfs Client and directory /d/w<W>, and saves files
// f<N> in a loop (a few MiB, never a whole number of chunks, contents
// determined by (writer, N)): the even writers plain files in it, the odd
// ones into one-rank checkpoints c<K> there (kFilesPerCheckpoint files each,
// then a commit). Reader threads, each with its own Client, re-read files
// already saved while the servers die. Every CKPTFS_SOAK_KILL_EVERY_S
// (default 60; the first half a period in) the next storage server in turn
// is killed with SIGKILL and restarted CKPTFS_SOAK_DOWN_S later (default 10)
// on its old data.
//
// A save that failed (an error from create, write or close) or a commit that
// aborted is allowed and counted; an aborted checkpoint's files are removed
// by design (CheckpointStore::Abort), saved or not: its writer learns it
// from the commit. What is not allowed, a loss:
//   - a save whose close returned 0 that does not read back exact at the end
//     (through a fresh Client, all servers up), unless its checkpoint is
//     listed ABORTED (removed with it: counted, not read);
//   - a file of a checkpoint the metadata service lists as COMMITTED (the
//     metadata's "complete") that differs from its (writer, N) contents,
//     even one whose save failed; a committed checkpoint missing a file or
//     holding one no save made, or with other file and byte counts; a
//     commit that returned COMMITTED for a checkpoint not listed so;
//   - a read during the storm that returned 0 with bytes that differ.
//
// The run is long (CKPTFS_SOAK_SECONDS, default 300), so the test skips
// itself unless CKPTFS_SOAK=1 (CTest label "soak"):
//   CKPTFS_SOAK=1 ctest -L soak --output-on-failure
// Data is paced to CKPTFS_SOAK_MB_PER_S (MiB/s of all writers together,
// default 20; 0: as fast as they go) so that the disk holds what is saved:
// nothing is deleted before the final verification.
#include <fcntl.h>
#include <signal.h>
#include <unistd.h>

#include <atomic>
#include <cstdlib>
#include <random>
#include <thread>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/clock.h"
#include "common/errno_status.h"
#include "tests/replication/replication_support.h"

namespace ckptfs::replication {
namespace {

using ckptfs::testing::TestData;

constexpr int kWriters = 32;
constexpr int kReaders = 4;
constexpr int kVerifiers = 4;  // threads of the final verification
constexpr int kFilesPerCheckpoint = 4;
constexpr int kServers = 4;

int EnvInt(const char* name, int default_value) {
  const char* value = std::getenv(name);
  int parsed = 0;
  if (value == nullptr || !absl::SimpleAtoi(value, &parsed) || parsed < 0) return default_value;
  return parsed;
}

// Save N of `writer`: 1-3 MiB plus an odd tail, so never whole chunks (a
// lost tail shows in the size).
size_t SaveSize(int writer, int n) {
  size_t size = (size_t{1} + static_cast<size_t>(writer + n) % 3) << 20;
  size += 4099 * static_cast<size_t>(writer) + 17 * static_cast<size_t>(n) + 7;
  if (size % kChunk == 0) ++size;
  return size;
}
uint64_t SaveSeed(int writer, int n) {
  return (static_cast<uint64_t>(writer + 1) << 32) | static_cast<uint64_t>(n);
}
std::string SaveData(int writer, int n) {
  return TestData(SaveSize(writer, n), SaveSeed(writer, n));
}

struct Save {
  int writer = 0;
  int n = 0;
  int checkpoint = 0;
  uint64_t ino = 0;     // 0 when create failed
  absl::Status status;  // of create, the first failed write, or close
};

struct CommitResult {
  int writer = 0;
  int checkpoint = 0;
  // OK: CommitCheckpoint returned COMMITTED. Not attempted when mkdir,
  // the declaration or a file's create failed (the writer knows a file is
  // missing, and a rank does not commit what it did not write).
  bool attempted = false;
  absl::Status status;
};

// Where a read differs from what was saved, for the failure message.
std::string Difference(const std::string& got, const std::string& want) {
  size_t i = 0;
  while (i < got.size() && i < want.size() && got[i] == want[i]) ++i;
  std::string out = absl::StrCat("size ", got.size(), " (want ", want.size(), ")");
  if (i < got.size() && i < want.size()) {
    absl::StrAppend(&out, ", first difference at offset ", i, ": byte ",
                    static_cast<int>(static_cast<unsigned char>(got[i])), " (want ",
                    static_cast<int>(static_cast<unsigned char>(want[i])), "), chunk ", i / kChunk);
  }
  return out;
}

class SoakTest : public ReplicationTest {
 protected:
  // Records a loss (printed at the end, at most 50 of them).
  void Loss(std::string what) {
    absl::MutexLock lock(&mu_);
    ++losses_;
    if (loss_messages_.size() < 50) loss_messages_.push_back(std::move(what));
  }

  // Creates f<n> in `dir`, writes the save in 100,000-byte writes and
  // closes; counts the bytes writes accepted into bytes_written_.
  absl::Status SaveFile(client::Client& client, uint64_t dir, int writer, int n, uint64_t* ino) {
    const std::string data = SaveData(writer, n);
    auto created =
        client.Create(dir, absl::StrCat("f", n), 0644, 0, 0, O_WRONLY | O_CREAT | O_EXCL);
    if (!created.ok()) return created.status();
    *ino = created->attr.ino();
    for (size_t done = 0; done < data.size();) {
      const size_t len = std::min<size_t>(100000, data.size() - done);
      auto wrote = created->file->Write(done, data.data() + done, len);
      if (!wrote.ok()) {
        (void)created->file->Close();
        return wrote.status();
      }
      bytes_written_.fetch_add(len);
      done += len;
    }
    return created->file->Close();
  }

  // Reads the file `ino` that should hold save N of `writer`; a difference is
  // a loss. Returns whether it read back exact.
  bool VerifySave(client::Client& client, int writer, int n, uint64_t ino, absl::string_view why) {
    const std::string want = SaveData(writer, n);
    absl::StatusOr<std::string> got = ReadFile(client, ino);
    if (!got.ok()) {
      Loss(absl::StrCat(why, " w", writer, " f", n, " (inode ", ino, "): read ",
                        got.status().ToString()));
      return false;
    }
    if (*got != want) {
      Loss(
          absl::StrCat(why, " w", writer, " f", n, " (inode ", ino, "): ", Difference(*got, want)));
      return false;
    }
    bytes_verified_.fetch_add(want.size());
    return true;
  }

  absl::Mutex mu_;
  std::vector<Save> saves_ ABSL_GUARDED_BY(mu_);
  // Readers pick these: plain saves whose close returned 0, and the files of
  // checkpoints whose commit returned COMMITTED.
  std::vector<Save> saved_ ABSL_GUARDED_BY(mu_);
  std::vector<CommitResult> commits_ ABSL_GUARDED_BY(mu_);
  int losses_ ABSL_GUARDED_BY(mu_) = 0;
  std::vector<std::string> loss_messages_ ABSL_GUARDED_BY(mu_);
  std::atomic<uint64_t> bytes_written_{0};
  std::atomic<uint64_t> bytes_verified_{0};
  std::atomic<int> reads_ok_{0};
  std::atomic<int> reads_failed_{0};
  std::atomic<int> reads_wrong_{0};
};

TEST_F(SoakTest, WritersLoseNothingWhileStorageServersAreKilledAndRestarted) {
  if (std::getenv("CKPTFS_SOAK") == nullptr || std::string(std::getenv("CKPTFS_SOAK")) != "1") {
    GTEST_SKIP() << "the soak runs only when asked: CKPTFS_SOAK=1 ctest -L soak "
                    "--output-on-failure (CKPTFS_SOAK_SECONDS, default 300)";
  }
  const absl::Duration duration = absl::Seconds(EnvInt("CKPTFS_SOAK_SECONDS", 300));
  const absl::Duration kill_every =
      absl::Seconds(std::max(1, EnvInt("CKPTFS_SOAK_KILL_EVERY_S", 60)));
  const absl::Duration down = absl::Seconds(EnvInt("CKPTFS_SOAK_DOWN_S", 10));
  const double bytes_per_s_each = EnvInt("CKPTFS_SOAK_MB_PER_S", 20) * 1048576.0 / kWriters;
  ASSERT_NO_FATAL_FAILURE(StartCluster(kServers, 2));

  // Clients and run directories first: the cluster is not thread-safe, so
  // only this thread touches it once the threads run.
  std::vector<std::unique_ptr<client::Client>> writer_clients, reader_clients;
  std::vector<uint64_t> run_dirs;
  for (int w = 0; w < kWriters; ++w) {
    writer_clients.push_back(Connect());
    ASSERT_NE(writer_clients.back(), nullptr);
    auto dir = client_->Mkdir(dir_, absl::StrCat("w", w), 0755, 0, 0);
    ASSERT_TRUE(dir.ok()) << dir.status();
    run_dirs.push_back(dir->ino());
  }
  for (int r = 0; r < kReaders; ++r) {
    reader_clients.push_back(Connect());
    ASSERT_NE(reader_clients.back(), nullptr);
  }

  const absl::Time start = absl::Now();
  const absl::Time end = start + duration;
  std::atomic<bool> writers_done{false};
  // Sleeps until `until` or the end of the run, whichever is first.
  auto sleep_until = [&](absl::Time until) {
    for (absl::Time now = absl::Now(); now < until && now < end; now = absl::Now()) {
      absl::SleepFor(std::min(until - now, absl::Milliseconds(200)));
    }
  };

  std::vector<std::thread> threads;
  for (int w = 0; w < kWriters; ++w) {
    threads.emplace_back([&, w] {
      client::Client& client = *writer_clients[w];
      double bytes = 0;  // attempted, for the pacing
      int n = 0;
      auto pace = [&] {
        if (bytes_per_s_each > 0) sleep_until(start + absl::Seconds(bytes / bytes_per_s_each));
      };
      if (w % 2 == 0) {  // plain files
        for (; absl::Now() < end; ++n) {
          Save save;
          save.writer = w;
          save.n = n;
          save.checkpoint = -1;
          save.status = SaveFile(client, run_dirs[w], w, n, &save.ino);
          bytes += static_cast<double>(SaveSize(w, n));
          {
            absl::MutexLock lock(&mu_);
            saves_.push_back(save);
            if (save.status.ok()) saved_.push_back(save);
          }
          pace();
        }
        return;
      }
      for (int k = 0; absl::Now() < end; ++k) {
        auto dir = client.Mkdir(run_dirs[w], absl::StrCat("c", k), 0755, 0, 0);
        absl::Status declared = dir.status();
        if (dir.ok()) declared = client.DeclareCheckpoint(dir->ino(), 1).status();
        if (!declared.ok()) {
          {
            absl::MutexLock lock(&mu_);
            commits_.push_back({w, k, false, declared});
          }
          absl::SleepFor(absl::Milliseconds(100));
          continue;
        }
        absl::Status create_failed;
        std::vector<Save> made;
        for (int f = 0; f < kFilesPerCheckpoint && absl::Now() < end; ++f, ++n) {
          Save save;
          save.writer = w;
          save.n = n;
          save.checkpoint = k;
          save.status = SaveFile(client, dir->ino(), w, n, &save.ino);
          if (save.ino == 0) create_failed = save.status;
          bytes += static_cast<double>(SaveSize(w, n));
          made.push_back(save);
          {
            absl::MutexLock lock(&mu_);
            saves_.push_back(save);
          }
          pace();
        }
        // A write or close that failed marked its file damaged: the commit
        // must abort then (or, if it commits, the file must be exact).
        CommitResult commit{w, k, create_failed.ok(), create_failed};
        if (commit.attempted) commit.status = client.CommitCheckpoint(dir->ino(), 0).status();
        absl::MutexLock lock(&mu_);
        if (commit.attempted && commit.status.ok()) {
          for (const Save& save : made) {
            if (save.status.ok()) saved_.push_back(save);
          }
        }
        commits_.push_back(std::move(commit));
      }
    });
  }
  for (int r = 0; r < kReaders; ++r) {
    threads.emplace_back([&, r] {
      client::Client& client = *reader_clients[r];
      std::mt19937_64 random(r);
      while (!writers_done.load()) {
        Save save;
        {
          absl::MutexLock lock(&mu_);
          if (!saved_.empty()) save = saved_[random() % saved_.size()];
        }
        if (save.ino != 0) {
          absl::StatusOr<std::string> got = ReadFile(client, save.ino);
          if (!got.ok()) {
            reads_failed_.fetch_add(1);
          } else if (*got != SaveData(save.writer, save.n)) {
            reads_wrong_.fetch_add(1);
            Loss(absl::StrCat("read during the storm of w", save.writer, " f", save.n, " (inode ",
                              save.ino, "): ", Difference(*got, SaveData(save.writer, save.n))));
          } else {
            reads_ok_.fetch_add(1);
          }
        }
        absl::SleepFor(absl::Milliseconds(50));
      }
    });
  }

  // The faults: server i, i+1, ... killed half a period in and every period
  // after, each restarted `down` later (also when the run ends meanwhile).
  int kills = 0;
  std::vector<std::string> fault_errors;
  for (absl::Time next_kill = start + kill_every / 2; next_kill < end; next_kill += kill_every) {
    sleep_until(next_kill);
    if (absl::Now() >= end) break;
    const int server = kills % kServers;
    if (absl::Status s = cluster_->StopStorage(server, SIGKILL); !s.ok()) {
      fault_errors.push_back(s.ToString());
    }
    ++kills;
    absl::SleepFor(down);
    if (absl::Status s = cluster_->StartStorage(server); !s.ok())
      fault_errors.push_back(s.ToString());
  }
  sleep_until(end);
  for (size_t t = 0; t < kWriters; ++t) threads[t].join();
  writers_done.store(true);
  for (size_t t = kWriters; t < threads.size(); ++t) threads[t].join();
  const absl::Duration storm = absl::Now() - start;
  {
    // Each Client takes a while to close its connections: in parallel.
    std::vector<std::thread> closers;
    for (auto& c : writer_clients) closers.emplace_back([&c] { c.reset(); });
    for (auto& c : reader_clients) closers.emplace_back([&c] { c.reset(); });
    for (std::thread& t : closers) t.join();
  }
  std::cerr << "soak: clients closed " << absl::FormatDuration(absl::Now() - start - storm)
            << " after the storm\n";
  ASSERT_TRUE(fault_errors.empty()) << absl::StrJoin(fault_errors, "\n");
  ASSERT_TRUE(cluster_->WaitServersAlive(kServers).ok());
  std::cerr << "soak: all servers alive " << absl::FormatDuration(absl::Now() - start - storm)
            << " after the storm\n";

  // Every byte of every save whose close returned 0, through a fresh
  // Client, with every server up.
  std::unique_ptr<client::Client> verifier = Connect();
  ASSERT_NE(verifier, nullptr);
  std::vector<Save> saves;
  std::vector<CommitResult> commits;
  {
    absl::MutexLock lock(&mu_);
    saves = saves_;
    commits = commits_;
  }
  std::map<std::pair<int, int>, const Save*> by_name;  // (writer, n)
  int saves_ok = 0;
  for (const Save& s : saves) {
    by_name[{s.writer, s.n}] = &s;
    saves_ok += s.status.ok() ? 1 : 0;
  }
  const absl::Time verify_start = absl::Now();

  // Every checkpoint the metadata lists as committed: it holds exactly the
  // files its writer made there, each complete and exact (the saves whose
  // close returned 0 were read above; the others are read here).
  std::map<std::pair<int, int>, std::vector<int>> saves_in;  // (writer, checkpoint) -> n
  for (const Save& s : saves) saves_in[{s.writer, s.checkpoint}].push_back(s.n);
  int committed = 0, aborted = 0, other_state = 0, committed_failed_saves = 0;
  std::map<std::pair<int, int>, meta::CheckpointState> all_states;  // (writer, checkpoint)
  for (int w = 0; w < kWriters; ++w) {
    absl::StatusOr<meta::ListCheckpointsReply> list = verifier->ListCheckpoints(run_dirs[w]);
    ASSERT_TRUE(list.ok()) << list.status();
    std::map<int, meta::CheckpointState> states;
    for (const meta::CheckpointInfo& info : list->checkpoints()) {
      int k = -1;
      if (info.name().size() < 2 || !absl::SimpleAtoi(info.name().substr(1), &k)) {
        Loss(absl::StrCat("w", w, ": unexpected checkpoint ", info.name()));
        continue;
      }
      states[k] = info.state();
      all_states[{w, k}] = info.state();
      if (info.state() == meta::ABORTED) ++aborted;
      if (info.state() != meta::COMMITTED) {
        other_state += info.state() == meta::ABORTED ? 0 : 1;
        continue;
      }
      ++committed;
      const std::vector<int>& made = saves_in[{w, k}];
      if (info.files() != made.size()) {
        Loss(absl::StrCat("w", w, " c", k, " committed with ", info.files(),
                          " files, its writer made ", made.size()));
      }
      uint64_t want_bytes = 0;
      for (int n : made) want_bytes += SaveSize(w, n);
      if (info.bytes() != want_bytes) {
        Loss(absl::StrCat("w", w, " c", k, " committed with ", info.bytes(), " bytes, want ",
                          want_bytes));
      }
      auto entries = verifier->ReadDir(info.ino(), "", 1000);
      ASSERT_TRUE(entries.ok()) << entries.status();
      for (const meta::DirEntry& e : entries->entries()) {
        int n = -1;
        auto save = e.name().size() > 1 && absl::SimpleAtoi(e.name().substr(1), &n)
                        ? by_name.find({w, n})
                        : by_name.end();
        if (save == by_name.end() || save->second->checkpoint != k ||
            save->second->ino != e.ino()) {
          Loss(absl::StrCat("w", w, " c", k, " committed with a file no save made: ", e.name(),
                            " (inode ", e.ino(), ")"));
          continue;
        }
        if (!save->second->status.ok()) {
          // Its writer was told the save failed, yet the service calls it
          // complete: then it must be.
          ++committed_failed_saves;
          std::cerr << "w" << w << " c" << k << " committed with f" << n
                    << " whose save failed: " << save->second->status << "\n";
          VerifySave(*verifier, w, n, e.ino(), "committed (its save failed)");
        }
      }
      if (entries->entries_size() != static_cast<int>(made.size())) {
        Loss(absl::StrCat("w", w, " c", k, " committed with ", entries->entries_size(),
                          " entries, its writer made ", made.size()));
      }
    }
    for (const CommitResult& c : commits) {
      if (c.writer != w || !c.status.ok()) continue;
      auto state = states.find(c.checkpoint);
      if (state == states.end() || state->second != meta::COMMITTED) {
        Loss(absl::StrCat(
            "w", w, " c", c.checkpoint, ": its commit returned COMMITTED, the service lists it as ",
            state == states.end() ? "missing" : meta::CheckpointState_Name(state->second)));
      }
    }
  }
  // Then every save whose close returned 0, but for those of checkpoints
  // listed ABORTED (removed with them).
  int removed_with_abort = 0;
  for (const Save& s : saves) {
    if (!s.status.ok() || s.checkpoint < 0) continue;
    auto state = all_states.find({s.writer, s.checkpoint});
    if (state != all_states.end() && state->second == meta::ABORTED) ++removed_with_abort;
  }
  std::atomic<size_t> next{0};
  std::vector<std::thread> verifiers;
  for (int v = 0; v < kVerifiers; ++v) {
    verifiers.emplace_back([&] {
      for (size_t i = next.fetch_add(1); i < saves.size(); i = next.fetch_add(1)) {
        const Save& s = saves[i];
        if (!s.status.ok()) continue;
        if (s.checkpoint >= 0) {
          auto state = all_states.find({s.writer, s.checkpoint});
          if (state != all_states.end() && state->second == meta::ABORTED) continue;
        }
        VerifySave(*verifier, s.writer, s.n, s.ino, "saved");
      }
    });
  }
  for (std::thread& t : verifiers) t.join();
  const absl::Duration verify_time = absl::Now() - verify_start;

  int commits_ok = 0, commits_failed = 0, not_committed = 0;
  for (const CommitResult& c : commits) {
    if (!c.attempted) {
      ++not_committed;
    } else {
      (c.status.ok() ? commits_ok : commits_failed)++;
    }
  }
  int losses = 0;
  std::vector<std::string> messages;
  {
    absl::MutexLock lock(&mu_);
    losses = losses_;
    messages = loss_messages_;
  }
  std::cerr << absl::StrCat(
      "soak: ", absl::FormatDuration(storm), " storm, ", kWriters, " writers, ", kReaders,
      " readers; saves ok ", saves_ok, " (", removed_with_abort,
      " of them removed with their aborted checkpoint)", " / failed ",
      saves.size() - static_cast<size_t>(saves_ok), "; checkpoints committed ", committed, " (",
      committed_failed_saves, " files of them saves that failed) / aborted ", aborted, " / other ",
      other_state, " (commits returned ok ", commits_ok, " / an error ", commits_failed,
      ", not attempted ", not_committed, "); reads ok ", reads_ok_.load(), " / failed ",
      reads_failed_.load(), " / wrong ", reads_wrong_.load(), "; kills ", kills,
      " (each restarted ", absl::FormatDuration(down), " later); bytes written ",
      bytes_written_.load(), ", bytes verified ", bytes_verified_.load(), " in ",
      absl::FormatDuration(verify_time), "; losses ", losses, "\n");
  for (const std::string& m : messages) std::cerr << "  loss: " << m << "\n";
  EXPECT_EQ(losses, 0);
  EXPECT_EQ(reads_wrong_.load(), 0);
  // The soak did soak: saves went through, and servers died under them.
  EXPECT_GT(saves_ok, 0);
  EXPECT_GT(committed, 0);
  if (duration > kill_every / 2) {
    EXPECT_GT(kills, 0);
  }
}

}  // namespace
}  // namespace ckptfs::replication
