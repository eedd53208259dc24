// errno <-> absl::Status <-> grpc::Status: the errno survives each hop, even
// where two errnos share a canonical code.
#include "common/errno_status.h"

#include <cerrno>

#include "common/grpc_status.h"
#include "gtest/gtest.h"

namespace ckptfs {
namespace {

TEST(ErrnoStatusTest, KeepsErrnosThatShareACode) {
  const absl::Status not_empty = ErrnoStatus(ENOTEMPTY, "rmdir d");
  const absl::Status is_dir = ErrnoStatus(EISDIR, "open d");
  EXPECT_EQ(not_empty.code(), is_dir.code());
  EXPECT_EQ(ErrnoFromStatus(not_empty), ENOTEMPTY);
  EXPECT_EQ(ErrnoFromStatus(is_dir), EISDIR);
  EXPECT_EQ(not_empty.message(), "rmdir d");
}

TEST(ErrnoStatusTest, OkIsZeroAndPlainStatusesMapByCode) {
  EXPECT_EQ(ErrnoFromStatus(absl::OkStatus()), 0);
  EXPECT_EQ(ErrnoFromStatus(absl::NotFoundError("x")), ENOENT);
  EXPECT_EQ(ErrnoFromStatus(absl::UnavailableError("x")), EIO);
}

TEST(ErrnoStatusTest, SyscallErrorSaysWhat) {
  const absl::Status s = SyscallError(ENOSPC, "write chunk 3");
  EXPECT_EQ(ErrnoFromStatus(s), ENOSPC);
  EXPECT_NE(s.message().find("write chunk 3"), absl::string_view::npos);
}

TEST(GrpcStatusTest, ErrnoCrossesTheRpcBoundary) {
  for (int err : {ENOENT, ENOTEMPTY, EISDIR, ENAMETOOLONG, EXDEV, EBADMSG}) {
    const absl::Status back = FromGrpcStatus(ToGrpcStatus(ErrnoStatus(err, "op")), "Op");
    EXPECT_EQ(ErrnoFromStatus(back), err);
  }
  EXPECT_TRUE(FromGrpcStatus(ToGrpcStatus(absl::OkStatus()), "Op").ok());
}

TEST(GrpcStatusTest, TransportFailuresReadAsIoOrTimeout) {
  const absl::Status unavailable =
      FromGrpcStatus(grpc::Status(grpc::StatusCode::UNAVAILABLE, "down"), "Lookup");
  EXPECT_EQ(ErrnoFromStatus(unavailable), EIO);
  EXPECT_NE(unavailable.message().find("Lookup"), absl::string_view::npos);
  const absl::Status deadline =
      FromGrpcStatus(grpc::Status(grpc::StatusCode::DEADLINE_EXCEEDED, "slow"), "Lookup");
  EXPECT_EQ(ErrnoFromStatus(deadline), ETIMEDOUT);
}

}  // namespace
}  // namespace ckptfs
