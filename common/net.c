/* net.c -- TCP sockets made a bit less boring: parsing, resolving, timeouts on every wait. */
#include "common/net.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <ifaddrs.h>
#include <net/if.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <stdio.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "common/clock.h"
#include "common/error.h"

/* ---- Deadlines ---------------------------------------------------------------------------- */

/* -1 stands for "no deadline" so that a negative timeout waits forever, like poll(). */
static int64_t deadline_after(int timeout_ms) {
  return timeout_ms < 0 ? -1 : clock_now_ms() + timeout_ms;
}

static int ms_left(int64_t deadline) {
  if (deadline < 0) return -1;
  int64_t left = deadline - clock_now_ms();
  return left > 0 ? (int)left : 0;
}

static void sleep_ms(int ms) {
  struct timespec ts = {ms / 1000, (long)(ms % 1000) * 1000000L};
  while (nanosleep(&ts, &ts) != 0 && errno == EINTR) {
  }
}

/* ---- Parsing and addresses ---------------------------------------------------------------- */

/* Digits only, 1..65535: "29500x" or "+1" are typos the user should hear about. */
static int parse_port(const char *s, int *port) {
  long v = 0;
  if (*s == '\0') return -1;
  for (; *s; s++) {
    if (*s < '0' || *s > '9') return -1;
    v = v * 10 + (*s - '0');
    if (v > 65535) return -1;
  }
  if (v < 1) return -1;
  *port = (int)v;
  return 0;
}

