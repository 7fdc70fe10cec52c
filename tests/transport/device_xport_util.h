// device_xport_util.h -- helpers for the device transport tests (cuda_ipc, staged): transports set
// up by hand across forked ranks, scripted message streams checked byte for byte, leftovers.
#ifndef WEFT_TESTS_TRANSPORT_DEVICE_XPORT_UTIL_H_
#define WEFT_TESTS_TRANSPORT_DEVICE_XPORT_UTIL_H_

#include <stdint.h>

#include <functional>
#include <string>
#include <vector>

#include "common/config.h"
#include "device/device.h"
#include "transport/transport.h"

// Address blobs between forked ranks: pipes made in the parent before mp_run, one per rank.
class BlobExchange {
 public:
  explicit BlobExchange(int nranks);
  ~BlobExchange();
  // Sends `blob` to every other rank and collects theirs (*all)[r]; "" or what went wrong.
  std::string Exchange(int rank, const void* blob, size_t size, std::vector<std::vector<char>>* all,
                       int timeout_ms);

 private:
  int n_;
  std::vector<int> rd_, wr_;
};

// The engine the tests run on: $WEFT_TEST_DEVICE ("cuda" on a GPU machine), else "emulated".
// Opened in each forked rank, never in the test's own process (CUDA does not survive fork).
weft_result_t OpenTestEngine(dev_engine_t** dev);

// Defaults of every knob with small slices so that streams run through the rings many times.
weft_config_t TestConfig(size_t slice_bytes, int shm_slots, int slices_in_flight);

// How long the tests' transport waits poll before they sleep: WEFT_SPIN_US's default.
constexpr int kWaitSpinUs = 1000;

// A communicator id of its own per test, so leftovers are told apart.
uint64_t TestCommId();

// Entries of /dev/shm whose name starts with weft-<comm_id>-, joined by spaces.
std::string Leftovers(uint64_t comm_id);

// Transports of one rank towards all others, made as the communicator would.
struct RankXport {
  transport_t* t = nullptr;
  std::vector<conn_t*> conns;  // by peer rank; nullptr for self
  void Close(bool abortive);   // closes the conns, then destroys t (aborting if abortive)
};
std::string OpenCudaIpc(int rank, int n, uint64_t comm_id, const weft_config_t* cfg,
                        dev_engine_t* dev, BlobExchange* ex, RankXport* out);
std::string OpenShm(int rank, int n, uint64_t comm_id, const weft_config_t* cfg, BlobExchange* ex,
                    RankXport* out);
std::string OpenTcp(int rank, int n, uint64_t comm_id, const weft_config_t* cfg, BlobExchange* ex,
                    RankXport* out);

// One message of a scripted stream.
struct Msg {
  bool device;
  size_t len;
  bool inplace;       // received with post_recv_inplace (+ release_recv) instead of post_recv
  bool lent = false;  // sent with lend_send + commit_send (len <= one slot) instead of post_send
};

// Messages rank `from` sends to its peer: a fixed prefix covering every kind and odd length
// (one byte, a slot minus one, a slot, more than a slot, several slots), then pseudo-random ones.
// In-place only where len <= the cap for its kind.
std::vector<Msg> Script(int from, int count, size_t slot, size_t host_inplace_cap, uint32_t seed);

// Like Script, with about half the messages of at most one slot sent through lend_send: runs of
// several lent ones, between ordinary sends. Host messages are lent only if host_lent.
std::vector<Msg> LentScript(int from, int count, size_t slot, size_t host_inplace_cap,
                            bool host_lent, uint32_t seed);

// How many transfers each side keeps posted at once.
struct Windows {
  int send;
  int recv;
};

// Runs `out` to the peer and `in` from it over c concurrently (the same connection, both
// directions), checking every byte; in-place data is read through x->data with device copies and
// released in order. Lent device messages are filled on a queue of the driver's own (a copy or a
// reduction, as the executor's fused steps do), committed once its fence passed; lent host ones
// are filled by memcpy. Consecutive lent messages are all lent before the first is committed (up
// to w.send), and no post_send is made while one is uncommitted. "" or what went wrong, naming
// rank, peer and the message.
std::string Drive(conn_t* c, dev_engine_t* dev, int rank, const std::vector<Msg>& out,
                  const std::vector<Msg>& in, Windows w, int timeout_ms);

// Posts `nrecvs` device receives and `nsends` device sends of `len` bytes on c and
// progresses/waits until the transport fails; *seconds is how long that took. "" if it failed
// (its message in *msg), else why not.
std::string WaitForFailure(conn_t* c, dev_engine_t* dev, size_t len, int nrecvs, int nsends,
                           int timeout_ms, std::string* msg, double* seconds);

// The sender's side of the full-ring check, with device messages of `len` bytes (Byte's pattern,
// as Drive sends them): lends without committing until lend_send gives no slot (*lent_at_once:
// how many it gave), fills and commits them, then lends, fills and commits one at a time until
// lend_send has given no slot for 300 ms of progress (*stalled_at: messages sent by then), calls
// release() (which lets the peer start receiving) and sends the rest, `total` in all.
std::string LendUntilFull(conn_t* c, dev_engine_t* dev, int rank, size_t len, int total,
                          const std::function<std::string()>& release, int* lent_at_once,
                          int* stalled_at, int timeout_ms);

// Sends `before` (device, through post_send) and waits until it completed, then lends `lent`
// slots of `len` bytes and fills them on a device queue without committing any: the caller then
// closes the connection. Checks on the way that lend_send refuses a zero-length or larger than
// `slot` message and that commit_send refuses an xfer that was not lent next, naming the peer.
// The xfers are *xs (lent + 1 of them): keep it until the connection is closed.
std::string SendThenLendWithoutCommit(conn_t* c, dev_engine_t* dev, int rank, size_t before,
                                      int lent, size_t len, size_t slot, std::vector<xfer_t>* xs,
                                      int timeout_ms);

// The receiver's side: `before` bytes arrive intact, and then nothing more: a further receive
// fails (the peer closed) instead of completing. "" or what went wrong.
// The further receive is an in-place one of len bytes into *x: keep it until the connection is
// closed.
std::string ReceiveThenNothing(conn_t* c, dev_engine_t* dev, int rank, size_t before, size_t len,
                               xfer_t* x, int timeout_ms);

// Under AddressSanitizer: LeakSanitizer's verdict on this process now ("" if nothing leaked).
// The ranks end with _exit(), which skips LeakSanitizer's own check at exit.
std::string LeakCheck(int rank);

double NowSeconds();

#endif  // WEFT_TESTS_TRANSPORT_DEVICE_XPORT_UTIL_H_
