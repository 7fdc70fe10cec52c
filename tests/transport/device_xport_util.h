// device_xport_util.h -- helpers for the device transport tests (cuda_ipc, staged): transports set
// up by hand across forked ranks, scripted message streams checked byte for byte, leftovers.
#ifndef WEFT_TESTS_TRANSPORT_DEVICE_XPORT_UTIL_H_
#define WEFT_TESTS_TRANSPORT_DEVICE_XPORT_UTIL_H_

#include <stdint.h>

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
  bool inplace;  // received with post_recv_inplace (+ release_recv) instead of post_recv
};

// Messages rank `from` sends to its peer: a fixed prefix covering every kind and odd length
// (one byte, a slot minus one, a slot, more than a slot, several slots), then pseudo-random ones.
// In-place only where len <= the cap for its kind.
std::vector<Msg> Script(int from, int count, size_t slot, size_t host_inplace_cap, uint32_t seed);

// How many transfers each side keeps posted at once.
struct Windows {
  int send;
  int recv;
};

// Runs `out` to the peer and `in` from it over c concurrently (the same connection, both
// directions), checking every byte; in-place data is read through x->data with device copies and
// released in order. "" or what went wrong, naming rank, peer and the message.
std::string Drive(conn_t* c, dev_engine_t* dev, int rank, const std::vector<Msg>& out,
                  const std::vector<Msg>& in, Windows w, int timeout_ms);

// Posts `nrecvs` device receives and `nsends` device sends of `len` bytes on c and
// progresses/waits until the transport fails; *seconds is how long that took. "" if it failed
// (its message in *msg), else why not.
std::string WaitForFailure(conn_t* c, dev_engine_t* dev, size_t len, int nrecvs, int nsends,
                           int timeout_ms, std::string* msg, double* seconds);

double NowSeconds();

#endif  // WEFT_TESTS_TRANSPORT_DEVICE_XPORT_UTIL_H_
