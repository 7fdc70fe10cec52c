// tcp_iov_test.cc -- what one sendmsg or recvmsg of the TCP transport takes from a lane's queue
// (transport/tcp_iov.h): several parts per call, never more than TCP_IOV_PARTS of them nor more
// than TCP_SYSCALL_BYTES in all, the last one cut where the bytes run out, and the queue's front
// part taken from where it has got to.
#include <gtest/gtest.h>

#include <vector>

extern "C" {
#include "transport/tcp_iov.h"
}

namespace {

// A queue of parts of the given lengths over one buffer, linked in order.
struct Queue {
  std::vector<char> buf;
  std::vector<xfer_part_t> parts;
  explicit Queue(const std::vector<size_t>& lens) : parts(lens.size()) {
    size_t total = 0;
    for (size_t len : lens) total += len;
    buf.resize(total + 1);
    size_t at = 0;
    for (size_t i = 0; i < lens.size(); i++) {
      parts[i] = xfer_part_t{};
      parts[i].ptr = buf.data() + at;
      parts[i].left = lens[i];
      parts[i].next = i + 1 < lens.size() ? &parts[i + 1] : nullptr;
      at += lens[i];
    }
  }
  const xfer_part_t* head() const { return parts.empty() ? nullptr : &parts[0]; }
};

struct Taken {
  int n;
  size_t bytes;
  std::vector<size_t> lens;
};

Taken Gather(const xfer_part_t* head) {
  struct iovec iov[TCP_IOV_PARTS];
  Taken t{tcp_iov_gather(head, iov), 0, {}};
  for (int i = 0; i < t.n; i++) {
    t.bytes += iov[i].iov_len;
    t.lens.push_back(iov[i].iov_len);
  }
  return t;
}

TEST(TcpIov, SlicesOfAPipelineGoFourOf64KiBPerCall) {
  Queue q(std::vector<size_t>(16, 65536));
  Taken t = Gather(q.head());
  EXPECT_EQ(t.n, 4);
  EXPECT_EQ(t.bytes, TCP_SYSCALL_BYTES);
}

TEST(TcpIov, ALargeMessageGoesAQuarterMiBAtATime) {
  Queue q({(size_t)4 << 20});
  Taken t = Gather(q.head());
  ASSERT_EQ(t.n, 1);
  EXPECT_EQ(t.lens[0], TCP_SYSCALL_BYTES);
}

TEST(TcpIov, ThePartWhereTheBytesRunOutIsCut) {
  Queue q({100000, 100000, 100000, 100000});
  Taken t = Gather(q.head());
  EXPECT_EQ(t.lens, (std::vector<size_t>{100000, 100000, TCP_SYSCALL_BYTES - 200000}));
}

TEST(TcpIov, SmallPartsGoUpToTheBatchOfParts) {
  Queue q(std::vector<size_t>(40, 100));
  Taken t = Gather(q.head());
  EXPECT_EQ(t.n, TCP_IOV_PARTS);
  EXPECT_EQ(t.bytes, (size_t)TCP_IOV_PARTS * 100);
}

TEST(TcpIov, AHeaderAndItsFirstSliceLeaveTogether) {
  Queue q({64, 65536, 65536});
  Taken t = Gather(q.head());
  EXPECT_EQ(t.lens, (std::vector<size_t>{64, 65536, 65536}));
}

TEST(TcpIov, TheFrontPartIsTakenFromWhereItHasGot) {
  Queue q({300000, 1000});
  q.parts[0].ptr += 250000;  // a call before moved that much of it
  q.parts[0].left -= 250000;
  struct iovec iov[TCP_IOV_PARTS];
  ASSERT_EQ(tcp_iov_gather(q.head(), iov), 2);
  EXPECT_EQ(iov[0].iov_base, q.buf.data() + 250000);
  EXPECT_EQ(iov[0].iov_len, 50000u);
  EXPECT_EQ(iov[1].iov_len, 1000u);
}

TEST(TcpIov, AnEmptyQueueTakesNothing) { EXPECT_EQ(Gather(nullptr).n, 0); }

}  // namespace