static int host_char_ok(char c, int bracketed) {
  if ((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9')) return 1;
  if (c == '.' || c == '-' || c == '_') return 1;
  return bracketed && (c == ':' || c == '%');
}

/* `whole` is what the user wrote (the URL or the host:port), quoted in every message. */
static weft_result_t split_hostport(const char *s, const char *whole, char *host, size_t hostcap,
                                    int *port) {
  const char *h, *hend, *p;
  int bracketed = s[0] == '[';
  if (bracketed) {
    h = s + 1;
    hend = strchr(h, ']');
    if (!hend)
      return WEFT_ERR(WEFT_ERR_INVALID_ARGUMENT, "'%s': missing ']' after IPv6 address", whole);
    if (hend[1] != ':')
      return WEFT_ERR(WEFT_ERR_INVALID_ARGUMENT, "'%s': expected ':port' after ']'", whole);
    p = hend + 2;
  } else {
    const char *colon = strrchr(s, ':');
    if (!colon)
      return WEFT_ERR(WEFT_ERR_INVALID_ARGUMENT, "'%s': missing ':port' (expected host:port)",
                      whole);
    if (memchr(s, ':', (size_t)(colon - s)))
      return WEFT_ERR(WEFT_ERR_INVALID_ARGUMENT,
                      "'%s': write an IPv6 address in brackets, e.g. [::1]:29500", whole);
    h = s;
    hend = colon;
    p = colon + 1;
  }
  size_t hl = (size_t)(hend - h);
  if (hl == 0) return WEFT_ERR(WEFT_ERR_INVALID_ARGUMENT, "'%s': empty host", whole);
  /* Brackets hold an IPv6 address, which always has a ':'; "[%]" or "[node1]" would otherwise be
   * taken as a host that only getaddrinfo refuses, later and less clearly. */
  if (bracketed && !memchr(h, ':', hl))
    return WEFT_ERR(WEFT_ERR_INVALID_ARGUMENT,
                    "'%s': brackets are for IPv6 addresses (e.g. [::1]:29500); write a host name "
                    "or IPv4 address without them",
                    whole);
  for (size_t i = 0; i < hl; i++) {
    if (!host_char_ok(h[i], bracketed))
      return WEFT_ERR(WEFT_ERR_INVALID_ARGUMENT, "'%s': invalid character '%c' in host", whole,
                      h[i]);
  }
  if (hl >= hostcap)
    return WEFT_ERR(WEFT_ERR_INVALID_ARGUMENT, "'%s': host is longer than %zu characters", whole,
                    hostcap - 1);
  if (parse_port(p, port) != 0)
    return WEFT_ERR(WEFT_ERR_INVALID_ARGUMENT, "'%s': port '%s' is not a number in 1..65535", whole,
                    p);
  memcpy(host, h, hl);
  host[hl] = '\0';
  return WEFT_SUCCESS;
}

weft_result_t net_parse_hostport(const char *s, char *host, size_t hostcap, int *port) {
  if (!s || !*s)
    return WEFT_ERR(WEFT_ERR_INVALID_ARGUMENT, "empty address: expected host:port or [v6]:port");
  return split_hostport(s, s, host, hostcap, port);
}

weft_result_t net_parse_url(const char *url, char *host, size_t hostcap, int *port) {
  static const char scheme[] = "tcp://";
  if (!url || !*url)
    return WEFT_ERR(WEFT_ERR_INVALID_ARGUMENT, "empty URL: expected tcp://host:port");
  if (strncmp(url, scheme, sizeof scheme - 1) != 0) {
    if (strstr(url, "://"))
      return WEFT_ERR(WEFT_ERR_INVALID_ARGUMENT,
                      "'%s': unsupported scheme, only tcp://host:port is understood", url);
    return WEFT_ERR(WEFT_ERR_INVALID_ARGUMENT, "'%s': expected tcp://host:port", url);
  }
  const char *rest = url + sizeof scheme - 1;
  if (!*rest) return WEFT_ERR(WEFT_ERR_INVALID_ARGUMENT, "'%s': missing host:port", url);
  return split_hostport(rest, url, host, hostcap, port);
}

weft_result_t net_resolve(const char *host, int port, net_addr_t *out) {
  char name[256];
  if (!host || !*host) return WEFT_ERR(WEFT_ERR_INVALID_ARGUMENT, "resolve: empty host name");
  if (port < 0 || port > 65535)
    return WEFT_ERR(WEFT_ERR_INVALID_ARGUMENT, "resolve '%s': port %d is not in 0..65535", host,
                    port);
  size_t n = strlen(host);
  if (n >= sizeof name)
    return WEFT_ERR(WEFT_ERR_INVALID_ARGUMENT, "resolve: host name longer than %zu characters",
                    sizeof name - 1);
  /* Accept "[::1]" as well: people copy it out of URLs. */
  if (host[0] == '[' && host[n - 1] == ']' && n > 2) {
    memcpy(name, host + 1, n - 2);
    name[n - 2] = '\0';
  } else {
    memcpy(name, host, n + 1);
  }
  char service[8];
  snprintf(service, sizeof service, "%d", port);
  struct addrinfo hints, *res = NULL;
  memset(&hints, 0, sizeof hints);
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  hints.ai_flags = AI_NUMERICSERV;
  int rc = getaddrinfo(name, service, &hints, &res);
  if (rc != 0) {
    const char *why = rc == EAI_SYSTEM ? strerror(errno) : gai_strerror(rc);
    weft_result_t code =
        (rc == EAI_NONAME || rc == EAI_FAMILY) ? WEFT_ERR_INVALID_ARGUMENT : WEFT_ERR_SYSTEM;
    return WEFT_ERR(code, "cannot resolve host '%s': %s", host, why);
  }
  memset(out, 0, sizeof *out);
  memcpy(&out->ss, res->ai_addr, res->ai_addrlen);
  out->len = res->ai_addrlen;
  freeaddrinfo(res);
  return WEFT_SUCCESS;
}

void net_addr_str(const net_addr_t *a, char *buf, size_t cap) {
  char host[NI_MAXHOST], serv[NI_MAXSERV];
  if (cap == 0) return;
  if (!a || a->len == 0 ||
      getnameinfo((const struct sockaddr *)&a->ss, a->len, host, sizeof host, serv, sizeof serv,
                  NI_NUMERICHOST | NI_NUMERICSERV) != 0) {
    snprintf(buf, cap, "<unknown address>");
    return;
  }
  if (a->ss.ss_family == AF_INET6)
    snprintf(buf, cap, "[%s]:%s", host, serv);
  else
    snprintf(buf, cap, "%s:%s", host, serv);
}

int net_addr_port(const net_addr_t *a) {
  if (a->ss.ss_family == AF_INET) return ntohs(((const struct sockaddr_in *)&a->ss)->sin_port);
  if (a->ss.ss_family == AF_INET6) return ntohs(((const struct sockaddr_in6 *)&a->ss)->sin6_port);
  return 0;
}

void net_addr_set_port(net_addr_t *a, int port) {
  if (a->ss.ss_family == AF_INET) ((struct sockaddr_in *)&a->ss)->sin_port = htons((uint16_t)port);
  if (a->ss.ss_family == AF_INET6)
    ((struct sockaddr_in6 *)&a->ss)->sin6_port = htons((uint16_t)port);
}

static void addr_from_sockaddr(const struct sockaddr *sa, net_addr_t *out) {
  memset(out, 0, sizeof *out);
  out->len = sa->sa_family == AF_INET6 ? sizeof(struct sockaddr_in6) : sizeof(struct sockaddr_in);
  memcpy(&out->ss, sa, out->len);
}

/* ---- Interface selection ------------------------------------------------------------------ */

/* NCCL_SOCKET_IFNAME semantics, so that users can copy their existing settings. */
static int ifname_matches(const char *name, const char *spec) {
  int exclude = spec[0] == '^';
  if (exclude) spec++;
  int exact = spec[0] == '=';
  if (exact) spec++;
  int hit = 0;
  while (*spec && !hit) {
    const char *end = strchr(spec, ',');
    size_t n = end ? (size_t)(end - spec) : strlen(spec);
    if (n > 0)
      hit =
          exact ? (strlen(name) == n && strncmp(name, spec, n) == 0) : strncmp(name, spec, n) == 0;
    spec += n + (end ? 1 : 0);
  }
  return exclude ? !hit : hit;
}

/* Higher is better: the remote's family first, then routable over link-local (which needs a
 * scope id that other hosts cannot use). */
static int addr_score(const struct sockaddr *sa, int want_family) {
  int score = 0;
  if (want_family == AF_UNSPEC || sa->sa_family == want_family) score += 2;
  if (sa->sa_family != AF_INET6 ||
      !IN6_IS_ADDR_LINKLOCAL(&((const struct sockaddr_in6 *)sa)->sin6_addr))
    score += 1;
  return score;
}

/* Appends name to a ", "-separated list unless it is there already (one entry per address). */
static void list_add(char *list, size_t cap, const char *name) {
  size_t nl = strlen(name);
  for (const char *p = list; *p;) {
    const char *end = strstr(p, ", ");
    size_t n = end ? (size_t)(end - p) : strlen(p);
    if (n == nl && strncmp(p, name, nl) == 0) return;
    p += n + (end ? 2 : 0);
  }
  size_t used = strlen(list);
  snprintf(list + used, cap - used, "%s%s", used ? ", " : "", name);
}

static weft_result_t addr_from_ifname(const char *spec, int want_family, net_addr_t *out) {
  struct ifaddrs *list = NULL;
  if (getifaddrs(&list) != 0) return WEFT_ERR(WEFT_ERR_SYSTEM, "getifaddrs: %s", strerror(errno));
  const struct ifaddrs *best = NULL;
  int best_score = -1;
  char seen[512] = "";
  for (const struct ifaddrs *i = list; i; i = i->ifa_next) {
    if (!i->ifa_addr || !(i->ifa_flags & IFF_UP)) continue;
    int fam = i->ifa_addr->sa_family;
    if (fam != AF_INET && fam != AF_INET6) continue;
    list_add(seen, sizeof seen, i->ifa_name);
    if (!ifname_matches(i->ifa_name, spec)) continue;
    int score = addr_score(i->ifa_addr, want_family);
    if (score > best_score) {
      best = i;
      best_score = score;
    }
  }
  if (!best) {
    weft_result_t res = WEFT_ERR(WEFT_ERR_INVALID_ARGUMENT,
                                 "no network interface matches '%s' (WEFT_SOCKET_IFNAME); "
                                 "interfaces with an IP address: %s",
                                 spec, seen[0] ? seen : "none");
    freeifaddrs(list);
    return res;
  }
  addr_from_sockaddr(best->ifa_addr, out);
  net_addr_set_port(out, 0);
  freeifaddrs(list);
  return WEFT_SUCCESS;
}

weft_result_t net_local_addr_for(const net_addr_t *remote, const char *ifname, net_addr_t *out) {
  if (ifname && *ifname)
    return addr_from_ifname(ifname, remote ? remote->ss.ss_family : AF_UNSPEC, out);
  if (!remote)
    return WEFT_ERR(WEFT_ERR_INVALID_ARGUMENT,
                    "local address: neither an interface name nor a remote address given");
  char name[NET_ADDR_STRLEN];
  net_addr_str(remote, name, sizeof name);
  /* A UDP connect sends nothing; it only asks the routing table which source address to use. */
  net_addr_t r = *remote;
  if (net_addr_port(&r) == 0) net_addr_set_port(&r, 9);
  int fd = socket(r.ss.ss_family, SOCK_DGRAM | SOCK_CLOEXEC, 0);
  if (fd < 0)
    return WEFT_ERR(WEFT_ERR_SYSTEM, "local address to reach %s: socket: %s", name,
                    strerror(errno));
  struct sockaddr_storage ss;
  socklen_t len = sizeof ss;
  if (connect(fd, (const struct sockaddr *)&r.ss, r.len) != 0 ||
      getsockname(fd, (struct sockaddr *)&ss, &len) != 0) {
    int e = errno;
    close(fd);
    return WEFT_ERR(WEFT_ERR_SYSTEM, "local address to reach %s: %s", name, strerror(e));
  }
  close(fd);
  addr_from_sockaddr((const struct sockaddr *)&ss, out);
  net_addr_set_port(out, 0);
  return WEFT_SUCCESS;
}

/* ---- Listening ---------------------------------------------------------------------------- */

/* Returns the listening fd, or -errno with nothing left open. */
static int open_listener(const struct sockaddr *sa, socklen_t len, int backlog, int dual_stack) {
  int fd = socket(sa->sa_family, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return -errno;
  int one = 1, zero = 0;
  /* So that a restarted master can take its port back while old connections sit in TIME_WAIT. */
  setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
  if (dual_stack) setsockopt(fd, IPPROTO_IPV6, IPV6_V6ONLY, &zero, sizeof zero);
  if (bind(fd, sa, len) != 0 || listen(fd, backlog) != 0) {
    int e = errno;
    close(fd);
    return -e;
  }
  return fd;
}

static weft_result_t listen_error(int err, const char *name) {
  if (err == EADDRINUSE)
    return WEFT_ERR(WEFT_ERR_SYSTEM,
                    "listen on %s: address already in use (is another process using this port?)",
                    name);
  if (err == EADDRNOTAVAIL)
    return WEFT_ERR(WEFT_ERR_SYSTEM, "listen on %s: no interface of this host has that address",
                    name);
  return WEFT_ERR(WEFT_ERR_SYSTEM, "listen on %s: %s", name, strerror(err));
}

weft_result_t net_listen(const net_addr_t *addr, int backlog, int *fd, net_addr_t *bound) {
  char name[NET_ADDR_STRLEN];
  net_addr_str(addr, name, sizeof name);
  int s = open_listener((const struct sockaddr *)&addr->ss, addr->len, backlog, 0);
  if (s < 0) return listen_error(-s, name);
  if (bound) {
    memset(bound, 0, sizeof *bound);
    bound->len = sizeof bound->ss;
    if (getsockname(s, (struct sockaddr *)&bound->ss, &bound->len) != 0) {
      int e = errno;
      close(s);
      return WEFT_ERR(WEFT_ERR_SYSTEM, "listen on %s: getsockname: %s", name, strerror(e));
    }
  }
  *fd = s;
  return WEFT_SUCCESS;
}

weft_result_t net_listen_any(int port, int family_hint, int backlog, int *fd) {
  char name[NET_ADDR_STRLEN];
  if (port < 0 || port > 65535)
    return WEFT_ERR(WEFT_ERR_INVALID_ARGUMENT, "listen: port %d is not in 0..65535", port);
  if (family_hint != AF_INET) {
    struct sockaddr_in6 a6;
    memset(&a6, 0, sizeof a6);
    a6.sin6_family = AF_INET6;
    a6.sin6_addr = in6addr_any;
    a6.sin6_port = htons((uint16_t)port);
    int s = open_listener((const struct sockaddr *)&a6, sizeof a6, backlog, 1);
    if (s >= 0) {
      *fd = s;
      return WEFT_SUCCESS;
    }
    /* Only a missing IPv6 stack falls back; "in use" must not be hidden behind an IPv4 retry. */
    if (-s != EAFNOSUPPORT && -s != EADDRNOTAVAIL && -s != EPROTONOSUPPORT) {
      snprintf(name, sizeof name, "[::]:%d", port);
      return listen_error(-s, name);
    }
  }
  struct sockaddr_in a4;
  memset(&a4, 0, sizeof a4);
  a4.sin_family = AF_INET;
  a4.sin_addr.s_addr = htonl(INADDR_ANY);
  a4.sin_port = htons((uint16_t)port);
  int s = open_listener((const struct sockaddr *)&a4, sizeof a4, backlog, 0);
  if (s < 0) {
    snprintf(name, sizeof name, "0.0.0.0:%d", port);
    return listen_error(-s, name);
  }
  *fd = s;
  return WEFT_SUCCESS;
}

/* ---- Connecting and accepting ------------------------------------------------------------- */

static int connect_retryable(int err) {
  return err == ECONNREFUSED || err == ENETUNREACH || err == EHOSTUNREACH || err == ETIMEDOUT ||
         err == ECONNRESET || err == ECONNABORTED || err == EAGAIN || err == EINTR ||
         err == ENETDOWN || err == EHOSTDOWN;
}

/* Completes a nonblocking connect; returns 0 or an errno (ETIMEDOUT when time ran out). */
static int finish_connect(int fd, int64_t deadline) {
  for (;;) {
    struct pollfd p = {fd, POLLOUT, 0};
    int r = poll(&p, 1, ms_left(deadline));
    if (r < 0 && errno == EINTR) continue;
    if (r < 0) return errno;
    if (r == 0) return ETIMEDOUT;
    int err = 0;
    socklen_t len = sizeof err;
    if (getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &len) != 0) return errno;
    return err;
  }
}

/* A loopback connect to a port in the ephemeral range can meet itself (TCP simultaneous open)
 * while nobody listens; that "connection" would swallow our own messages. */
static int is_self_connect(int fd) {
  struct sockaddr_storage a, b;
  socklen_t la = sizeof a, lb = sizeof b;
  if (getsockname(fd, (struct sockaddr *)&a, &la) != 0) return 0;
  if (getpeername(fd, (struct sockaddr *)&b, &lb) != 0) return 0;
  return la == lb && memcmp(&a, &b, la) == 0;
}

static weft_result_t connect_loop(const net_addr_t *addr, int timeout_ms, int refused_final,
                                  int *fd) {
  char name[NET_ADDR_STRLEN];
  net_addr_str(addr, name, sizeof name);
  int64_t deadline = deadline_after(timeout_ms);
  unsigned jitter = (unsigned)getpid() ^ (unsigned)clock_now_ns();
  int last_err = 0;
  for (;;) {
    int s = socket(addr->ss.ss_family, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
    if (s < 0) return WEFT_ERR(WEFT_ERR_SYSTEM, "connect to %s: socket: %s", name, strerror(errno));
    int err = 0;
    if (connect(s, (const struct sockaddr *)&addr->ss, addr->len) != 0) {
      err = errno;
      if (err == EINPROGRESS) err = finish_connect(s, deadline);
    }
    if (err == 0 && is_self_connect(s)) err = ECONNREFUSED;
    if (err == 0) {
      weft_result_t res = net_set_nonblocking(s, 0);
      if (res != WEFT_SUCCESS) {
        close(s);
        return err_context(res, "connect to %s", name);
      }
      *fd = s;
      return WEFT_SUCCESS;
    }
    close(s);
    if (refused_final && err == ECONNREFUSED)
      return WEFT_ERR(WEFT_ERR_REMOTE,
                      "connect to %s: %s (it was listening there: did it exit or fail?)", name,
                      strerror(err));
    if (!connect_retryable(err))
      return WEFT_ERR(WEFT_ERR_SYSTEM, "connect to %s: %s", name, strerror(err));
    last_err = err;
    int left = ms_left(deadline);
    if (left == 0) break;
    /* Jitter keeps many ranks that start together from hammering the master in lockstep. */
    jitter = jitter * 1103515245u + 12345u;
    int nap = 50 + (int)((jitter >> 16) % 51);
    sleep_ms(left >= 0 && left < nap ? left : nap);
  }
  return WEFT_ERR(WEFT_ERR_TIMEOUT, "connect to %s: %s (gave up after %d ms)", name,
                  strerror(last_err), timeout_ms);
}

weft_result_t net_connect(const net_addr_t *addr, int timeout_ms, int *fd) {
  return connect_loop(addr, timeout_ms, 0, fd);
}

weft_result_t net_connect_listening(const net_addr_t *addr, int timeout_ms, int *fd) {
  return connect_loop(addr, timeout_ms, 1, fd);
}

static void sock_name(int fd, int peer, char *buf, size_t cap) {
  net_addr_t a;
  memset(&a, 0, sizeof a);
  a.len = sizeof a.ss;
  int rc = peer ? getpeername(fd, (struct sockaddr *)&a.ss, &a.len)
                : getsockname(fd, (struct sockaddr *)&a.ss, &a.len);
  if (rc != 0)
    snprintf(buf, cap, "fd %d", fd);
  else
    net_addr_str(&a, buf, cap);
}

weft_result_t net_accept(int listen_fd, int timeout_ms, int *fd) {
  int64_t deadline = deadline_after(timeout_ms);
  char name[NET_ADDR_STRLEN];
  for (;;) {
    struct pollfd p = {listen_fd, POLLIN, 0};
    int r = poll(&p, 1, ms_left(deadline));
    if (r < 0 && errno == EINTR) continue;
    if (r < 0 || (p.revents & POLLNVAL)) {
      int e = r < 0 ? errno : EBADF;
      sock_name(listen_fd, 0, name, sizeof name);
      return WEFT_ERR(WEFT_ERR_SYSTEM, "accept on %s: %s", name, strerror(e));
    }
    if (r == 0) {
      sock_name(listen_fd, 0, name, sizeof name);
      return WEFT_ERR(WEFT_ERR_TIMEOUT, "accept on %s: no connection within %d ms", name,
                      timeout_ms);
    }
    int s = accept4(listen_fd, NULL, NULL, SOCK_CLOEXEC);
    if (s >= 0) {
      *fd = s;
      return WEFT_SUCCESS;
    }
    /* The client may have given up between poll and accept; wait for the next one. */
    if (errno == EAGAIN || errno == EWOULDBLOCK || errno == ECONNABORTED || errno == EINTR)
      continue;
    int e = errno;
    sock_name(listen_fd, 0, name, sizeof name);
    return WEFT_ERR(WEFT_ERR_SYSTEM, "accept on %s: %s", name, strerror(e));
  }
}

int net_reserve_open(void) { return open("/dev/null", O_RDONLY | O_CLOEXEC); }

int net_accept_exhausted(int err) {
  return err == EMFILE || err == ENFILE || err == ENOBUFS || err == ENOMEM;
}

int net_shed_one(int listen_fd, int *reserve) {
  if (*reserve < 0) {
    *reserve = net_reserve_open(); /* a slot may have come free since */
    return 0;
  }
  close(*reserve);
  int fd = accept4(listen_fd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);
  int shed = fd >= 0;
  if (shed) {
    /* Linger 0: a reset tells the client at once, and no TIME_WAIT is left behind. */
    struct linger lg = {1, 0};
    setsockopt(fd, SOL_SOCKET, SO_LINGER, &lg, sizeof lg);
    close(fd);
  }
  *reserve = net_reserve_open();
  return shed;
}

/* ---- Transfers ---------------------------------------------------------------------------- */

/* Waits until fd is ready for `events`; returns 0, or -1 when the deadline passed. */
static int wait_ready(int fd, short events, int64_t deadline) {
  for (;;) {
    struct pollfd p = {fd, events, 0};
    int r = poll(&p, 1, ms_left(deadline));
    if (r < 0 && errno == EINTR) continue;
    /* Errors and hangups are reported by the send/recv that follows, with its errno. */
    return r == 0 ? -1 : 0;
  }
}

/* The errno of the calling thread's last failed transfer (0: none, or the peer's EOF). */
static _Thread_local int last_io_errno;

int net_last_reset(void) { return last_io_errno == ECONNRESET || last_io_errno == EPIPE; }

static weft_result_t io_error(const char *op, int fd, int err) {
  last_io_errno = err;
  char peer[NET_ADDR_STRLEN];
  sock_name(fd, 1, peer, sizeof peer);
  weft_result_t code = (err == EPIPE || err == ECONNRESET) ? WEFT_ERR_REMOTE : WEFT_ERR_SYSTEM;
  return WEFT_ERR(code, "%s %s: %s", op, peer, strerror(err));
}

weft_result_t net_send_all(int fd, const void *buf, size_t len, int timeout_ms) {
  const char *p = (const char *)buf;
  size_t done = 0;
  int64_t deadline = deadline_after(timeout_ms);
  last_io_errno = 0;
  while (done < len) {
    /* MSG_DONTWAIT on every call makes blocking fds obey the deadline too. */
    ssize_t n = send(fd, p + done, len - done, MSG_NOSIGNAL | MSG_DONTWAIT);
    if (n > 0) {
      done += (size_t)n;
      continue;
    }
    if (n < 0 && errno == EINTR) continue;
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
      if (wait_ready(fd, POLLOUT, deadline) != 0) {
        char peer[NET_ADDR_STRLEN];
        sock_name(fd, 1, peer, sizeof peer);
        return WEFT_ERR(WEFT_ERR_TIMEOUT,
                        "send to %s: timed out after %d ms (%zu of %zu bytes sent)", peer,
                        timeout_ms, done, len);
      }
      continue;
    }
    return io_error("send to", fd, n < 0 ? errno : EPIPE);
  }
  return WEFT_SUCCESS;
}

weft_result_t net_recv_all(int fd, void *buf, size_t len, int timeout_ms) {
  char *p = (char *)buf;
  size_t done = 0;
  int64_t deadline = deadline_after(timeout_ms);
  last_io_errno = 0;
  while (done < len) {
    ssize_t n = recv(fd, p + done, len - done, MSG_DONTWAIT);
    if (n > 0) {
      done += (size_t)n;
      continue;
    }
    if (n == 0) {
      char peer[NET_ADDR_STRLEN];
      sock_name(fd, 1, peer, sizeof peer);
      return WEFT_ERR(WEFT_ERR_REMOTE, "recv from %s: connection closed by peer (%zu of %zu bytes)",
                      peer, done, len);
    }
    if (errno == EINTR) continue;
    if (errno == EAGAIN || errno == EWOULDBLOCK) {
      if (wait_ready(fd, POLLIN, deadline) != 0) {
        char peer[NET_ADDR_STRLEN];
        sock_name(fd, 1, peer, sizeof peer);
        return WEFT_ERR(WEFT_ERR_TIMEOUT,
                        "recv from %s: timed out after %d ms (%zu of %zu bytes received)", peer,
                        timeout_ms, done, len);
      }
      continue;
    }
    return io_error("recv from", fd, errno);
  }
  return WEFT_SUCCESS;
}

/* ---- Socket options ----------------------------------------------------------------------- */

weft_result_t net_set_nonblocking(int fd, int on) {
  int flags = fcntl(fd, F_GETFL);
  if (flags < 0)
    return WEFT_ERR(WEFT_ERR_SYSTEM, "fcntl(F_GETFL) on fd %d: %s", fd, strerror(errno));
  flags = on ? (flags | O_NONBLOCK) : (flags & ~O_NONBLOCK);
  if (fcntl(fd, F_SETFL, flags) != 0)
    return WEFT_ERR(WEFT_ERR_SYSTEM, "fcntl(F_SETFL) on fd %d: %s", fd, strerror(errno));
  return WEFT_SUCCESS;
}

weft_result_t net_tune_stream(int fd, int bufbytes) {
  int one = 1;
  if (setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one) != 0)
    return WEFT_ERR(WEFT_ERR_SYSTEM, "setsockopt TCP_NODELAY on fd %d: %s", fd, strerror(errno));
  if (bufbytes > 0) {
    if (setsockopt(fd, SOL_SOCKET, SO_SNDBUF, &bufbytes, sizeof bufbytes) != 0)
      return WEFT_ERR(WEFT_ERR_SYSTEM, "setsockopt SO_SNDBUF=%d on fd %d: %s", bufbytes, fd,
                      strerror(errno));
    if (setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &bufbytes, sizeof bufbytes) != 0)
      return WEFT_ERR(WEFT_ERR_SYSTEM, "setsockopt SO_RCVBUF=%d on fd %d: %s", bufbytes, fd,
                      strerror(errno));
  }
  return WEFT_SUCCESS;
}
