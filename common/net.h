/* net.h -- internal: TCP sockets with timeouts: addresses, listen/connect/accept, full send/recv.
 *
 * Every blocking call takes a timeout in milliseconds and fails with a message that names the
 * address and the operation; a negative timeout means no limit (callers normally pass the job's
 * WEFT_TIMEOUT_MS). All sockets are created close-on-exec so that launchers' children do not
 * inherit them. */
#ifndef WEFT_COMMON_NET_H_
#define WEFT_COMMON_NET_H_

#include <stddef.h>
#include <sys/socket.h>

#include "include/weft.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Room for "[<IPv6 with scope>]:65535" as written by net_addr_str(). */
#define NET_ADDR_STRLEN 96

typedef struct {
  struct sockaddr_storage ss;
  socklen_t len;
} net_addr_t;

/* An IPv4/IPv6 literal (brackets allowed) or a host name (getaddrinfo; first answer wins). */
weft_result_t net_resolve(const char *host, int port, net_addr_t *out);
/* "tcp://host:port" or "tcp://[v6]:port"; the host is copied without brackets. */
weft_result_t net_parse_url(const char *url, char *host, size_t hostcap, int *port);
/* "host:port" or "[v6]:port"; the host is copied without brackets. */
weft_result_t net_parse_hostport(const char *s, char *host, size_t hostcap, int *port);
/* "1.2.3.4:5" or "[::1]:5". */
void net_addr_str(const net_addr_t *a, char *buf, size_t cap);
int net_addr_port(const net_addr_t *a);
void net_addr_set_port(net_addr_t *a, int port);

/* The address this host should advertise, with port 0. With a non-empty ifname (the syntax of
 * WEFT_SOCKET_IFNAME, as NCCL_SOCKET_IFNAME: comma-separated name prefixes, a leading "^" makes it
 * an exclude list, a leading "=" asks for exact names): the first address of a matching interface,
 * preferring the family of `remote` (which may then be NULL). Otherwise the source address the
 * kernel would use to reach `remote`. */
weft_result_t net_local_addr_for(const net_addr_t *remote, const char *ifname, net_addr_t *out);

/* Listens on addr (port 0 picks one) with SO_REUSEADDR; `bound` (may be NULL) gets the address. */
weft_result_t net_listen(const net_addr_t *addr, int backlog, int *fd, net_addr_t *bound);
/* Listens on the wildcard address: dual-stack IPv6 unless family_hint is AF_INET, falling back to
 * IPv4 where IPv6 is unavailable. Use getsockname() for the port when passing 0. */
weft_result_t net_listen_any(int port, int family_hint, int backlog, int *fd);
/* Connects, retrying refused/unreachable every 50-100 ms until timeout_ms since the peer may not
 * listen yet. Fails with WEFT_ERR_TIMEOUT naming the address and the last error. Blocking fd. */
weft_result_t net_connect(const net_addr_t *addr, int timeout_ms, int *fd);
/* The same for a peer known to listen already: a refusal means it is gone, and fails at once with
 * WEFT_ERR_REMOTE instead of being retried until timeout_ms. */
weft_result_t net_connect_listening(const net_addr_t *addr, int timeout_ms, int *fd);
/* Accepts one connection (blocking fd); WEFT_ERR_TIMEOUT after timeout_ms. */
weft_result_t net_accept(int listen_fd, int timeout_ms, int *fd);

/* Out of descriptors (EMFILE/ENFILE), a nonblocking listener stays readable and a poll loop that
 * cannot accept spins. A server keeps one reserve descriptor (net_reserve_open: /dev/null, or -1)
 * and, with nothing of its own to close, sheds the waiting connection: net_shed_one closes the
 * reserve, accepts and closes one connection, and reopens the reserve. Returns 1 when it shed
 * one, 0 when it could not (no reserve, or another thread took the freed slot): the caller then
 * stops polling the listener for a moment instead. */
int net_reserve_open(void);
int net_shed_one(int listen_fd, int *reserve);
/* The errors of accept() that mean "out of descriptors or memory", not "nothing to accept". */
int net_accept_exhausted(int err);

/* Transfer exactly len bytes on a blocking or nonblocking fd; timeout_ms bounds the whole call.
 * A peer that closes or resets gives WEFT_ERR_REMOTE. */
weft_result_t net_send_all(int fd, const void *buf, size_t len, int timeout_ms);
weft_result_t net_recv_all(int fd, void *buf, size_t len, int timeout_ms);
/* 1 when the calling thread's last net_send_all/net_recv_all failed because the peer reset the
 * connection (ECONNRESET, or EPIPE after a reset), not because it closed it or went silent: a
 * server sheds a connection it cannot serve with a reset (net_shed_one). */
int net_last_reset(void);

weft_result_t net_set_nonblocking(int fd, int on);
/* TCP_NODELAY, and SO_SNDBUF/SO_RCVBUF = bufbytes when bufbytes > 0. */
weft_result_t net_tune_stream(int fd, int bufbytes);

#ifdef __cplusplus
}
#endif

#endif /* WEFT_COMMON_NET_H_ */
