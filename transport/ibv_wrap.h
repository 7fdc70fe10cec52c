/* ibv_wrap.h -- internal: libibverbs loaded at run time, and the verbs transport's pure logic.
 *
 * weft never links libibverbs: the verbs transport (transport/ibverbs.c) finds it with dlopen at
 * its first use and reaches it through the table below, so the library builds and runs where
 * rdma-core is absent (the transport then reports that it has no device, and WEFT_TRANSPORT=auto
 * carries on over TCP). The headers come from libibverbs-dev at build time; a build without them
 * (IBVW_HAVE_VERBS 0) has the same entry points, and the transport says it was built without
 * verbs. The data-path calls (ibv_post_send, ibv_post_recv, ibv_poll_cq) are inline functions
 * of the header that go through the device context's own operations, so they need no symbol.
 *
 * The pure logic (which devices and ports WEFT_IB_HCA allows, which GID a RoCE port uses) needs
 * neither the library nor the headers and is unit-tested on any machine. */
#ifndef WEFT_TRANSPORT_IBV_WRAP_H_
#define WEFT_TRANSPORT_IBV_WRAP_H_

#include <stddef.h>
#include <stdint.h>

#include "include/weft.h"
#include "transport/transport.h"

/* -DWEFT_NO_VERBS builds without verbs even where the headers are installed (to test that). */
#if defined(__has_include) && !defined(WEFT_NO_VERBS)
#if __has_include(<infiniband/verbs.h>)
#define IBVW_HAVE_VERBS 1
#endif
#endif
#ifndef IBVW_HAVE_VERBS
#define IBVW_HAVE_VERBS 0
#endif

#if IBVW_HAVE_VERBS
#include <infiniband/verbs.h>
#endif

