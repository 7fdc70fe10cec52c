/* transports.c -- weft-info's transport section: what each of weft's transports needs, probed on
 * this machine (drivers and name lookups in a child process with a deadline: probe.h). */
#include <arpa/inet.h>
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <ifaddrs.h>
#include <net/if.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/statvfs.h>
#include <unistd.h>

#include "common/error.h"
#include "common/net.h"
#include "tools/info/info.h"
#include "tools/info/probe.h"
#include "transport/ibv_wrap.h"

/* Drivers get this long to load and answer; a healthy one takes well under a second. */
#define PROBE_TIMEOUT_MS 5000

/* ---- tcp ------------------------------------------------------------------------------------ */

#define MAX_IFS 32

typedef struct {
  int n;
  struct {
    char name[IF_NAMESIZE + 1];
    char addr[NET_ADDR_STRLEN];
    int up, loopback;
  } ifs[MAX_IFS];
  char listen_error[256]; /* "" when a listener on 127.0.0.1 opened */
  /* The address rendezvous.c would advertise (net_local_addr_for with WEFT_SOCKET_IFNAME): to a
   * master on this host, and to one across the default route (or WEFT_MASTER_ADDR). */
  char local[NET_ADDR_STRLEN], local_error[256];
  char remote_target[128], remote[NET_ADDR_STRLEN], remote_error[256];
} tcp_facts_t;

static void advertised(const char *host, const char *ifname, char *out, char *err) {
  net_addr_t peer, mine;
  weft_result_t res = net_resolve(host, 0, &peer);
  if (res == WEFT_SUCCESS) res = net_local_addr_for(&peer, ifname, &mine);
  if (res != WEFT_SUCCESS) {
    snprintf(err, 256, "%s", weft_last_error());
    return;
  }
  net_addr_str(&mine, out, NET_ADDR_STRLEN);
  /* Port 0: the address alone is what matters. */
  size_t n = strlen(out);
  if (n > 2 && strcmp(out + n - 2, ":0") == 0) out[n - 2] = '\0';
}

static void tcp_probe(void *out, size_t size, const void *arg) {
  (void)size;
  tcp_facts_t *t = out;
  const weft_config_t *cfg = arg;
  struct ifaddrs *list = NULL;
  if (getifaddrs(&list) == 0) {
    for (const struct ifaddrs *i = list; i && t->n < MAX_IFS; i = i->ifa_next) {
      if (!i->ifa_addr) continue;
      int fam = i->ifa_addr->sa_family;
      if (fam != AF_INET && fam != AF_INET6) continue;
      const void *a = fam == AF_INET
                          ? (const void *)&((struct sockaddr_in *)i->ifa_addr)->sin_addr
                          : (const void *)&((struct sockaddr_in6 *)i->ifa_addr)->sin6_addr;
      snprintf(t->ifs[t->n].name, sizeof t->ifs[t->n].name, "%s", i->ifa_name);
      inet_ntop(fam, a, t->ifs[t->n].addr, sizeof t->ifs[t->n].addr);
      t->ifs[t->n].up = (i->ifa_flags & IFF_UP) != 0;
      t->ifs[t->n].loopback = (i->ifa_flags & IFF_LOOPBACK) != 0;
      t->n++;
    }
    freeifaddrs(list);
  }
  net_addr_t lo;
  int fd = -1;
  if (net_resolve("127.0.0.1", 0, &lo) != WEFT_SUCCESS ||
      net_listen(&lo, 1, &fd, NULL) != WEFT_SUCCESS)
    snprintf(t->listen_error, sizeof t->listen_error, "%s", weft_last_error());
  else
    close(fd);
  advertised("127.0.0.1", cfg->socket_ifname, t->local, t->local_error);
  /* 192.0.2.1 (TEST-NET-1) is never on a local network: the route to it is the default route. A
   * UDP connect sends nothing. */
  const char *master = getenv("WEFT_MASTER_ADDR");
  snprintf(t->remote_target, sizeof t->remote_target, "%s",
           master && *master ? master : "192.0.2.1");
  advertised(t->remote_target, cfg->socket_ifname, t->remote, t->remote_error);
}

