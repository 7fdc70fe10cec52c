/* ib_device.h -- internal: the RDMA device and port the verbs transport (ibverbs.c) runs on.
 *
 * Opening picks the first ACTIVE port that WEFT_IB_HCA allows, the GID a RoCE port is addressed
 * by (WEFT_IB_GID_INDEX, else the RoCE v2 GID of the address the rank advertises), and allocates
 * the protection domain every connection registers its memory in. The connections themselves
 * (queue pairs, slots, credits) are ibverbs.c's. */
#ifndef WEFT_TRANSPORT_IB_DEVICE_H_
#define WEFT_TRANSPORT_IB_DEVICE_H_

#include <stddef.h>
#include <stdint.h>

#include "transport/ibv_wrap.h"

#if IBVW_HAVE_VERBS

typedef struct {
  const ibvw_lib_t *lib;
  struct ibv_context *ctx;
  struct ibv_pd *pd;
  char name[IBVW_NAME_MAX];
  int port, link_layer, gid_index, mtu; /* mtu: the port's active MTU (enum ibv_mtu) */
  uint16_t lid;
  union ibv_gid gid;
  uint32_t max_msg; /* the port's largest message: longer writes are cut */
} ib_device_t;

/* Opens the port: `hca` from ibvw_hca_parse, `gid_index` WEFT_IB_GID_INDEX (-1: choose), `ipv4`
 * the address this rank advertises (network order, 0 if none). On failure everything opened is
 * closed again and the message says why, listing the ports passed over. */
weft_result_t ib_device_open(const ibvw_lib_t *lib, const ibvw_hca_list_t *hca, int gid_index,
                             uint32_t ipv4, ib_device_t *d);
void ib_device_close(ib_device_t *d);

/* "rxe0 port 1, GID index 1, MTU 4096 (RoCE)". */
void ib_device_describe(const ib_device_t *d, char *buf, size_t cap);

/* "RoCE" or "InfiniBand". */
const char *ib_link_layer_name(int link_layer);

#endif /* IBVW_HAVE_VERBS */

/* The IPv4 address (network order) of a bootstrap address (net_addr_t), also when it is an
 * IPv4-mapped IPv6 one; 0 for none. */
uint32_t ib_advertised_ipv4(const void *bootstrap_addr);

#endif /* WEFT_TRANSPORT_IB_DEVICE_H_ */
