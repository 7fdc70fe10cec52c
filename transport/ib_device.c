/* ib_device.c -- the RDMA device and port the verbs transport runs on (ib_device.h). */
#include "transport/ib_device.h"

#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <stdio.h>
#include <string.h>

#include "common/error.h"
#include "common/net.h"

uint32_t ib_advertised_ipv4(const void *bootstrap_addr) {
  if (!bootstrap_addr) return 0;
  const net_addr_t *a = bootstrap_addr;
  if (a->ss.ss_family == AF_INET) return ((const struct sockaddr_in *)&a->ss)->sin_addr.s_addr;
  if (a->ss.ss_family == AF_INET6) {
    const struct in6_addr *v6 = &((const struct sockaddr_in6 *)&a->ss)->sin6_addr;
    if (IN6_IS_ADDR_V4MAPPED(v6)) {
      uint32_t v4;
      memcpy(&v4, v6->s6_addr + 12, 4);
      return v4;
    }
  }
  return 0;
}

#if IBVW_HAVE_VERBS

/* sysfs's word on a GID's type, for libraries without ibv_query_gid_ex. */
static int sysfs_gid_type(const char *dev, int port, int index) {
  char path[256], text[32] = "";
  snprintf(path, sizeof path, "/sys/class/infiniband/%s/ports/%d/gid_attrs/types/%d", dev, port,
           index);
  FILE *f = fopen(path, "r");
  if (!f) return IBVW_GID_IB_ROCE_V1;
  if (!fgets(text, sizeof text, f)) text[0] = '\0';
  fclose(f);
  return ibvw_gid_type_parse(text);
}

static int gid_zero(const uint8_t *g) {
  for (int i = 0; i < 16; i++)
    if (g[i]) return 0;
  return 1;
}

/* The valid GIDs of the port, with their types. */
static int read_gids(ib_device_t *d, int table_len, ibvw_gid_t *out, int cap) {
  int n = 0;
  for (int i = 0; i < table_len && n < cap; i++) {
    ibvw_gid_t g = {.index = i};
    if (d->lib->query_gid_ex) {
      struct ibv_gid_entry e;
      if (d->lib->query_gid_ex(d->ctx, (uint32_t)d->port, (uint32_t)i, &e, 0, sizeof e)) continue;
      memcpy(g.gid, e.gid.raw, 16);
      g.type = e.gid_type == IBV_GID_TYPE_ROCE_V2 ? IBVW_GID_ROCE_V2 : IBVW_GID_IB_ROCE_V1;
    } else {
      union ibv_gid raw;
      if (d->lib->query_gid(d->ctx, (uint8_t)d->port, i, &raw)) continue;
      memcpy(g.gid, raw.raw, 16);
      g.type = sysfs_gid_type(d->name, d->port, i);
    }
    if (!gid_zero(g.gid)) out[n++] = g;
  }
  return n;
}

static weft_result_t choose_gid(ib_device_t *d, int table_len, uint32_t ipv4, int forced) {
  if (d->link_layer != IBV_LINK_LAYER_ETHERNET) {
    /* InfiniBand within a subnet is addressed by LID; the GID is kept for completeness only. */
    d->gid_index = forced >= 0 ? forced : 0;
    if (d->lib->query_gid(d->ctx, (uint8_t)d->port, d->gid_index, &d->gid))
      memset(&d->gid, 0, sizeof d->gid);
    return WEFT_SUCCESS;
  }
  ibvw_gid_t gids[256] = {{0}};
  int n = read_gids(d, table_len, gids, 256);
  int pick = ibvw_gid_pick(gids, n, ipv4, forced);
  /* UNSUPPORTED either way: the port cannot be used here, as when WEFT_IB_HCA names no device.
   * WEFT_TRANSPORT=ib then fails init naming the rank, and auto goes on over TCP and says so;
   * only a malformed setting (a knob out of range) fails init in every mode. */
  if (pick < 0)
    return forced >= 0
               ? WEFT_ERR(WEFT_ERR_UNSUPPORTED,
                          "WEFT_IB_GID_INDEX=%d: %s port %d has no valid GID there (%d valid)",
                          forced, d->name, d->port, n)
               : WEFT_ERR(WEFT_ERR_UNSUPPORTED, "%s port %d has no valid GID (no IP address?)",
                          d->name, d->port);
  d->gid_index = pick;
  for (int i = 0; i < n; i++)
    if (gids[i].index == pick) memcpy(d->gid.raw, gids[i].gid, 16);
  return WEFT_SUCCESS;
}