static void show_tcp(emit_t *e, const weft_config_t *cfg) {
  tcp_facts_t t;
  char why[256];
  emit_obj(e, NULL);
  emit_str(e, "name", "tcp");
  if (probe_run(tcp_probe, cfg, &t, sizeof t, PROBE_TIMEOUT_MS, why, sizeof why) != 0) {
    emit_bool(e, "usable", 0);
    emit_str(e, "why", why);
    emit_end(e);
    return;
  }
  /* Init advertises an address before anything else (bootstrap/rendezvous.c): without one, no
   * communicator starts, whatever the transport. */
  emit_bool(e, "usable", t.listen_error[0] == 0 && t.local_error[0] == 0);
  if (t.listen_error[0])
    emit_strf(e, "why", "cannot listen on 127.0.0.1: %s", t.listen_error);
  else if (t.local_error[0])
    emit_strf(e, "why", "no address to advertise: %s", t.local_error);
  emit_str(e, "socket_ifname",
           cfg->socket_ifname[0] ? cfg->socket_ifname : "(unset: routing table)");
  emit_obj(e, "advertised");
  emit_str(e, "to_this_host", t.local[0] ? t.local : NULL);
  if (t.local_error[0]) emit_str(e, "to_this_host_error", t.local_error);
  emit_str(e, "remote", t.remote_target);
  emit_str(e, "to_remote", t.remote[0] ? t.remote : NULL);
  if (t.remote_error[0]) emit_str(e, "to_remote_error", t.remote_error);
  emit_end(e);
  emit_arr(e, "interfaces");
  for (int i = 0; i < t.n; i++)
    emit_strf(e, NULL, "%s %s%s%s", t.ifs[i].name, t.ifs[i].addr, t.ifs[i].up ? "" : " (down)",
              t.ifs[i].loopback ? " (loopback)" : "");
  emit_end(e);
  emit_end(e);
}

/* ---- shm ------------------------------------------------------------------------------------ */

static void show_shm(emit_t *e) {
  emit_obj(e, NULL);
  emit_str(e, "name", "shm");
  struct statvfs st;
  char why[256] = "";
  if (statvfs("/dev/shm", &st) != 0) {
    snprintf(why, sizeof why, "/dev/shm: %s", strerror(errno));
  } else {
    emit_int(e, "dev_shm_size_bytes", (long long)st.f_blocks * (long long)st.f_frsize);
    emit_int(e, "dev_shm_free_bytes", (long long)st.f_bavail * (long long)st.f_frsize);
    /* What a connection does first: create a segment and size it (shm_ring.c). */
    char name[64];
    snprintf(name, sizeof name, "/weft-info-%d", (int)getpid());
    int fd = shm_open(name, O_CREAT | O_EXCL | O_RDWR, 0600);
    if (fd < 0) {
      snprintf(why, sizeof why, "shm_open: %s", strerror(errno));
    } else {
      if (ftruncate(fd, 4096) != 0) snprintf(why, sizeof why, "ftruncate: %s", strerror(errno));
      close(fd);
      shm_unlink(name);
    }
  }
  emit_bool(e, "usable", why[0] == 0);
  if (why[0]) emit_str(e, "why", why);
  emit_str(e, "scope", "ranks on this host");
  emit_end(e);
}

/* ---- CUDA: cuda_ipc and staged -------------------------------------------------------------- */

#define MAX_GPUS 16

typedef struct {
  char error[256]; /* "" when the driver loaded and answered */
  int driver_version, n;
  struct {
    char name[128];
    int major, minor, uva, dmabuf;
  } dev[MAX_GPUS];
} cuda_facts_t;

/* The driver API through dlopen: this works in a CPU-only build too, and a machine without the
 * driver only loses this section. Attribute numbers as cuda.h's CUdevice_attribute. */
enum {
  ATTR_UNIFIED_ADDRESSING = 41, /* cudaIpc* needs unified addressing */
  ATTR_CC_MAJOR = 75,
  ATTR_CC_MINOR = 76,
  ATTR_DMA_BUF_SUPPORTED = 124 /* GPUDirect RDMA through dma-buf (WEFT_IB_GDR) */
};

