// any_source_test.cc -- receives from WEFT_ANY_SOURCE: several senders racing into one receiver
// (sources reported, each sender's order kept), TCP peers never connected to the receiver, tags,
// a count mismatch, the async form, a dead or silent sender (an error within the timeout), and
// the refusal inside a larger group.
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <thread>
#include <vector>

#include "tests/collectives_mp/rank_body.h"
#include "tests/harness/mp_harness.h"

namespace {

constexpr int kMsgs = 4;  // per sender

// What sender `rank` puts in its message `msg`: every element names both.
int32_t stamp(int rank, int msg, size_t i) { return (int32_t)(rank * 100000 + msg * 1000 + i); }

// Every rank but `receiver` sends kMsgs messages of `count` elements to it at once; the receiver
// takes all of them with weft_recv_any and checks that each reported source matches the data and
// that each sender's messages come in the order sent. Then a collective still lines up.
std::string race(int rank, int n, weft_comm_t* comm, int receiver, size_t count) {
  std::vector<int32_t> buf(count);
  if (rank != receiver) {
    for (int msg = 0; msg < kMsgs; msg++) {
      for (size_t i = 0; i < count; i++) buf[i] = stamp(rank, msg, i);
      if (weft_send(buf.data(), count, WEFT_INT32, receiver, comm, nullptr) != WEFT_SUCCESS)
        return weft_last_error();
    }
  } else {
    std::vector<int> next(n, 0);  // per sender: the message expected next
    for (int k = 0; k < kMsgs * (n - 1); k++) {
      int source = -1;
      if (weft_recv_any(buf.data(), count, WEFT_INT32, 0, &source, comm, nullptr) != WEFT_SUCCESS)
        return "receive " + std::to_string(k) + ": " + weft_last_error();
      if (source < 0 || source >= n || source == receiver)
        return "receive " + std::to_string(k) + ": source " + std::to_string(source);
      for (size_t i = 0; i < count; i++)
        if (buf[i] != stamp(source, next[source], i))
          return "receive " + std::to_string(k) + " (count " + std::to_string(count) +
                 "): reported source " + std::to_string(source) + " message " +
                 std::to_string(next[source]) + ", but element " + std::to_string(i) + " is " +
                 std::to_string(buf[i]);
      next[source]++;
    }
  }
  return check_all_reduce(comm, WEFT_FLOAT32, WEFT_SUM, 64, false);
}

// Receiver 0: over TCP the senders above rank 1 (and at 5 ranks, rank 3 too) were never
// connected to it before, and wait for it to connect as the lower rank.
TEST(AnySource, SendersRaceIntoOneReceiver) {
  for (const char* transport : {"shm", "tcp"})
    for (int n : {2, 3, 4, 5}) {
      auto res = mp_run(
          n,
          [&](int rank, int n, int port) -> std::string {
            setenv("WEFT_TRANSPORT", transport, 1);
            weft_comm_t* comm;
            std::string err = join(rank, n, port, &comm);
            if (!err.empty()) return err;
            int receiver = 0;
            for (size_t count : {(size_t)1, (size_t)3000, (size_t)70000}) {
              err = race(rank, n, comm, receiver, count);
              if (!err.empty()) break;
            }
            weft_comm_destroy(comm);
            return err;
          },
          60000);
      EXPECT_EQ(mp_summary(res), "") << transport << ", " << n << " ranks";
    }
}

// Rank 1's head message has tag 5 and rank 2's tag 6: a receive of tag 6 takes rank 2's and
// leaves rank 1's for the receive of tag 5; weft_recv and weft_recv_tagged take WEFT_ANY_SOURCE.
TEST(AnySource, TagsMatchAndOthersStay) {
  auto res = mp_run(
      3,
      [](int rank, int n, int port) -> std::string {
        weft_comm_t* comm;
        std::string err = join(rank, n, port, &comm);
        if (!err.empty()) return err;
        int32_t v = rank * 10 + 4 + rank;  // rank 1: 15, rank 2: 26
        // Rank 1's message lies in its stream to rank 0 before rank 2 sends (a send this small
        // completes once written there), and a collective may not sync them: p2p traffic still
        // waiting on a stream would meet the collective's.
        int32_t go = 0;
        if (rank == 2 && weft_recv(&go, 1, WEFT_INT32, 1, comm, nullptr) != WEFT_SUCCESS)
          return weft_last_error();
        if (rank > 0 &&
            weft_send_tagged(&v, 1, WEFT_INT32, 0, 4 + rank, comm, nullptr) != WEFT_SUCCESS)
          return weft_last_error();
        if (rank == 1 && weft_send(&go, 1, WEFT_INT32, 2, comm, nullptr) != WEFT_SUCCESS)
          return weft_last_error();
        if (rank == 2 && weft_send(&v, 1, WEFT_INT32, 0, comm, nullptr) != WEFT_SUCCESS)
          return weft_last_error();
        if (rank == 0) {
          int32_t got = 0;
          int source = -1;
          if (weft_recv_any(&got, 1, WEFT_INT32, 6, &source, comm, nullptr) != WEFT_SUCCESS)
            return weft_last_error();
          if (source != 2 || got != 26)
            return "tag 6: source " + std::to_string(source) + ", value " + std::to_string(got);
          if (weft_recv_tagged(&got, 1, WEFT_INT32, WEFT_ANY_SOURCE, 5, comm, nullptr) !=
              WEFT_SUCCESS)
            return weft_last_error();
          if (got != 15) return "tag 5: value " + std::to_string(got);
          if (weft_recv(&got, 1, WEFT_INT32, WEFT_ANY_SOURCE, comm, nullptr) != WEFT_SUCCESS)
            return weft_last_error();
          if (got != 26) return "tag 0: value " + std::to_string(got);
        }
        err = check_all_reduce(comm, WEFT_INT32, WEFT_SUM, 10, true);
        weft_comm_destroy(comm);
        return err;
      },
      60000);
  EXPECT_EQ(mp_summary(res), "");
}

// Racing senders: the message that arrives first is taken, even where the round robin would
// look at the other sender first (the last match was rank 1, so rank 2 comes next in turn).
TEST(AnySource, FirstToArriveWins) {
  for (const char* transport : {"shm", "tcp"}) {
    auto res = mp_run(
        3,
        [&](int rank, int n, int port) -> std::string {
          setenv("WEFT_TRANSPORT", transport, 1);
          weft_comm_t* comm;
          std::string err = join(rank, n, port, &comm);
          if (!err.empty()) return err;
          int32_t v = rank, go = 0;
          if (rank == 1) {
            for (int k = 0; k < 2; k++)
              if (weft_send(&v, 1, WEFT_INT32, 0, comm, nullptr) != WEFT_SUCCESS)
                return weft_last_error();
            if (weft_send(&go, 1, WEFT_INT32, 2, comm, nullptr) != WEFT_SUCCESS)
              return weft_last_error();
          } else if (rank == 2) {
            if (weft_recv(&go, 1, WEFT_INT32, 1, comm, nullptr) != WEFT_SUCCESS)
              return weft_last_error();
            usleep(200 * 1000);  // rank 1's second message has been waiting this long
            if (weft_send(&v, 1, WEFT_INT32, 0, comm, nullptr) != WEFT_SUCCESS)
              return weft_last_error();
          } else {
            std::string order;
            for (int k = 0; k < 3; k++) {
              int source = -1;
              if (weft_recv_any(&v, 1, WEFT_INT32, 0, &source, comm, nullptr) != WEFT_SUCCESS)
                return weft_last_error();
              if (v != source)
                return "value " + std::to_string(v) + " from " + std::to_string(source);
              order += std::to_string(source);
            }
            if (order != "112") return "sources in the order " + order + ", want 112";
          }
          err = check_all_reduce(comm, WEFT_INT32, WEFT_SUM, 4, false);
          weft_comm_destroy(comm);
          return err;
        },
        60000);
    EXPECT_EQ(mp_summary(res), "") << transport;
  }
}

// A message of another tag is never taken: the receive runs into its timeout, naming it.
TEST(AnySource, NoMessageOfTheTagTimesOut) {
  auto res = mp_run(
      2,
      [](int rank, int n, int port) -> std::string {
        setenv("WEFT_TIMEOUT_MS", "1000", 1);
        weft_comm_t* comm;
        std::string err = join(rank, n, port, &comm);
        if (!err.empty()) return err;
        int32_t v = 7;
        if (rank == 1) {
          if (weft_send_tagged(&v, 1, WEFT_INT32, 0, 3, comm, nullptr) != WEFT_SUCCESS)
            return weft_last_error();
          usleep(2000 * 1000);  // stays alive (and connected) past rank 0's timeout
          weft_comm_abort(comm);
          return "";
        }
        auto t0 = std::chrono::steady_clock::now();
        int source = -1;
        weft_result_t r = weft_recv_any(&v, 1, WEFT_INT32, 4, &source, comm, nullptr);
        double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
        std::string msg = weft_last_error();
        weft_comm_abort(comm);
        if (r != WEFT_ERR_TIMEOUT) return "result " + std::to_string(r) + ": " + msg;
        if (s > 2.0) return "gave up after " + std::to_string(s) + " s";
        if (msg.find("any source") == std::string::npos || msg.find("tag 4") == std::string::npos)
          return "unclear message: " + msg;
        return "";
      },
      60000);
  EXPECT_EQ(mp_summary(res), "");
}

TEST(AnySource, CountMismatchIsReported) {
  for (const char* transport : {"shm", "tcp"}) {
    auto res = mp_run(
        2,
        [&](int rank, int n, int port) -> std::string {
          setenv("WEFT_TRANSPORT", transport, 1);
          weft_comm_t* comm;
          std::string err = join(rank, n, port, &comm);
          if (!err.empty()) return err;
          std::vector<float> buf(100, 1.0f);
          int source = -1;
          weft_result_t r =
              rank == 1 ? weft_send(buf.data(), 100, WEFT_FLOAT32, 0, comm, nullptr)
                        : weft_recv_any(buf.data(), 99, WEFT_FLOAT32, 0, &source, comm, nullptr);
          if (rank == 1) return "";  // the sender may finish before the receiver checks
          if (r != WEFT_ERR_MISMATCH) return "result " + std::to_string(r);
          std::string msg = weft_last_error();
          return msg.find("rank 1 sends 100 elements to rank 0") != std::string::npos &&
                         msg.find("expects 99") != std::string::npos &&
                         msg.find("any source") != std::string::npos
                     ? ""
                     : "unclear message: " + msg;
        },
        60000);
    EXPECT_EQ(mp_summary(res), "") << transport;
  }
}

// The async form: two requests in flight, each learning its source once it completes.
TEST(AnySource, AsyncReportsSource) {
  auto res = mp_run(
      3,
      [](int rank, int n, int port) -> std::string {
        weft_comm_t* comm;
        std::string err = join(rank, n, port, &comm);
        if (!err.empty()) return err;
        int64_t v = 1000 + rank;
        if (rank > 0) {
          if (weft_send(&v, 1, WEFT_INT64, 0, comm, nullptr) != WEFT_SUCCESS)
            return weft_last_error();
        } else {
          int64_t got[2] = {0, 0};
          int src[2] = {-1, -1};
          weft_request_t* req[2];
          for (int k = 0; k < 2; k++)
            if (weft_irecv_any(&got[k], 1, WEFT_INT64, 0, &src[k], comm, &req[k]) != WEFT_SUCCESS)
              return weft_last_error();
          for (int k = 0; k < 2; k++)
            if (weft_wait(req[k], -1) != WEFT_SUCCESS) return weft_last_error();
          if (src[0] == src[1] || got[0] != 1000 + src[0] || got[1] != 1000 + src[1])
            return "sources " + std::to_string(src[0]) + "," + std::to_string(src[1]) + " values " +
                   std::to_string(got[0]) + "," + std::to_string(got[1]);
        }
        err = check_all_reduce(comm, WEFT_INT64, WEFT_SUM, 5, false);
        weft_comm_destroy(comm);
        return err;
      },
      60000);
  EXPECT_EQ(mp_summary(res), "");
}

// A sender killed before it sends: with no other rank left the receive fails at once
// (WEFT_ERR_REMOTE); with a silent one still alive, at its timeout. Never a hang.
TEST(AnySource, DeadSenderFailsWithinTheTimeout) {
  for (const char* transport : {"shm", "tcp"})
    for (int n : {2, 3}) {
      auto res = mp_run(
          n,
          [&](int rank, int n, int port) -> std::string {
            setenv("WEFT_TRANSPORT", transport, 1);
            setenv("WEFT_TIMEOUT_MS", "1000", 1);
            weft_comm_t* comm;
            std::string err = join(rank, n, port, &comm);
            if (!err.empty()) return err;
            if (rank == 1) kill(getpid(), SIGKILL);
            if (rank == 2) {  // alive and connected, sending nothing
              usleep(2200 * 1000);
              weft_comm_abort(comm);
              return "";
            }
            int32_t v = 0;
            auto t0 = std::chrono::steady_clock::now();
            weft_result_t r = weft_recv_any(&v, 1, WEFT_INT32, 0, nullptr, comm, nullptr);
            double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
            std::string msg = weft_last_error();
            weft_comm_abort(comm);
            weft_result_t want = n == 2 ? WEFT_ERR_REMOTE : WEFT_ERR_TIMEOUT;
            if (r != want) return "result " + std::to_string(r) + ": " + msg;
            if (s > 2.0) return "gave up after " + std::to_string(s) + " s: " + msg;
            if (msg.find("any source") == std::string::npos) return "unclear message: " + msg;
            return "";
          },
          60000);
      // Rank 1 is killed on purpose: only the others' results count.
      res.erase(res.begin() + 1);
      EXPECT_EQ(mp_summary(res), "") << transport << ", " << n << " ranks";
    }
}

// Whether `rank` and `peer` are ring neighbours, the only pairs init connects.
bool neighbours(int rank, int peer, int n) {
  return (rank + 1) % n == peer || (peer + 1) % n == rank;
}

// Sends kMsgs stamped messages of `count` elements with `tag` from this rank to `to`.
std::string send_stamped(int rank, int to, size_t count, int tag, weft_comm_t* comm) {
  std::vector<int32_t> buf(count);
  for (int msg = 0; msg < kMsgs; msg++) {
    for (size_t i = 0; i < count; i++) buf[i] = stamp(rank, msg, i);
    if (weft_send_tagged(buf.data(), count, WEFT_INT32, to, tag, comm, nullptr) != WEFT_SUCCESS)
      return "send to " + std::to_string(to) + ": " + weft_last_error();
  }
  return "";
}

// Receives kMsgs stamped messages with `tag` from each of `senders` from any source: sources
// right, each sender's order kept.
std::string recv_stamped(int rank, const std::vector<int>& senders, int n, size_t count, int tag,
                         weft_comm_t* comm) {
  std::vector<int32_t> buf(count);
  std::vector<int> next(n, 0), want(n, 0);
  for (int s : senders) want[s] = kMsgs;
  for (size_t k = 0; k < kMsgs * senders.size(); k++) {
    int source = -1;
    if (weft_recv_any(buf.data(), count, WEFT_INT32, tag, &source, comm, nullptr) != WEFT_SUCCESS)
      return "rank " + std::to_string(rank) + " receive " + std::to_string(k) + ": " +
             weft_last_error();
    if (source < 0 || source >= n || next[source] >= want[source])
      return "rank " + std::to_string(rank) + ": unexpected source " + std::to_string(source);
    for (size_t i = 0; i < count; i++)
      if (buf[i] != stamp(source, next[source], i))
        return "rank " + std::to_string(rank) + ": from " + std::to_string(source) + " message " +
               std::to_string(next[source]) + ", element " + std::to_string(i) + " is " +
               std::to_string(buf[i]);
    next[source]++;
  }
  return "";
}

// TCP only: rank 0 receives from ranks 2..n-1 and rank 1 from rank 3, none of which init
// connected to their receiver (the ring neighbours are skipped). Each pair's connection is made
// by the receive itself, with or without a job token (whose challenge the receive answers).
// Afterwards named sends over the same pairs and a collective still work.
TEST(AnySource, TcpReachesPeersNeverConnected) {
  for (const char* token : {"", "any source token"})
    for (int n : {4, 5}) {
      auto res = mp_run(
          n,
          [&](int rank, int n, int port) -> std::string {
            setenv("WEFT_TRANSPORT", "tcp", 1);
            setenv("WEFT_TIMEOUT_MS", "5000", 1);
            if (token[0]) setenv("WEFT_JOB_TOKEN", token, 1);
            weft_comm_t* comm;
            std::string err = join(rank, n, port, &comm);
            if (!err.empty()) return err;
            // Round 1 only from the ranks never connected to rank 0; round 2 from all. The
            // rounds are not in step, so each has its own tag.
            for (int round : {1, 2}) {
              size_t count = round == 1 ? 1 : 3000;
              if (rank == 0) {
                std::vector<int> senders;
                for (int p = 2; p < n; p++)
                  if (!neighbours(0, p, n) || round == 2) senders.push_back(p);
                err = recv_stamped(rank, senders, n, count, round, comm);
              } else if (rank == 1) {
                err = recv_stamped(rank, {3}, n, count, round, comm);
              } else {
                if (!neighbours(0, rank, n) || round == 2)
                  err = send_stamped(rank, 0, count, round, comm);
                if (err.empty() && rank == 3) err = send_stamped(rank, 1, count, round, comm);
              }
              if (!err.empty()) break;
            }
            // Named sends both ways over the pairs the receives connected.
            for (int p = 2; err.empty() && p < n; p++) {
              int32_t v = rank * 10 + p, got = -1;
              weft_result_t r = WEFT_SUCCESS;
              if (rank == 0) {
                r = weft_send(&v, 1, WEFT_INT32, p, comm, nullptr);
                if (r == WEFT_SUCCESS) r = weft_recv(&got, 1, WEFT_INT32, p, comm, nullptr);
                if (r == WEFT_SUCCESS && got != p * 10)
                  err = "from " + std::to_string(p) + ": " + std::to_string(got);
              } else if (rank == p) {
                v = p * 10;
                r = weft_recv(&got, 1, WEFT_INT32, 0, comm, nullptr);
                if (r == WEFT_SUCCESS) r = weft_send(&v, 1, WEFT_INT32, 0, comm, nullptr);
                if (r == WEFT_SUCCESS && got != p) err = "from 0: " + std::to_string(got);
              }
              if (r != WEFT_SUCCESS)
                err = "named p2p with " + std::to_string(p) + ": " + weft_last_error();
            }
            if (err.empty()) err = check_all_reduce(comm, WEFT_FLOAT32, WEFT_SUM, 64, false);
            weft_comm_destroy(comm);
            return err;
          },
          60000);
      EXPECT_EQ(mp_summary(res), "") << n << " ranks, token '" << token << "'";
    }
}

// TCP with a job token, 5 ranks: rank 0's receive from any source dials rank 3 too, which
// answers the dial's challenge while connecting elsewhere, after the receive has matched rank 2.
// Rank 0 then stays away past the peer's deadline for the proof (TCP_ACCEPT_PROOF_MS, 5 s), so
// rank 3 drops the lane; rank 0's next connect to rank 3 must open it again, not take it for
// connected. About 6 s.
TEST(AnySource, TcpDialLeftUnansweredIsRedone) {
  auto res = mp_run(
      5,
      [](int rank, int n, int port) -> std::string {
        setenv("WEFT_TRANSPORT", "tcp", 1);
        setenv("WEFT_TIMEOUT_MS", "15000", 1);
        setenv("WEFT_JOB_TOKEN", "dial token", 1);
        weft_comm_t* comm;
        std::string err = join(rank, n, port, &comm);
        if (!err.empty()) return err;
        int32_t v = rank, got = -1;
        weft_result_t r = WEFT_SUCCESS;
        if (rank == 0) {
          int source = -1;
          usleep(300 * 1000);  // every rank is past init, out of its listener, when the dial comes
          r = weft_recv_any(&got, 1, WEFT_INT32, 0, &source, comm, nullptr);
          if (r == WEFT_SUCCESS && (source != 2 || got != 2))
            err = "source " + std::to_string(source) + ", value " + std::to_string(got);
          usleep(6000 * 1000);
          if (r == WEFT_SUCCESS) r = weft_send(&v, 1, WEFT_INT32, 3, comm, nullptr);
          if (r == WEFT_SUCCESS) r = weft_recv(&got, 1, WEFT_INT32, 3, comm, nullptr);
          if (r == WEFT_SUCCESS && err.empty() && got != 3) err = "from 3: " + std::to_string(got);
        } else if (rank == 2) {
          r = weft_send(&v, 1, WEFT_INT32, 0, comm, nullptr);
        } else if (rank == 3) {
          usleep(1000 * 1000);  // rank 0's dial is waiting at this rank's listener by now
          r = weft_send(&v, 1, WEFT_INT32, 1, comm, nullptr);
          if (r == WEFT_SUCCESS) r = weft_recv(&got, 1, WEFT_INT32, 0, comm, nullptr);
          if (r == WEFT_SUCCESS) r = weft_send(&v, 1, WEFT_INT32, 0, comm, nullptr);
          if (r == WEFT_SUCCESS && got != 0) err = "from 0: " + std::to_string(got);
        } else if (rank == 1) {
          r = weft_recv(&got, 1, WEFT_INT32, 3, comm, nullptr);
        }
        if (r != WEFT_SUCCESS) err = weft_last_error();
        if (err.empty()) err = check_all_reduce(comm, WEFT_FLOAT32, WEFT_SUM, 64, false);
        weft_comm_destroy(comm);
        return err;
      },
      60000);
  EXPECT_EQ(mp_summary(res), "");
}

// TCP, 5 ranks: rank 2 dies before it ever connects to rank 0, and rank 3 (not connected to
// rank 0 either) sends late. Rank 0's receive from any source still gets rank 3's message, and
// the next one, which nobody sends, fails within the timeout instead of hanging, naming rank 2.
TEST(AnySource, TcpSenderDeadBeforeConnecting) {
  auto res = mp_run(
      5,
      [](int rank, int n, int port) -> std::string {
        setenv("WEFT_TRANSPORT", "tcp", 1);
        setenv("WEFT_TIMEOUT_MS", "2000", 1);
        weft_comm_t* comm;
        std::string err = join(rank, n, port, &comm);
        if (!err.empty()) return err;
        if (rank == 2) kill(getpid(), SIGKILL);
        int32_t v = 33;
        if (rank == 3) {
          usleep(300 * 1000);
          if (weft_send(&v, 1, WEFT_INT32, 0, comm, nullptr) != WEFT_SUCCESS)
            err = weft_last_error();
        } else if (rank == 0) {
          int source = -1;
          v = 0;
          usleep(150 * 1000);  // rank 2 is gone, not just leaving init, when the dial comes
          if (weft_recv_any(&v, 1, WEFT_INT32, 0, &source, comm, nullptr) != WEFT_SUCCESS)
            err = "first receive: " + std::string(weft_last_error());
          else if (source != 3 || v != 33)
            err = "source " + std::to_string(source) + ", value " + std::to_string(v);
          if (err.empty()) {
            auto t0 = std::chrono::steady_clock::now();
            weft_result_t r = weft_recv_any(&v, 1, WEFT_INT32, 0, nullptr, comm, nullptr);
            double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
            std::string msg = weft_last_error();
            if (r != WEFT_ERR_TIMEOUT)
              err = "result " + std::to_string(r) + ": " + msg;
            else if (s > 3.5)
              err = "gave up after " + std::to_string(s) + " s: " + msg;
            else if (msg.find("any source") == std::string::npos ||
                     msg.find("could not be connected, rank 2") == std::string::npos)
              err = "unclear: " + msg;
          }
        }
        // Rank 0 is done before the others give up on it: wait out its receives, then leave.
        if (rank != 0) usleep(3000 * 1000);
        weft_comm_abort(comm);
        return err;
      },
      60000);
  res.erase(res.begin() + 2);  // rank 2 is killed on purpose
  EXPECT_EQ(mp_summary(res), "");
}

// weft_comm_abort from another thread ends a receive from any source that nothing will match.
TEST(AnySource, AbortEndsAWaitingReceive) {
  auto res = mp_run(
      2,
      [](int rank, int n, int port) -> std::string {
        weft_comm_t* comm;
        std::string err = join(rank, n, port, &comm);
        if (!err.empty()) return err;
        if (rank == 1) {
          usleep(1500 * 1000);
          weft_comm_abort(comm);
          return "";
        }
        std::thread aborter([comm] {
          usleep(300 * 1000);
          weft_comm_abort(comm);
        });
        int32_t v = 0;
        auto t0 = std::chrono::steady_clock::now();
        weft_result_t r = weft_recv_any(&v, 1, WEFT_INT32, 0, nullptr, comm, nullptr);
        double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
        std::string msg = weft_last_error();
        aborter.join();
        if (r != WEFT_ERR_ABORTED) return "result " + std::to_string(r) + ": " + msg;
        if (s > 1.0) return "gave up after " + std::to_string(s) + " s";
        return "";
      },
      60000);
  EXPECT_EQ(mp_summary(res), "");
}

// Device buffers are refused up front, saying why (the emulated engine stands in for a GPU).
TEST(AnySource, DeviceBufferIsRefused) {
  auto res = mp_run(
      2,
      [](int rank, int n, int port) -> std::string {
        setenv("WEFT_DEVICE", "emulated", 1);
        weft_comm_t* comm;
        std::string err = join(rank, n, port, &comm);
        if (!err.empty()) return err;
        if (rank == 0) {
          void* dev = nullptr;
          if (weft_mem_alloc(&dev, 64) != WEFT_SUCCESS) return weft_last_error();
          weft_result_t r = weft_recv_any(dev, 16, WEFT_INT32, 0, nullptr, comm, nullptr);
          std::string msg = weft_last_error();
          weft_mem_free(dev);
          if (r != WEFT_ERR_UNSUPPORTED || msg.find("device memory") == std::string::npos)
            return "result " + std::to_string(r) + ": " + msg;
        }
        err = check_all_reduce(comm, WEFT_INT32, WEFT_SUM, 4, false);
        weft_comm_destroy(comm);
        return err;
      },
      60000);
  EXPECT_EQ(mp_summary(res), "");
}

TEST(AnySource, RefusedInsideALargerGroup) {
  auto res = mp_run(
      2,
      [](int rank, int n, int port) -> std::string {
        weft_comm_t* comm;
        std::string err = join(rank, n, port, &comm);
        if (!err.empty()) return err;
        int32_t a = 0, b = 0;
        weft_p2p_op_t ops[2] = {{WEFT_COLL_SEND, &a, 1, WEFT_INT32, 1 - rank, 0},
                                {WEFT_COLL_RECV, &b, 1, WEFT_INT32, WEFT_ANY_SOURCE, 0}};
        weft_result_t r = weft_p2p_group(ops, 2, comm, nullptr);
        std::string msg = weft_last_error();
        weft_comm_destroy(comm);
        if (r != WEFT_ERR_INVALID_ARGUMENT || msg.find("WEFT_ANY_SOURCE") == std::string::npos)
          return "result " + std::to_string(r) + ": " + msg;
        return "";
      },
      60000);
  EXPECT_EQ(mp_summary(res), "");
}

// Rounds of `iters` round trips of one int32 between ranks 0 and 1, rank 0 receiving the reply
// by name and from any source in alternate rounds: microseconds per round trip of each round.
std::string PingPongRounds(int rank, weft_comm_t* comm, int rounds, int iters,
                           std::vector<double>* named, std::vector<double>* any) {
  int32_t v = 0;
  for (int round = 0; round < 2 * rounds; round++) {
    bool use_any = round % 2 == 1;
    auto t0 = std::chrono::steady_clock::now();
    for (int i = 0; i < iters; i++) {
      weft_result_t a, b;
      if (rank == 0) {
        a = weft_send(&v, 1, WEFT_INT32, 1, comm, nullptr);
        b = use_any ? weft_recv_any(&v, 1, WEFT_INT32, 0, nullptr, comm, nullptr)
                    : weft_recv(&v, 1, WEFT_INT32, 1, comm, nullptr);
      } else {
        b = weft_recv(&v, 1, WEFT_INT32, 0, comm, nullptr);
        a = weft_send(&v, 1, WEFT_INT32, 0, comm, nullptr);
      }
      if (a != WEFT_SUCCESS || b != WEFT_SUCCESS) return weft_last_error();
    }
    double us =
        std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - t0).count() /
        iters;
    (use_any ? any : named)->push_back(us);
  }
  return "";
}

