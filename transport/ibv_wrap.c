/* ibv_wrap.c -- libibverbs found at run time (dlopen), and the verbs transport's pure logic. */
#include "transport/ibv_wrap.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "common/error.h"

#if IBVW_HAVE_VERBS
#include <dlfcn.h>
#include <pthread.h>
#endif

/* ---- WEFT_IB_HCA ----------------------------------------------------------------------------- */

weft_result_t ibvw_hca_parse(const char *spec, ibvw_hca_list_t *out) {
  memset(out, 0, sizeof *out);
  const char *s = spec ? spec : "";
  if (*s == '^') out->exclude = 1, s++;
  if (*s == '=') out->exact = 1, s++;
  while (*s) {
    const char *end = strchr(s, ',');
    size_t len = end ? (size_t)(end - s) : strlen(s);
    if (len > 0) {
      if (out->n == IBVW_HCA_MAX)
        return WEFT_ERR(WEFT_ERR_INVALID_ARGUMENT, "WEFT_IB_HCA=\"%s\" names more than %d devices",
                        spec, IBVW_HCA_MAX);
      ibvw_hca_entry_t *e = &out->e[out->n];
      const char *colon = memchr(s, ':', len);
      size_t name_len = colon ? (size_t)(colon - s) : len;
      if (name_len == 0 || name_len >= sizeof e->name)
        return WEFT_ERR(WEFT_ERR_INVALID_ARGUMENT,
                        "WEFT_IB_HCA=\"%s\": entry \"%.*s\" has no device name or one too long",
                        spec, (int)len, s);
      memcpy(e->name, s, name_len);
      e->name[name_len] = '\0';
      if (colon) {
        char num[16];
        size_t num_len = len - name_len - 1;
        char *stop = NULL;
        if (num_len == 0 || num_len >= sizeof num)
          return WEFT_ERR(WEFT_ERR_INVALID_ARGUMENT, "WEFT_IB_HCA=\"%s\": bad port in \"%.*s\"",
                          spec, (int)len, s);
        memcpy(num, colon + 1, num_len);
        num[num_len] = '\0';
        long port = strtol(num, &stop, 10);
        if (*stop != '\0' || port < 1 || port > 255)
          return WEFT_ERR(WEFT_ERR_INVALID_ARGUMENT,
                          "WEFT_IB_HCA=\"%s\": port \"%s\" is not a number in 1..255", spec, num);
        e->port = (int)port;
      }
      out->n++;
    }
    if (!end) break;
    s = end + 1;
  }
  return WEFT_SUCCESS;
}

static int entry_matches(const ibvw_hca_list_t *l, const ibvw_hca_entry_t *e, const char *dev,
                         int port) {
  int name_ok = l->exact ? strcmp(e->name, dev) == 0 : strncmp(e->name, dev, strlen(e->name)) == 0;
  return name_ok && (e->port == 0 || e->port == port);
}

int ibvw_hca_match(const ibvw_hca_list_t *l, const char *dev, int port) {
  if (l->n == 0) return 1;
  int hit = 0;
  for (int i = 0; i < l->n && !hit; i++) hit = entry_matches(l, &l->e[i], dev, port);
  return l->exclude ? !hit : hit;
}

/* ---- GID choice ------------------------------------------------------------------------------ */

static int is_v4_mapped(const uint8_t *g) {
  static const uint8_t prefix[12] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff};
  return memcmp(g, prefix, sizeof prefix) == 0;
}

int ibvw_gid_pick(const ibvw_gid_t *g, int n, uint32_t ipv4, int forced) {
  if (forced >= 0) {
    for (int i = 0; i < n; i++)
      if (g[i].index == forced) return forced;
    return -1;
  }
  if (n <= 0) return -1;
  if (ipv4)
    for (int i = 0; i < n; i++)
      if (g[i].type == IBVW_GID_ROCE_V2 && is_v4_mapped(g[i].gid) &&
          memcmp(g[i].gid + 12, &ipv4, 4) == 0)
        return g[i].index;
  for (int i = 0; i < n; i++)
    if (g[i].type == IBVW_GID_ROCE_V2 && is_v4_mapped(g[i].gid)) return g[i].index;
  for (int i = 0; i < n; i++)
    if (g[i].type == IBVW_GID_ROCE_V2) return g[i].index;
  return g[0].index;
}

