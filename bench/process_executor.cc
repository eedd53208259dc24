// The process kind of RankExecutor (see rank_executor.h): one forked child
// per rank, a pipe per child carrying framed messages back:
//   kBytes  uint64 bytes moved since the last message
//   kDone   RankTimes
//   kError  int32 errno, int32 status code, message text
// Children send progress at most every 20 ms (or 8 MiB), so a small
// --io-size does not flood the parent.
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "bench/cpu.h"
#include "bench/interrupt.h"
#include "bench/rank_executor.h"
#include "common/errno_status.h"
#include "common/unique_fd.h"

namespace ckptfs::bench {

std::string DescribeRanks(const std::vector<int>& ranks, size_t of) {
  std::string text = ranks.size() == 1 ? "rank " : "ranks ";
  for (size_t i = 0; i < ranks.size() && i < 8; ++i) {
    absl::StrAppend(&text, i == 0 ? "" : ", ", ranks[i]);
  }
  if (ranks.size() > 8) absl::StrAppend(&text, ", ...");
  absl::StrAppend(&text, " (", ranks.size(), " of ", of, ")");
  return text;
}

int64_t MonotonicNowNs() {
  timespec ts{};
  ::clock_gettime(CLOCK_MONOTONIC, &ts);
  return int64_t{ts.tv_sec} * 1'000'000'000 + ts.tv_nsec;
}

namespace {

enum MessageType : uint32_t { kBytes = 1, kDone = 2, kError = 3 };

struct MessageHeader {
  uint32_t type;
  uint32_t size;  // payload bytes that follow
};

constexpr size_t kMaxErrorText = 2000;

// Writes all of `size` bytes or gives up (the parent is gone).
void WriteAll(int fd, const void* data, size_t size) {
  const char* p = static_cast<const char*>(data);
  while (size > 0) {
    const ssize_t n = ::write(fd, p, size);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return;
    p += n;
    size -= static_cast<size_t>(n);
  }
}

void SendMessage(int fd, MessageType type, const void* payload, size_t size) {
  // One write per message: below PIPE_BUF it is atomic and cheap.
  char buffer[sizeof(MessageHeader) + 8 + kMaxErrorText];
  const MessageHeader header{type, static_cast<uint32_t>(size)};
  std::memcpy(buffer, &header, sizeof(header));
  std::memcpy(buffer + sizeof(header), payload, size);
  WriteAll(fd, buffer, sizeof(header) + size);
}

// In the child: batches byte counts onto the pipe.
class PipeSink : public ProgressSink {
 public:
  explicit PipeSink(int fd) : fd_(fd) {}
  void OnBytes(uint64_t bytes) override {
    pending_ += bytes;
    const int64_t now = MonotonicNowNs();
    if (pending_ >= (uint64_t{8} << 20) || now - last_send_ns_ >= 20'000'000) {
      Flush();
      last_send_ns_ = now;
    }
  }
  void Flush() {
    if (pending_ == 0) return;
    SendMessage(fd_, kBytes, &pending_, sizeof(pending_));
    pending_ = 0;
  }

