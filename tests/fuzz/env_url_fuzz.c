/* env_url_fuzz.c -- the launcher's environment (bootstrap/env.c) and `tcp://` URLs
 * (common/net.c's net_parse_url and net_parse_hostport).
 *
 * Input: lines "NAME=VALUE", the environment that boot_env_resolve sees. Resolving either fails
 * with WEFT_ERR_INVALID_ARGUMENT and a message, or gives a rank inside the world, local rank and
 * size inside it, a port in 1..65535 and a host without brackets. Every value is also parsed as a
 * URL and as host:port: a parsed one, written back as tcp://host:port, parses to the same. */
#include <string.h>

#include "bootstrap/env.h"
#include "common/error.h"
#include "common/net.h"
#include "tests/fuzz/fuzz.h"

#define MAX_VARS 32

typedef struct {
  int n;
  char *name[MAX_VARS], *value[MAX_VARS];
} env_map_t;

static const char *lookup(void *ctx, const char *name) {
  const env_map_t *m = ctx;
  /* The last line wins, as in a shell. */
  for (int i = m->n - 1; i >= 0; i--)
    if (strcmp(m->name[i], name) == 0) return m->value[i];
  return NULL;
}

static void check_url(const char *s) {
  char host[256];
  int port = -1;
  err_clear();
  if (net_parse_url(s, host, sizeof host, &port) != WEFT_SUCCESS) {
    FUZZ_CHECK(err_last()[0] != '\0');
  } else {
    FUZZ_CHECK(host[0] != '\0' && strlen(host) < sizeof host);
    FUZZ_CHECK(port >= 1 && port <= 65535);
    FUZZ_CHECK(!strchr(host, '[') && !strchr(host, ']'));
    char again[300], host2[256];
    int port2 = -1;
    snprintf(again, sizeof again, strchr(host, ':') ? "tcp://[%s]:%d" : "tcp://%s:%d", host, port);
    FUZZ_CHECK(net_parse_url(again, host2, sizeof host2, &port2) == WEFT_SUCCESS);
    FUZZ_CHECK(strcmp(host, host2) == 0 && port == port2);
  }
  /* A tiny buffer: a long host must be refused, never truncated or overrun. */
  char small[8];
  err_clear();
  if (net_parse_hostport(s, small, sizeof small, &port) != WEFT_SUCCESS)
    FUZZ_CHECK(err_last()[0] != '\0');
  else
    FUZZ_CHECK(strlen(small) < sizeof small && port >= 1 && port <= 65535);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  char *text = malloc(size + 1);
  FUZZ_CHECK(text);
  memcpy(text, data, size);
  text[size] = '\0';
  env_map_t m = {0};
  for (char *save = NULL, *line = strtok_r(text, "\n", &save); line && m.n < MAX_VARS;
       line = strtok_r(NULL, "\n", &save)) {
    char *eq = strchr(line, '=');
    if (!eq) continue;
    *eq = '\0';
    m.name[m.n] = line;
    m.value[m.n] = eq + 1;
    m.n++;
  }
  for (int i = 0; i < m.n; i++) check_url(m.value[i]);

  boot_env_t env;
  err_clear();
  weft_result_t res = boot_env_resolve(lookup, &m, &env);
  if (res != WEFT_SUCCESS) {
    FUZZ_CHECK(res == WEFT_ERR_INVALID_ARGUMENT);
    FUZZ_CHECK(err_last()[0] != '\0');
  } else {
    FUZZ_CHECK(env.world_size >= 1 && env.rank >= 0 && env.rank < env.world_size);
    FUZZ_CHECK(env.local_size == -1 || (env.local_size >= 1 && env.local_size <= env.world_size));
    FUZZ_CHECK(env.local_rank >= -1);
    if (env.local_size != -1 && env.local_rank != -1) FUZZ_CHECK(env.local_rank < env.local_size);
    FUZZ_CHECK(env.master_port >= 1 && env.master_port <= 65535);
    FUZZ_CHECK(env.master_host[0] != '\0');
    FUZZ_CHECK(strlen(env.master_host) < sizeof env.master_host);
    FUZZ_CHECK(strlen(env.job_id) < sizeof env.job_id);
    FUZZ_CHECK(env.source != NULL);
    FUZZ_CHECK(boot_job_hash(env.job_id) != 0);
  }
  free(text);
  return 0;
}