/* Opens the first active port WEFT_IB_HCA allows; `seen` collects what was passed over. */
static weft_result_t open_port(ib_device_t *d, const ibvw_hca_list_t *hca, char *seen,
                               size_t cap, int *table_len) {
  int ndev = 0;
  struct ibv_device **list = d->lib->get_device_list(&ndev);
  if (!list || ndev == 0) {
    if (list) d->lib->free_device_list(list);
    return WEFT_ERR(WEFT_ERR_UNSUPPORTED, "no RDMA device");
  }
  size_t used = 0;
  seen[0] = '\0';
  for (int i = 0; i < ndev && !d->ctx; i++) {
    const char *name = d->lib->get_device_name(list[i]);
    if (!name) continue;
    struct ibv_context *ctx = d->lib->open_device(list[i]);
    struct ibv_device_attr da;
    if (!ctx || d->lib->query_device(ctx, &da)) {
      if (used < cap) used += (size_t)snprintf(seen + used, cap - used, " %s (cannot open)", name);
      if (ctx) d->lib->close_device(ctx);
      continue;
    }
    for (int p = 1; p <= da.phys_port_cnt && !d->ctx; p++) {
      struct ibv_port_attr pa;
      const char *state = NULL;
      if (!ibvw_hca_match(hca, name, p))
        state = "left out by WEFT_IB_HCA";
      else if (ibvw_query_port(d->lib, ctx, (uint8_t)p, &pa))
        state = "cannot query";
      else if (pa.state != IBV_PORT_ACTIVE)
        state = "not active";
      if (state) {
        if (used < cap)
          used += (size_t)snprintf(seen + used, cap - used, " %s:%d (%s)", name, p, state);
        continue;
      }
      d->ctx = ctx;
      d->port = p;
      d->link_layer = pa.link_layer == IBV_LINK_LAYER_ETHERNET ? IBV_LINK_LAYER_ETHERNET
                                                               : IBV_LINK_LAYER_INFINIBAND;
      d->lid = pa.lid;
      d->mtu = pa.active_mtu;
      d->max_msg = pa.max_msg_sz ? pa.max_msg_sz : 1u << 30;
      *table_len = pa.gid_tbl_len;
      snprintf(d->name, sizeof d->name, "%s", name);
    }
    if (!d->ctx) d->lib->close_device(ctx);
  }
  d->lib->free_device_list(list);
  if (!d->ctx) return WEFT_ERR(WEFT_ERR_UNSUPPORTED, "no active RDMA port:%s", seen);
  return WEFT_SUCCESS;
}

weft_result_t ib_device_open(const ibvw_lib_t *lib, const ibvw_hca_list_t *hca, int gid_index,
                             uint32_t ipv4, ib_device_t *d) {
  memset(d, 0, sizeof *d);
  d->lib = lib;
  char seen[512];
  int table_len = 0;
  weft_result_t res;
  WEFT_CHECK_GOTO(open_port(d, hca, seen, sizeof seen, &table_len), res, fail);
  WEFT_CHECK_GOTO(choose_gid(d, table_len, ipv4, gid_index), res, fail);
  d->pd = lib->alloc_pd(d->ctx);
  if (!d->pd) {
    res = WEFT_ERR(WEFT_ERR_SYSTEM, "%s: ibv_alloc_pd: %s", d->name, strerror(errno));
    goto fail;
  }
  return WEFT_SUCCESS;
fail:
  ib_device_close(d);
  return res;
}

void ib_device_close(ib_device_t *d) {
  if (d->pd) d->lib->dealloc_pd(d->pd);
  if (d->ctx) d->lib->close_device(d->ctx);
  d->pd = NULL;
  d->ctx = NULL;
}

const char *ib_link_layer_name(int link_layer) {
  return link_layer == IBV_LINK_LAYER_ETHERNET ? "RoCE" : "InfiniBand";
}

void ib_device_describe(const ib_device_t *d, char *buf, size_t cap) {
  snprintf(buf, cap, "%s port %d, GID index %d, MTU %d (%s)", d->name, d->port, d->gid_index,
           ibvw_mtu_bytes(d->mtu), ib_link_layer_name(d->link_layer));
}

#endif /* IBVW_HAVE_VERBS */