// Not run by default (a timing, not a check): round trips of one int32 between two ranks, rank 0
// receiving the reply by name or from any source, alternately in rounds; prints the median of
// each per round trip. Run with --gtest_also_run_disabled_tests --gtest_filter='*PingPong*'.
TEST(AnySource, DISABLED_PingPongLatency) {
  for (const char* transport : {"shm", "tcp"}) {
    auto res = mp_run(
        2,
        [&](int rank, int n, int port) -> std::string {
          setenv("WEFT_TRANSPORT", transport, 1);
          weft_comm_t* comm;
          std::string err = join(rank, n, port, &comm);
          if (!err.empty()) return err;
          const int kRounds = 7, kIters = 2000;
          std::vector<double> named, any;
          err = PingPongRounds(rank, comm, kRounds, kIters, &named, &any);
          if (!err.empty()) return err;
          weft_comm_destroy(comm);
          if (rank == 0) {
            std::sort(named.begin(), named.end());
            std::sort(any.begin(), any.end());
            printf(
                "%s: round trip, rank 0 receiving by name %.2f us, from any source %.2f us "
                "(medians of %d rounds of %d)\n",
                transport, named[kRounds / 2], any[kRounds / 2], kRounds, kIters);
            fflush(stdout);
          }
          return "";
        },
        120000);
    EXPECT_EQ(mp_summary(res), "") << transport;
  }
}

