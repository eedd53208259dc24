// RunBarrierStorm (barrier_storm.h): setup with blocking calls, then the
// commit storm with gRPC's callback API — one outstanding call per rank (a
// client's long poll or a no_wait arrival), no thread per rank.
#include "bench/barrier_storm.h"

#include <grpcpp/grpcpp.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <memory>
#include <random>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/clock.h"
#include "bench/figures.h"
#include "common/errno_status.h"
#include "common/grpc_status.h"
#include "proto/meta.grpc.pb.h"

namespace ckptfs::bench {
namespace {

constexpr uint64_t kRootIno = 1;
constexpr absl::Duration kSetupDeadline = absl::Seconds(30);
constexpr uint32_t kCommitWaitMs = 120000;

std::unique_ptr<meta::MetaService::Stub> NewStub(const std::string& address, int index) {
  grpc::ChannelArguments args;
  // A distinct argument per channel gives each its own connection.
  args.SetInt("ckptfs.bench.channel", index);
  args.SetInt(GRPC_ARG_USE_LOCAL_SUBCHANNEL_POOL, 1);
  args.SetMaxReceiveMessageSize(-1);
  return meta::MetaService::NewStub(
      grpc::CreateCustomChannel(address, grpc::InsecureChannelCredentials(), args));
}

void SetDeadline(grpc::ClientContext& context, absl::Duration timeout) {
  context.set_deadline(absl::ToChronoTime(absl::Now() + timeout));
}

absl::Status Failed(const grpc::Status& status, absl::string_view what) {
  return FromGrpcStatus(status, what);
}

// Creates directory `name` under the root; EEXIST if it is taken (the
// caller picks a fresh name per storm).
absl::StatusOr<uint64_t> MakeDirectory(meta::MetaService::Stub& stub, const std::string& name) {
  meta::MkdirRequest request;
  request.set_parent(kRootIno);
  request.set_name(name);
  request.set_mode(0755);
  meta::AttrReply reply;
  grpc::ClientContext context;
  SetDeadline(context, kSetupDeadline);
  grpc::Status status = stub.Mkdir(&context, request, &reply);
  if (!status.ok()) return Failed(status, absl::StrCat("mkdir /", name));
  return reply.attr().ino();
}

// A rank's file: created with a writer handle and released, as a close does.
absl::Status MakeClosedFile(meta::MetaService::Stub& stub, uint64_t dir, const std::string& name,
                            uint64_t writer) {
  meta::CreateRequest create;
  create.set_parent(dir);
  create.set_name(name);
  create.set_mode(0644);
  create.set_exclusive(true);
  create.set_writer_handle(writer);
  meta::CreateReply created;
  {
    grpc::ClientContext context;
    SetDeadline(context, kSetupDeadline);
    grpc::Status status = stub.Create(&context, create, &created);
    if (!status.ok()) return Failed(status, absl::StrCat("create ", name));
  }
  meta::CommitWriteRequest release;
  release.set_ino(created.attr().ino());
  release.set_release_writer(writer);
  meta::AttrReply reply;
  grpc::ClientContext context;
  SetDeadline(context, kSetupDeadline);
  grpc::Status status = stub.CommitWrite(&context, release, &reply);
  if (!status.ok()) return Failed(status, absl::StrCat("close ", name));
  return absl::OkStatus();
}

// One rank's outstanding commit.
struct RankCall {
  grpc::ClientContext context;
  meta::CommitCheckpointRequest request;
  meta::CheckpointInfo reply;
  absl::Time sent;
  absl::Time answered;
  grpc::Status status;
};

}  // namespace

absl::StatusOr<BarrierStormResult> RunBarrierStorm(const BarrierStormOptions& options) {
  if (options.ranks == 0 || options.channels <= 0 || options.ranks_per_client == 0 ||
      options.name.empty()) {
    return ErrnoStatus(EINVAL,
                       "barrier storm: ranks, channels, ranks_per_client and name must be set");
  }
  std::vector<std::unique_ptr<meta::MetaService::Stub>> stubs;
  for (int i = 0; i < options.channels; ++i) stubs.push_back(NewStub(options.meta_address, i));
  meta::MetaService::Stub& setup = *stubs[0];

  absl::StatusOr<uint64_t> dir = MakeDirectory(setup, options.name);
  if (!dir.ok()) return dir.status();
  std::mt19937_64 random(std::random_device{}());
  for (uint32_t rank = 0; rank < options.ranks; ++rank) {
    for (uint32_t f = 0; f < options.files_per_rank; ++f) {
      absl::Status made =
          MakeClosedFile(setup, *dir, absl::StrCat("rank_", rank, "_", f), random() | 1);
      if (!made.ok()) return made;
    }
  }

  BarrierStormResult result;
  result.ranks = options.ranks;
  if (options.before_declare) options.before_declare();
  {
    meta::DeclareCheckpointRequest declare;
    declare.set_ino(*dir);
    declare.set_ranks(options.ranks);
    meta::CheckpointInfo info;
    grpc::ClientContext context;
    SetDeadline(context, kSetupDeadline);
    const absl::Time start = absl::Now();
    grpc::Status status = setup.DeclareCheckpoint(&context, declare, &info);
    result.declare_s = absl::ToDoubleSeconds(absl::Now() - start);
    if (!status.ok()) return Failed(status, absl::StrCat("declare /", options.name));
  }

  const uint32_t per_client = options.ranks_per_client;
  // The first rank of each client holds its long poll; the others arrive.
  auto polls = [per_client](uint32_t rank) { return rank % per_client == 0; };
  std::vector<std::unique_ptr<RankCall>> calls(options.ranks);
  absl::Mutex mu;
  uint32_t finished = 0;      // guarded by mu
  bool all_finished = false;  // guarded by mu
  const uint32_t total = options.ranks;
  for (uint32_t rank = 0; rank < options.ranks; ++rank) {
    auto call = std::make_unique<RankCall>();
    call->request.set_ino(*dir);
    call->request.set_rank(rank);
    if (polls(rank)) {
      call->request.set_wait_ms(kCommitWaitMs);
      SetDeadline(call->context, absl::Milliseconds(kCommitWaitMs) + kSetupDeadline);
    } else {
      call->request.set_no_wait(true);
      SetDeadline(call->context, kSetupDeadline);
    }
    calls[rank] = std::move(call);
  }
  for (uint32_t rank = 0; rank < options.ranks; ++rank) {
    RankCall* call = calls[rank].get();
    call->sent = absl::Now();
    auto on_reply = [call, &mu, &finished, &all_finished, total](grpc::Status s) {
      call->answered = absl::Now();
      absl::MutexLock lock(&mu);
      call->status = std::move(s);
      all_finished = ++finished == total;
    };
    // A client's commits share its channel.
    stubs[(rank / per_client) % stubs.size()]->async()->CommitCheckpoint(
        &call->context, &call->request, &call->reply, std::move(on_reply));
  }
  {
    absl::MutexLock lock(&mu);
    mu.Await(absl::Condition(&all_finished));
  }
  const absl::Time first_sent = calls.front()->sent;
  const absl::Time last_sent = calls.back()->sent;
  result.ranks_per_client = per_client;
  result.arrivals_s = absl::ToDoubleSeconds(last_sent - first_sent);
  std::vector<double> release;
  release.reserve(calls.size());
  for (uint32_t rank = 0; rank < options.ranks; ++rank) {
    const RankCall& call = *calls[rank];
    if (!call.status.ok()) return Failed(call.status, absl::StrCat("commit of rank ", rank));
    if (!polls(rank)) {
      if (call.reply.state() == meta::ABORTED) {
        return ErrnoStatus(EIO, absl::StrCat("the arrival of rank ", rank, " answered ABORTED"));
      }
      continue;
    }
    ++result.long_polls;
    if (call.reply.state() != meta::COMMITTED) {
      return ErrnoStatus(EIO, absl::StrCat("commit of rank ", rank, " answered state ",
                                           meta::CheckpointState_Name(call.reply.state()),
                                           " (a long poll ran out: raise the wait)"));
    }
  }
  for (uint32_t rank = 0; rank < options.ranks; ++rank) {
    const RankCall& poll = *calls[rank - rank % per_client];
    release.push_back(absl::ToDoubleSeconds(poll.answered - last_sent));
  }
  result.release_p50_s = Percentile(release, 50);
  result.release_p99_s = Percentile(release, 99);
  result.release_max_s = *std::max_element(release.begin(), release.end());
  return result;
}

}  // namespace ckptfs::bench