 private:
  int fd_;
  uint64_t pending_ = 0;
  int64_t last_send_ns_ = 0;
};

struct Child {
  pid_t pid = -1;
  int rank = 0;
  UniqueFd fd;  // read end
  std::string buffer;
  bool done = false;  // kDone or kError received
  bool reaped = false;
  RankTimes times;
  absl::Status error;
};

[[noreturn]] void RunChild(int rank, int write_fd, pid_t parent, const std::vector<Child>& earlier,
                           const std::string& root, const RankTask& task) {
  ::prctl(PR_SET_PDEATHSIG, SIGKILL);
  if (::getppid() != parent) ::_exit(1);
  // The parent handles Ctrl-C for everyone (and kills us).
  ::signal(SIGINT, SIG_IGN);
  ::signal(SIGTERM, SIG_DFL);
  for (const Child& child : earlier) ::close(child.fd.get());
  std::unique_ptr<RankIo> io = MakePosixRankIo(root);
  PipeSink sink(write_fd);
  absl::StatusOr<RankTimes> result = task(rank, *io, sink);
  sink.Flush();
  if (result.ok()) {
    SendMessage(write_fd, kDone, &*result, sizeof(RankTimes));
    ::_exit(0);
  }
  char payload[8 + kMaxErrorText];
  const int32_t err = ErrnoFromStatus(result.status());
  const int32_t code = static_cast<int32_t>(result.status().code());
  std::memcpy(payload, &err, 4);
  std::memcpy(payload + 4, &code, 4);
  const absl::string_view text = result.status().message().substr(0, kMaxErrorText);
  std::memcpy(payload + 8, text.data(), text.size());
  SendMessage(write_fd, kError, payload, 8 + text.size());
  ::_exit(1);
}

std::string DescribeWaitStatus(int status) {
  if (WIFSIGNALED(status)) {
    const int sig = WTERMSIG(status);
    return absl::StrCat("killed by signal ", sig, " (", ::strsignal(sig), ")");
  }
  if (WIFEXITED(status)) {
    return absl::StrCat("exited with status ", WEXITSTATUS(status), " before reporting a result");
  }
  return absl::StrCat("ended (wait status ", status, ")");
}

// Parses every complete message in child.buffer; adds kBytes to *bytes.
void ParseMessages(Child& child, uint64_t* bytes) {
  size_t pos = 0;
  while (child.buffer.size() - pos >= sizeof(MessageHeader)) {
    MessageHeader header;
    std::memcpy(&header, child.buffer.data() + pos, sizeof(header));
    if (child.buffer.size() - pos - sizeof(header) < header.size) break;
    const char* payload = child.buffer.data() + pos + sizeof(header);
    if (header.type == kBytes && header.size == sizeof(uint64_t)) {
      uint64_t n;
      std::memcpy(&n, payload, sizeof(n));
      *bytes += n;
    } else if (header.type == kDone && header.size == sizeof(RankTimes)) {
      std::memcpy(&child.times, payload, sizeof(RankTimes));
      child.done = true;
    } else if (header.type == kError && header.size >= 8) {
      int32_t err, code;
      std::memcpy(&err, payload, 4);
      std::memcpy(&code, payload + 4, 4);
      const std::string message =
          absl::StrCat("rank ", child.rank, ": ", absl::string_view(payload + 8, header.size - 8));
      child.error = err > 0 ? ErrnoStatus(err, message)
                            : absl::Status(static_cast<absl::StatusCode>(code), message);
      if (child.error.ok()) child.error = absl::UnknownError(message);
      child.done = true;
    } else {
      child.error = absl::InternalError(
          absl::StrCat("rank ", child.rank, ": garbled message from its process"));
      child.done = true;
    }
    pos += sizeof(header) + header.size;
  }
  child.buffer.erase(0, pos);
}

class ProcessExecutor : public RankExecutor {
 public:
  explicit ProcessExecutor(std::string root)
      : root_(std::move(root)), control_(MakePosixRankIo(root_)) {}

