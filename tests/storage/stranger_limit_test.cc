// StrangerLimit: a host's unauthenticated connections beyond the limit
// push its oldest silent one out (shut down), one with bytes waiting is
// spared, other hosts are not touched, and a ticket released
// (authenticated or closed) frees its place.
#include "server/storage/stranger_limit.h"

#include <sys/socket.h>
#include <unistd.h>

#include <vector>

#include "gtest/gtest.h"

namespace ckptfs::storage {
namespace {

// A connected socket pair; `peer_end` sees EOF once `end` is shut down.
struct Pair {
  int end = -1;
  int peer_end = -1;
  Pair() {
    int fds[2];
    EXPECT_EQ(::socketpair(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK, 0, fds), 0);
    end = fds[0];
    peer_end = fds[1];
  }
  ~Pair() {
    ::close(end);
    ::close(peer_end);
  }
  // Whether `end` was shut down (the peer reads EOF, not EAGAIN).
  bool ShutDown() const {
    char byte;
    return ::recv(peer_end, &byte, 1, 0) == 0;
  }
};

TEST(StrangerLimitTest, TheOldestOfAHostGoesWhenItOpensOneTooMany) {
  StrangerLimit limit(2);
  Pair a, b, c, other;
  StrangerLimit::Ticket ta = limit.Admit("10.0.0.1:1000", a.end);
  StrangerLimit::Ticket tb = limit.Admit("10.0.0.1:1001", b.end);
  StrangerLimit::Ticket tother = limit.Admit("10.0.0.2:1000", other.end);
  EXPECT_FALSE(a.ShutDown());
  StrangerLimit::Ticket tc = limit.Admit("10.0.0.1:1002", c.end);
  EXPECT_TRUE(a.ShutDown());
  EXPECT_FALSE(b.ShutDown());
  EXPECT_FALSE(c.ShutDown());
  EXPECT_FALSE(other.ShutDown());
  EXPECT_EQ(limit.evicted(), 1u);
}

TEST(StrangerLimitTest, AConnectionThatSentSomethingIsSpared) {
  StrangerLimit limit(2);
  Pair client, stranger, newer;
  StrangerLimit::Ticket tc = limit.Admit("10.0.0.1:1", client.end);
  StrangerLimit::Ticket ts = limit.Admit("10.0.0.1:2", stranger.end);
  // The client's HELLO waits in its socket, not read yet.
  ASSERT_EQ(::send(client.peer_end, "hello", 5, 0), 5);
  StrangerLimit::Ticket tn = limit.Admit("10.0.0.1:3", newer.end);
  EXPECT_FALSE(client.ShutDown());
  EXPECT_TRUE(stranger.ShutDown());
  // When every one has sent something, the oldest goes.
  ASSERT_EQ(::send(newer.peer_end, "x", 1, 0), 1);
  Pair last;
  StrangerLimit::Ticket tl = limit.Admit("10.0.0.1:4", last.end);
  char buf[8];
  EXPECT_EQ(::recv(client.peer_end, buf, sizeof(buf), 0), 0);  // shut down
  EXPECT_EQ(limit.evicted(), 2u);
}

TEST(StrangerLimitTest, AReleasedTicketFreesItsPlace) {
  StrangerLimit limit(1);
  Pair a, b;
  {
    StrangerLimit::Ticket ta = limit.Admit("[::1]:5", a.end);
    ta.Release();  // authenticated
    StrangerLimit::Ticket tb = limit.Admit("[::1]:6", b.end);
    EXPECT_FALSE(a.ShutDown());
  }  // tb goes (closed)
  Pair c;
  StrangerLimit::Ticket tc = limit.Admit("[::1]:7", c.end);
  EXPECT_FALSE(b.ShutDown());
  EXPECT_EQ(limit.evicted(), 0u);
}

TEST(StrangerLimitTest, AMovedTicketReleasesOnce) {
  StrangerLimit limit(1);
  Pair a, b;
  StrangerLimit::Ticket moved;
  {
    StrangerLimit::Ticket ta = limit.Admit("h:1", a.end);
    moved = std::move(ta);
    EXPECT_TRUE(moved.held());
    EXPECT_FALSE(ta.held());  // NOLINT(bugprone-use-after-move): moved-from is empty
  }
  // Still counted: the next one of the host pushes it out.
  StrangerLimit::Ticket tb = limit.Admit("h:2", b.end);
  EXPECT_TRUE(a.ShutDown());
}

TEST(StrangerLimitTest, HostOfPeer) {
  EXPECT_EQ(HostOfPeer("127.0.0.1:7000"), "127.0.0.1");
  EXPECT_EQ(HostOfPeer("[::1]:7000"), "::/64");
  EXPECT_EQ(HostOfPeer("?"), "?");
  // A host's many IPv6 addresses count as one.
  EXPECT_EQ(HostOfPeer("[2001:db8:0:1::5]:1"), "2001:db8:0:1::/64");
  EXPECT_EQ(HostOfPeer("[2001:db8:0:1:aaaa::9]:2"), "2001:db8:0:1::/64");
  EXPECT_NE(HostOfPeer("[2001:db8:0:2::5]:1"), "2001:db8:0:1::/64");
  EXPECT_EQ(HostOfPeer("[::ffff:10.0.0.7]:3"), "10.0.0.7");
}

}  // namespace
}  // namespace ckptfs::storage
