/* boot_record_fuzz.c -- the record every rank publishes through the store at init
 * (bootstrap/rendezvous.c's boot_record_problem), as another rank reads it.
 *
 * Input: the record's bytes (as many as there are, the rest zero). A record the check accepts
 * has a host id that ends inside its field, so comm.c's strcmp of two host ids stays inside them,
 * and TCP blobs (the transport's and the rescue address) that are empty or an IPv4/IPv6
 * address of its family's exact length, so net_addr_str and connect read no more than it. */
#include <netinet/in.h>
#include <string.h>

#include "bootstrap/rendezvous.h"
#include "common/net.h"
#include "tests/fuzz/fuzz.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  /* On the heap at its exact size, so that ASan sees a read past the record. */
  boot_record_t *r = calloc(1, sizeof *r);
  FUZZ_CHECK(r);
  memcpy(r, data, size < sizeof *r ? size : sizeof *r);
  const char *problem = boot_record_problem(r);
  if (problem) {
    FUZZ_CHECK(problem[0] != '\0');
  } else {
    FUZZ_CHECK(strlen(r->host_id) < sizeof r->host_id);
    boot_record_t mine = {0};
    boot_host_id(mine.host_id, sizeof mine.host_id);
    (void)strcmp(r->host_id, mine.host_id);
    /* Both TCP blobs: the transport's and the rescue listener's (comm/rescue.h). */
    const unsigned char *blobs[] = {r->addr[0], r->rescue};
    for (int i = 0; i < 2; i++) {
      net_addr_t a;
      memcpy(&a, blobs[i], sizeof a);
      if (a.len == 0) continue;
      FUZZ_CHECK(a.len <= sizeof a.ss);
      char text[NET_ADDR_STRLEN];
      net_addr_str(&a, text, sizeof text);
      FUZZ_CHECK(strlen(text) < sizeof text);
      FUZZ_CHECK(net_addr_port(&a) >= 0 && net_addr_port(&a) <= 65535);
    }
  }
  free(r);
  return 0;
}