  absl::StatusOr<RankRun> Run(const std::vector<int>& ranks, const RankTask& task,
                              bool /*all_at_once: always*/, const SampleFn& sample) override {
    const CpuTime cpu_before = ChildrenCpu();
    std::vector<Child> children;
    children.reserve(ranks.size());
    const pid_t parent = ::getpid();
    absl::Status failure;
    for (int rank : ranks) {
      int fds[2];
      if (::pipe2(fds, O_CLOEXEC) != 0) {
        failure = SyscallError(errno, "pipe for a rank process");
        break;
      }
      const pid_t pid = ::fork();
      if (pid == 0) {
        ::close(fds[0]);
        RunChild(rank, fds[1], parent, children, root_, task);
      }
      ::close(fds[1]);
      if (pid < 0) {
        failure = SyscallError(errno, absl::StrCat("fork of rank ", rank));
        ::close(fds[0]);
        break;
      }
      Child child;
      child.pid = pid;
      child.rank = rank;
      child.fd = UniqueFd(fds[0]);
      children.push_back(std::move(child));
    }

    uint64_t bytes = 0;
    int done = 0;
    const int64_t start = MonotonicNowNs();
    int64_t next_sample = start + kSampleIntervalNs;
    size_t open = children.size();
    std::vector<pollfd> polls;
    std::vector<size_t> index;
    while (failure.ok() && open > 0) {
      if (InterruptRequested()) {
        failure = absl::CancelledError(absl::StrCat(
            "interrupted; ", DescribeRanks(Running(children), children.size()), " still running"));
        break;
      }
      if (phase_timeout_s_ > 0 && MonotonicNowNs() - start > phase_timeout_s_ * 1'000'000'000LL) {
        failure = absl::DeadlineExceededError(
            absl::StrCat(DescribeRanks(Running(children), children.size()), " still running after ",
                         phase_timeout_s_, " s (--phase-timeout)"));
        break;
      }
      polls.clear();
      index.clear();
      for (size_t i = 0; i < children.size(); ++i) {
        if (children[i].fd.valid()) {
          polls.push_back(pollfd{children[i].fd.get(), POLLIN, 0});
          index.push_back(i);
        }
      }
      const int64_t wait_ns = std::max<int64_t>(0, next_sample - MonotonicNowNs());
      const int ready = ::poll(polls.data(), polls.size(), static_cast<int>(wait_ns / 1'000'000));
      if (ready < 0 && errno != EINTR) {
        failure = SyscallError(errno, "poll on rank pipes");
        break;
      }
      for (size_t k = 0; ready > 0 && k < polls.size() && failure.ok(); ++k) {
        if (polls[k].revents == 0) continue;
        Child& child = children[index[k]];
        char chunk[16384];
        const ssize_t n = ::read(child.fd.get(), chunk, sizeof(chunk));
        if (n < 0 && errno == EINTR) continue;
        if (n > 0) {
          child.buffer.append(chunk, static_cast<size_t>(n));
          ParseMessages(child, &bytes);
          if (!child.error.ok()) failure = child.error;
          continue;
        }
        // End of file: the child has exited (or is exiting).
        child.fd.Reset();
        --open;
        int status = 0;
        while (::waitpid(child.pid, &status, 0) < 0 && errno == EINTR) {
        }
        child.reaped = true;
        ++done;
        if (!child.done) {
          failure = absl::AbortedError(
              absl::StrCat("rank ", child.rank, " died: ", DescribeWaitStatus(status)));
        }
      }
      const int64_t now = MonotonicNowNs();
      if (now >= next_sample) {
        sample(now, bytes, done);
        next_sample = now + kSampleIntervalNs;
      }
    }
    // Whatever happened, no child outlives Run.
    for (Child& child : children) {
      if (child.reaped) continue;
      if (!failure.ok()) ::kill(child.pid, SIGKILL);
      int status = 0;
      while (::waitpid(child.pid, &status, 0) < 0 && errno == EINTR) {
      }
      child.reaped = true;
    }
    if (!failure.ok()) return failure;
    sample(MonotonicNowNs(), bytes, done);

    RankRun run;
    const CpuTime used = ChildrenCpu() - cpu_before;
    run.rank_cpu_s = used.total_s();
    run.rank_system_cpu_s = used.system_s;
    for (const Child& child : children) run.ranks.push_back(RankRecord{child.rank, child.times});
    return run;
  }

  RankIo& ControlIo() override { return *control_; }
  bool ranks_are_processes() const override { return true; }
  void set_phase_timeout_s(int seconds) override { phase_timeout_s_ = seconds; }

 private:
  static std::vector<int> Running(const std::vector<Child>& children) {
    std::vector<int> running;
    for (const Child& child : children) {
      if (!child.reaped) running.push_back(child.rank);
    }
    return running;
  }

  std::string root_;
  std::unique_ptr<RankIo> control_;
  int phase_timeout_s_ = 0;
};

}  // namespace

std::unique_ptr<RankExecutor> MakeProcessExecutor(std::string root) {
  return std::make_unique<ProcessExecutor>(std::move(root));
}

}  // namespace ckptfs::bench