// The cost of watching peers not connected yet: TCP, 5 ranks, rank 0 round trips with rank 1
// while ranks 2 and 3 (never connected to rank 0) stay out of weft, so that its receives from any
// source keep a dial to each of them in progress. Run like the one above ('*PingPong*').
TEST(AnySource, DISABLED_PingPongWithPeersNotConnected) {
  auto* stop = static_cast<int*>(
      mmap(nullptr, sizeof(int), PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0));
  ASSERT_NE(stop, MAP_FAILED);
  *stop = 0;
  auto res = mp_run(
      5,
      [&](int rank, int n, int port) -> std::string {
        setenv("WEFT_TRANSPORT", "tcp", 1);
        weft_comm_t* comm;
        std::string err = join(rank, n, port, &comm);
        if (!err.empty()) return err;
        if (rank > 1) {
          while (!__atomic_load_n(stop, __ATOMIC_ACQUIRE)) usleep(1000);
          weft_comm_destroy(comm);
          return "";
        }
        const int kRounds = 7, kIters = 2000;
        std::vector<double> named, any;
        err = PingPongRounds(rank, comm, kRounds, kIters, &named, &any);
        if (!err.empty()) return err;
        if (rank == 0) {
          std::sort(named.begin(), named.end());
          std::sort(any.begin(), any.end());
          printf(
              "tcp, 5 ranks, 2 not connected to rank 0: round trip, receiving by name %.2f us, "
              "from any source %.2f us (medians of %d rounds of %d)\n",
              named[kRounds / 2], any[kRounds / 2], kRounds, kIters);
          fflush(stdout);
          __atomic_store_n(stop, 1, __ATOMIC_RELEASE);
        }
        weft_comm_destroy(comm);
        return "";
      },
      120000);
  munmap(stop, sizeof(int));
  EXPECT_EQ(mp_summary(res), "");
}

}  // namespace
