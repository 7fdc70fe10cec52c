/* store_server_fuzz.c -- the store master (bootstrap/store_server.c) reading a client's bytes.
 *
 * Each input is what one client sends: a real server is started on loopback, the input is
 * written to it over one TCP connection, then the client end says EOF. Whatever the bytes, the
 * server answers only with well-formed replies (right magic and version, type REPLY, lengths
 * within the limits, a known status), each complete, and then closes the connection by itself
 * within a few seconds: a client that breaks the protocol is dropped, never crashes the master or
 * makes it wait forever. The server is stopped after each input, so that no key outlives it and
 * every input runs the same way again. */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "bootstrap/store.h"
#include "bootstrap/store_wire.h"
#include "common/clock.h"
#include "tests/fuzz/fuzz.h"

/* The identity the seed corpus's hellos carry (tests/fuzz/make_seeds.py). */
#define JOB_ID 0x7466656677656674ull
#define WORLD 4
#define CLOSE_WITHIN_MS 5000

/* Every reply in the stream well formed, and whole unless the connection was reset (a reset may
 * lose what was not read yet). */
static void check_replies(const uint8_t *buf, size_t len, int reset) {
  size_t off = 0;
  while (off < len) {
    if (reset && len - off < STORE_HDR_SIZE) return;
    FUZZ_CHECK(len - off >= STORE_HDR_SIZE);
    store_hdr_t h;
    store_hdr_decode(buf + off, &h);
    FUZZ_CHECK(h.magic == STORE_MAGIC && h.version == STORE_VERSION);
    FUZZ_CHECK(h.type == STORE_REPLY && store_hdr_problem(&h) == NULL);
    FUZZ_CHECK(h.status <= STORE_FAILED);
    off += STORE_HDR_SIZE;
    if (reset && len - off < (size_t)h.key_len + h.val_len) return;
    FUZZ_CHECK(len - off >= (size_t)h.key_len + h.val_len);
    if (h.status == STORE_TIMEOUT && h.val_len > 0) {
      /* The keys a WAIT still misses, as a key list. */
      size_t k = 0, klen;
      const uint8_t *key;
      int rc;
      while ((rc = store_keys_next(buf + off, h.val_len, &k, &key, &klen)) == 1) {
      }
      FUZZ_CHECK(rc == 0);
    }
    off += (size_t)h.key_len + h.val_len;
  }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  store_identity_t id = {JOB_ID, WORLD, 0, NULL}; /* no job token: store_token_test has those */
  store_server_t *s;
  FUZZ_CHECK(store_server_start(0, &id, &s) == WEFT_SUCCESS);
  net_addr_t addr;
  FUZZ_CHECK(net_resolve("127.0.0.1", store_server_port(s), &addr) == WEFT_SUCCESS);
  int fd;
  FUZZ_CHECK(net_connect(&addr, 2000, &fd) == WEFT_SUCCESS);
  FUZZ_CHECK(fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK) == 0);

  size_t sent = 0, got = 0, cap = 1 << 16;
  uint8_t *in = malloc(cap);
  FUZZ_CHECK(in);
  int64_t deadline = clock_now_ms() + CLOSE_WITHIN_MS;
  int wr_open = 1, eof = 0, reset = 0;
  while (!eof) {
    if (wr_open && sent == size) {
      shutdown(fd, SHUT_WR);
      wr_open = 0;
    }
    int64_t left = deadline - clock_now_ms();
    FUZZ_CHECK(left > 0); /* the server must close a finished client on its own */
    struct pollfd p = {fd, (short)(POLLIN | (wr_open ? POLLOUT : 0)), 0};
    if (poll(&p, 1, (int)left) < 0) continue;
    if (wr_open && (p.revents & POLLOUT)) {
      ssize_t n = send(fd, data + sent, size - sent, MSG_NOSIGNAL);
      if (n > 0) sent += (size_t)n;
      else if (n < 0 && errno != EAGAIN && errno != EINTR) wr_open = 0; /* dropped already */
    }
    if (p.revents & (POLLIN | POLLHUP | POLLERR)) {
      if (got == cap) {
        cap *= 2;
        in = realloc(in, cap);
        FUZZ_CHECK(in);
      }
      ssize_t n = recv(fd, in + got, cap - got, 0);
      if (n > 0) got += (size_t)n;
      else if (n == 0) eof = 1;
      else if (errno != EAGAIN && errno != EINTR) eof = reset = 1;
    }
  }
  check_replies(in, got, reset);
  free(in);
  /* A reset instead of a close handshake: no TIME_WAIT left behind per input. */
  struct linger lg = {1, 0};
  setsockopt(fd, SOL_SOCKET, SO_LINGER, &lg, sizeof lg);
  close(fd);
  store_server_stop(s);
  return 0;
}