static void cuda_probe(void *out, size_t size, const void *arg) {
  (void)size;
  (void)arg;
  cuda_facts_t *c = out;
  void *h = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
  if (!h) {
    snprintf(c->error, sizeof c->error, "no CUDA driver: %s", dlerror());
    return;
  }
  int (*init)(unsigned) = (int (*)(unsigned))dlsym(h, "cuInit");
  int (*version)(int *) = (int (*)(int *))dlsym(h, "cuDriverGetVersion");
  int (*count)(int *) = (int (*)(int *))dlsym(h, "cuDeviceGetCount");
  int (*get)(int *, int) = (int (*)(int *, int))dlsym(h, "cuDeviceGet");
  int (*name)(char *, int, int) = (int (*)(char *, int, int))dlsym(h, "cuDeviceGetName");
  int (*attr)(int *, int, int) = (int (*)(int *, int, int))dlsym(h, "cuDeviceGetAttribute");
  if (!init || !version || !count || !get || !name || !attr) {
    snprintf(c->error, sizeof c->error, "libcuda.so.1 lacks the driver API");
    return;
  }
  version(&c->driver_version);
  int rc = init(0);
  if (rc != 0) {
    /* 100: CUDA_ERROR_NO_DEVICE. */
    snprintf(c->error, sizeof c->error,
             rc == 100 ? "no GPU (cuInit: no device)" : "cuInit failed (CUresult %d)", rc);
    return;
  }
  int n = 0;
  if (count(&n) != 0) n = 0;
  if (n == 0) snprintf(c->error, sizeof c->error, "no GPU (the driver sees no device)");
  for (int i = 0; i < n && c->n < MAX_GPUS; i++) {
    int d;
    if (get(&d, i) != 0) continue;
    name(c->dev[c->n].name, sizeof c->dev[c->n].name, d);
    attr(&c->dev[c->n].major, ATTR_CC_MAJOR, d);
    attr(&c->dev[c->n].minor, ATTR_CC_MINOR, d);
    attr(&c->dev[c->n].uva, ATTR_UNIFIED_ADDRESSING, d);
    attr(&c->dev[c->n].dmabuf, ATTR_DMA_BUF_SUPPORTED, d);
    c->n++;
  }
}

static void show_cuda(emit_t *e) {
  cuda_facts_t c;
  char why[256] = "";
  if (probe_run(cuda_probe, NULL, &c, sizeof c, PROBE_TIMEOUT_MS, why, sizeof why) != 0)
    snprintf(c.error, sizeof c.error, "CUDA probe: %s", why);
  int built = (weft_build_features() & WEFT_FEATURE_CUDA) != 0;
  int uva = 0;
  for (int i = 0; i < c.n; i++) uva |= c.dev[i].uva;
  /* Why device buffers cannot move here, or "" where they can. */
  char no_dev[320] = "";
  if (!built)
    snprintf(no_dev, sizeof no_dev, "this build has no CUDA (--config=nocuda or no toolkit)%s%s",
             c.error[0] ? "; " : "", c.error);
  else if (c.error[0] || c.n == 0)
    snprintf(no_dev, sizeof no_dev, "%s", c.error[0] ? c.error : "no GPU");

  emit_obj(e, NULL);
  emit_str(e, "name", "cuda_ipc");
  emit_bool(e, "usable", !no_dev[0] && uva);
  if (no_dev[0])
    emit_str(e, "why", no_dev);
  else if (!uva)
    emit_str(e, "why", "no device has unified addressing (cudaIpc needs it)");
  emit_str(e, "scope", "device buffers of ranks on this host");
  if (c.driver_version)
    emit_strf(e, "driver", "%d.%d", c.driver_version / 1000, c.driver_version % 1000 / 10);
  emit_arr(e, "devices");
  for (int i = 0; i < c.n; i++) {
    emit_obj(e, NULL);
    emit_int(e, "index", i);
    emit_str(e, "name", c.dev[i].name);
    emit_strf(e, "compute_capability", "%d.%d", c.dev[i].major, c.dev[i].minor);
    emit_bool(e, "ipc", c.dev[i].uva);
    emit_bool(e, "dma_buf", c.dev[i].dmabuf);
    emit_end(e);
  }
  emit_end(e);
  emit_end(e);

  emit_obj(e, NULL);
  emit_str(e, "name", "staged");
  emit_bool(e, "usable", !no_dev[0]);
  if (no_dev[0]) emit_str(e, "why", no_dev);
  emit_str(e, "scope", "device buffers copied through host memory, then tcp, shm or rdma");
  emit_end(e);
}

/* ---- rdma (verbs) --------------------------------------------------------------------------- */

#define MAX_PORTS 32
#define MAX_GIDS 4

typedef struct {
  char dev[IBVW_NAME_MAX];
  int port, active, allowed, link_layer, mtu_bytes, ngid;
  char gid[MAX_GIDS][64]; /* "index gid" */
} verbs_port_t;

typedef struct {
  char error[256];
  int ndev, n;
  verbs_port_t p[MAX_PORTS];
} verbs_facts_t;