int ibvw_gid_type_parse(const char *text) {
  return strncasecmp(text, "RoCE v2", 7) == 0 ? IBVW_GID_ROCE_V2 : IBVW_GID_IB_ROCE_V1;
}

int ibvw_mtu_bytes(int mtu_enum) { return mtu_enum >= 1 && mtu_enum <= 5 ? 128 << mtu_enum : 0; }

/* ---- the library ----------------------------------------------------------------------------- */
#if IBVW_HAVE_VERBS

static ibvw_lib_t lib;
static const ibvw_lib_t *loaded;
static char load_error[256];
static pthread_once_t load_once = PTHREAD_ONCE_INIT;

/* Looks `name` up into *slot; a required one missing fails the load. */
static int find(void *h, const char *name, void *slot, int required) {
  void *sym = dlsym(h, name);
  memcpy(slot, &sym, sizeof sym); /* object to function pointer, as POSIX allows */
  if (!sym && required) {
    snprintf(load_error, sizeof load_error, "libibverbs.so.1 has no %s", name);
    return 0;
  }
  return 1;
}

static void load(void) {
  void *h = dlopen("libibverbs.so.1", RTLD_NOW | RTLD_LOCAL);
  if (!h) {
    snprintf(load_error, sizeof load_error, "libibverbs not found (%s)", dlerror());
    return;
  }
  int ok =
      find(h, "ibv_get_device_list", &lib.get_device_list, 1) &&
      find(h, "ibv_free_device_list", &lib.free_device_list, 1) &&
      find(h, "ibv_get_device_name", &lib.get_device_name, 1) &&
      find(h, "ibv_open_device", &lib.open_device, 1) &&
      find(h, "ibv_close_device", &lib.close_device, 1) &&
      find(h, "ibv_query_device", &lib.query_device, 1) &&
      find(h, "ibv_query_port", &lib.query_port_compat, 1) &&
      find(h, "ibv_query_gid", &lib.query_gid, 1) &&
      find(h, "_ibv_query_gid_ex", &lib.query_gid_ex, 0) &&
      find(h, "ibv_alloc_pd", &lib.alloc_pd, 1) && find(h, "ibv_dealloc_pd", &lib.dealloc_pd, 1) &&
      find(h, "ibv_reg_mr", &lib.reg_mr, 1) && find(h, "ibv_dereg_mr", &lib.dereg_mr, 1) &&
      find(h, "ibv_reg_dmabuf_mr", &lib.reg_dmabuf_mr, 0) &&
      find(h, "ibv_create_cq", &lib.create_cq, 1) &&
      find(h, "ibv_destroy_cq", &lib.destroy_cq, 1) &&
      find(h, "ibv_create_qp", &lib.create_qp, 1) && find(h, "ibv_modify_qp", &lib.modify_qp, 1) &&
      find(h, "ibv_destroy_qp", &lib.destroy_qp, 1) &&
      find(h, "ibv_wc_status_str", &lib.wc_status_str, 1) &&
      find(h, "ibv_fork_init", &lib.fork_init, 1);
  if (!ok) return; /* the library stays loaded: unloading it is not worth the risk */
  /* Fails only where the kernel cannot keep registered pages out of a child; the transport then
   * still works in a process that does not fork while connections are open. */
  (void)lib.fork_init();
  loaded = &lib;
}

const ibvw_lib_t *ibvw_load(const char **why) {
  pthread_once(&load_once, load);
  if (!loaded && why) *why = load_error;
  return loaded;
}

int ibvw_query_port(const ibvw_lib_t *l, struct ibv_context *ctx, uint8_t port,
                    struct ibv_port_attr *attr) {
  struct verbs_context *vctx = verbs_get_ctx_op(ctx, query_port);
  memset(attr, 0, sizeof *attr);
  if (vctx) return vctx->query_port(ctx, port, attr, sizeof *attr);
  return l->query_port_compat(ctx, port, attr);
}

#endif