#ifdef __cplusplus
extern "C" {
#endif

/* ---- WEFT_IB_HCA: NCCL_IB_HCA's syntax -------------------------------------------------------
 * Comma-separated entries "name" or "name:port"; a leading '^' makes the list one of devices to
 * leave out, a leading '=' (after any '^') makes names exact instead of prefixes. Empty: every
 * device and port. */
#define IBVW_HCA_MAX 16
#define IBVW_NAME_MAX 64

typedef struct {
  char name[IBVW_NAME_MAX];
  int port; /* 0: any port */
} ibvw_hca_entry_t;

typedef struct {
  int exclude; /* '^': the entries name what not to use */
  int exact;   /* '=': names match whole, not as prefixes */
  int n;
  ibvw_hca_entry_t e[IBVW_HCA_MAX];
} ibvw_hca_list_t;

/* Parses `spec`; WEFT_ERR_INVALID_ARGUMENT naming WEFT_IB_HCA and the bad entry. */
weft_result_t ibvw_hca_parse(const char *spec, ibvw_hca_list_t *out);
/* Whether port `port` of device `dev` may be used. */
int ibvw_hca_match(const ibvw_hca_list_t *l, const char *dev, int port);

/* ---- GID choice on a RoCE port --------------------------------------------------------------- */
enum { IBVW_GID_IB_ROCE_V1 = 0, IBVW_GID_ROCE_V2 = 1 };

typedef struct {
  int index;
  int type; /* IBVW_GID_IB_ROCE_V1 or IBVW_GID_ROCE_V2 */
  uint8_t gid[16];
} ibvw_gid_t;

/* The GID index to use among `n` valid entries: `forced` when >= 0 (-1 if it is not among them);
 * else the RoCE v2 GID that maps `ipv4` (network order; 0 when the rank has none), then any RoCE
 * v2 GID of an IPv4 address, then any RoCE v2 GID, then the first entry; -1 when n is 0. RoCE v2
 * is routable (UDP/IP), and the GID of the interface the rank already talks on reaches its peers
 * by the same route. */
int ibvw_gid_pick(const ibvw_gid_t *g, int n, uint32_t ipv4, int forced);

/* "RoCE v2" / "IB/RoCE v1" as sysfs's gid_attrs/types files say it (trailing newline allowed). */
int ibvw_gid_type_parse(const char *text);

/* Bytes of an IB MTU enum value (1..5: 256..4096); 0 when unknown. */
int ibvw_mtu_bytes(int mtu_enum);

/* ---- the library ----------------------------------------------------------------------------- */
#if IBVW_HAVE_VERBS
/* The exported calls weft uses; ibv_reg_mr and ibv_query_port are macros in the header that end
 * in the plain exported symbols of the same name, which are what is looked up here. */
typedef struct {
  struct ibv_device **(*get_device_list)(int *num);
  void (*free_device_list)(struct ibv_device **list);
  const char *(*get_device_name)(struct ibv_device *dev);
  struct ibv_context *(*open_device)(struct ibv_device *dev);
  int (*close_device)(struct ibv_context *ctx);
  int (*query_device)(struct ibv_context *ctx, struct ibv_device_attr *attr);
  /* The compat entry point (the header's inline asks the provider first: ibvw_query_port). */
  int (*query_port_compat)(struct ibv_context *ctx, uint8_t port, void *attr);
  int (*query_gid)(struct ibv_context *ctx, uint8_t port, int index, union ibv_gid *gid);
  /* _ibv_query_gid_ex: NULL in libraries older than rdma-core 32 (sysfs is read instead). */
  int (*query_gid_ex)(struct ibv_context *ctx, uint32_t port, uint32_t index,
                      struct ibv_gid_entry *entry, uint32_t flags, size_t entry_size);
  struct ibv_pd *(*alloc_pd)(struct ibv_context *ctx);
  int (*dealloc_pd)(struct ibv_pd *pd);
  struct ibv_mr *(*reg_mr)(struct ibv_pd *pd, void *addr, size_t len, int access);
  /* NULL in libraries older than rdma-core 34: no GPUDirect RDMA over dma-buf then. */
  struct ibv_mr *(*reg_dmabuf_mr)(struct ibv_pd *pd, uint64_t offset, size_t len, uint64_t iova,
                                  int fd, int access);
  int (*dereg_mr)(struct ibv_mr *mr);
  struct ibv_cq *(*create_cq)(struct ibv_context *ctx, int cqe, void *user,
                              struct ibv_comp_channel *ch, int vector);
  int (*destroy_cq)(struct ibv_cq *cq);
  struct ibv_qp *(*create_qp)(struct ibv_pd *pd, struct ibv_qp_init_attr *attr);
  int (*modify_qp)(struct ibv_qp *qp, struct ibv_qp_attr *attr, int mask);
  int (*destroy_qp)(struct ibv_qp *qp);
  const char *(*wc_status_str)(enum ibv_wc_status status);
  int (*fork_init)(void);
} ibvw_lib_t;

/* The library, loaded once per process (thread-safe): NULL and a message saying why when it
 * cannot be loaded. ibv_fork_init runs right after loading, before any verbs resource exists:
 * Python launchers fork, and a child must not share registered pages with its parent. */
const ibvw_lib_t *ibvw_load(const char **why);

/* ibv_query_port as the header's inline does it, through the table. */
int ibvw_query_port(const ibvw_lib_t *lib, struct ibv_context *ctx, uint8_t port,
                    struct ibv_port_attr *attr);
#endif

/* ---- the transport's entry points for comm.c ------------------------------------------------- */
extern const transport_ops_t ibverbs_transport_ops;

/* What a rank publishes about its verbs port besides the side channel's address (for the choice
 * per peer before any connection exists). */
typedef struct {
  int present;    /* a usable port */
  int link_layer; /* 1 InfiniBand, 2 Ethernet (RoCE) */
  int gdr;        /* device buffers go straight from device memory (WEFT_IB_GDR, and it works) */
} ibvw_port_facts_t;

/* From a peer's published verbs blob. */
ibvw_port_facts_t ibverbs_blob_facts(const void *blob);

/* "rxe0 port 1, GID index 1, MTU 1024 (RoCE)" for WEFT_DEBUG's init line. */
void ibverbs_describe(const transport_t *t, char *buf, size_t cap);

#ifdef __cplusplus
}
#endif

#endif /* WEFT_TRANSPORT_IBV_WRAP_H_ */