static void verbs_probe(void *out, size_t size, const void *arg) {
  (void)size;
  verbs_facts_t *v = out;
  const weft_config_t *cfg = arg;
#if IBVW_HAVE_VERBS
  const char *why = NULL;
  const ibvw_lib_t *lib = ibvw_load(&why);
  if (!lib) {
    snprintf(v->error, sizeof v->error, "%s", why ? why : "libibverbs did not load");
    return;
  }
  ibvw_hca_list_t hca;
  if (ibvw_hca_parse(cfg->ib_hca, &hca) != WEFT_SUCCESS) {
    snprintf(v->error, sizeof v->error, "WEFT_IB_HCA: %s", weft_last_error());
    return;
  }
  struct ibv_device **list = lib->get_device_list(&v->ndev);
  if (!list || v->ndev == 0) {
    snprintf(v->error, sizeof v->error, "libibverbs loaded, but there is no RDMA device");
    if (list) lib->free_device_list(list);
    return;
  }
  for (int d = 0; d < v->ndev; d++) {
    const char *dname = lib->get_device_name(list[d]);
    struct ibv_context *ctx = lib->open_device(list[d]);
    if (!ctx) continue;
    struct ibv_device_attr da;
    if (lib->query_device(ctx, &da) == 0) {
      for (int port = 1; port <= da.phys_port_cnt && v->n < MAX_PORTS; port++) {
        struct ibv_port_attr pa;
        if (ibvw_query_port(lib, ctx, (uint8_t)port, &pa) != 0) continue;
        verbs_port_t *p = &v->p[v->n++];
        snprintf(p->dev, sizeof p->dev, "%s", dname);
        p->port = port;
        p->active = pa.state == IBV_PORT_ACTIVE;
        p->allowed = ibvw_hca_match(&hca, dname, port);
        p->link_layer = pa.link_layer == IBV_LINK_LAYER_ETHERNET ? 2 : 1;
        p->mtu_bytes = ibvw_mtu_bytes(pa.active_mtu);
        for (int g = 0; g < pa.gid_tbl_len && p->ngid < MAX_GIDS; g++) {
          union ibv_gid gid;
          static const uint8_t zero[16];
          if (lib->query_gid(ctx, (uint8_t)port, g, &gid) != 0 || !memcmp(gid.raw, zero, 16))
            continue;
          char txt[INET6_ADDRSTRLEN];
          inet_ntop(AF_INET6, gid.raw, txt, sizeof txt);
          snprintf(p->gid[p->ngid++], sizeof p->gid[0], "%d %s", g, txt);
        }
      }
    }
    lib->close_device(ctx);
  }
  lib->free_device_list(list);
#else
  (void)cfg;
  snprintf(v->error, sizeof v->error, "this build has no verbs support (no infiniband/verbs.h)");
#endif
}

static void show_rdma(emit_t *e, const weft_config_t *cfg) {
  verbs_facts_t v;
  char why[256] = "";
  if (probe_run(verbs_probe, cfg, &v, sizeof v, PROBE_TIMEOUT_MS, why, sizeof why) != 0)
    snprintf(v.error, sizeof v.error, "verbs probe: %s", why);
  int usable = 0;
  for (int i = 0; i < v.n; i++) usable |= v.p[i].active && v.p[i].allowed;
  emit_obj(e, NULL);
  emit_str(e, "name", "rdma");
  emit_bool(e, "usable", usable);
  if (v.error[0])
    emit_str(e, "why", v.error);
  else if (!usable)
    emit_strf(e, "why", "no ACTIVE port%s", cfg->ib_hca[0] ? " that WEFT_IB_HCA allows" : "");
  emit_str(e, "scope", "ranks on other hosts (auto), every peer with WEFT_TRANSPORT=ib");
  emit_arr(e, "ports");
  for (int i = 0; i < v.n; i++) {
    emit_obj(e, NULL);
    emit_str(e, "device", v.p[i].dev);
    emit_int(e, "port", v.p[i].port);
    emit_bool(e, "active", v.p[i].active);
    emit_bool(e, "allowed_by_WEFT_IB_HCA", v.p[i].allowed);
    emit_str(e, "link_layer", v.p[i].link_layer == 2 ? "RoCE" : "InfiniBand");
    emit_int(e, "mtu", v.p[i].mtu_bytes);
    emit_arr(e, "gids");
    for (int g = 0; g < v.p[i].ngid; g++) emit_str(e, NULL, v.p[i].gid[g]);
    emit_end(e);
    emit_end(e);
  }
  emit_end(e);
  emit_end(e);
}

void info_transports(emit_t *e, const weft_config_t *cfg) {
  emit_arr(e, "transports");
  show_tcp(e, cfg);
  show_shm(e);
  show_cuda(e);
  show_rdma(e, cfg);
  emit_end(e);
}
