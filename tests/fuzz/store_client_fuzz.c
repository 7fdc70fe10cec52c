/* store_client_fuzz.c -- a rank's store client (bootstrap/store_client.c) reading its master's
 * bytes.
 *
 * Input: one byte that picks the order of the requests, then everything a master sends on the
 * connection. A fake master accepts the client, writes those bytes, closes its sending side and
 * reads until the client hangs up; the client says hello, then makes a GET, SET, ADD and WAIT in
 * that order. Whatever the master says, every call returns (the bytes end in EOF, so no call may
 * wait for its timeout), a failure carries a message, a GET never writes past its buffer and
 * reports the value's true length, and once the stream is out of step every later call fails. */
#include <pthread.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "bootstrap/store.h"
#include "common/clock.h"
#include "common/error.h"
#include "tests/fuzz/fuzz.h"

#define CALL_WITHIN_MS 3000

typedef struct {
  int listen_fd;
  const uint8_t *data;
  size_t size;
} master_t;

static void *fake_master(void *arg) {
  master_t *m = arg;
  int fd = accept(m->listen_fd, NULL, NULL);
  if (fd < 0) return NULL;
  size_t off = 0;
  while (off < m->size) {
    ssize_t n = send(fd, m->data + off, m->size - off, MSG_NOSIGNAL);
    if (n <= 0) break;
    off += (size_t)n;
  }
  shutdown(fd, SHUT_WR);
  char scratch[4096];
  while (recv(fd, scratch, sizeof scratch, 0) > 0) {
  }
  close(fd);
  return NULL;
}

static int listen_fd = -1;
static net_addr_t master_addr;

static void check_failure(weft_result_t res) {
  FUZZ_CHECK(res != WEFT_SUCCESS);
  FUZZ_CHECK(err_last()[0] != '\0');
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  if (size < 1) return 0;
  if (listen_fd < 0) {
    FUZZ_CHECK(net_listen_any(0, AF_INET, 64, &listen_fd) == WEFT_SUCCESS);
    struct sockaddr_storage ss;
    socklen_t len = sizeof ss;
    FUZZ_CHECK(getsockname(listen_fd, (struct sockaddr *)&ss, &len) == 0);
    net_addr_t bound = {ss, len};
    FUZZ_CHECK(net_resolve("127.0.0.1", net_addr_port(&bound), &master_addr) == WEFT_SUCCESS);
  }
  unsigned order = data[0];
  master_t m = {listen_fd, data + 1, size - 1};
  pthread_t t;
  FUZZ_CHECK(pthread_create(&t, NULL, fake_master, &m) == 0);

  store_identity_t id = {0x7466656677656674ull, 4, 1, NULL};
  store_client_t *c = NULL;
  int64_t start = clock_now_ms();
  err_clear();
  weft_result_t res = store_connect(&master_addr, &id, 2000, &c);
  if (res != WEFT_SUCCESS) {
    check_failure(res);
  } else {
    int failed = 0;
    for (int i = 0; i < 4; i++) {
      int op = (int)((order >> (2 * i)) + (unsigned)i) % 4;
      err_clear();
      switch (op) {
        case 0: {
          char buf[16];
          memset(buf, 0xab, sizeof buf);
          size_t len = 0;
          res = store_get(c, "key", buf, 8, &len, 1000);
          FUZZ_CHECK((unsigned char)buf[8] == 0xab); /* never past cap */
          if (res == WEFT_SUCCESS) FUZZ_CHECK(len <= 8);
          break;
        }
        case 1:
          res = store_set(c, "key", "value", 5);
          break;
        case 2: {
          int64_t v = 0;
          res = store_add(c, "counter", 3, &v);
          break;
        }
        default: {
          const char *keys[] = {"a", "bb"};
          res = store_wait(c, keys, 2, 1000);
          break;
        }
      }
      if (res != WEFT_SUCCESS) check_failure(res);
      /* After the master broke the protocol or hung up nothing succeeds again (a too-small GET
       * buffer or a non-integer counter leave the stream in step, so those do not count). */
      if (failed) FUZZ_CHECK(res != WEFT_SUCCESS);
      if (res == WEFT_ERR_REMOTE) failed = 1;
    }
  }
  store_close(c);
  FUZZ_CHECK(pthread_join(t, NULL) == 0);
  FUZZ_CHECK(clock_now_ms() - start < CALL_WITHIN_MS);
  return 0;
}
