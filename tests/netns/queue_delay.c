/* queue_delay.c -- delays and reorders packets from an NFQUEUE: netem's delay for kernels without
 * it.
 *
 * Usage: queue_delay --queue Q --delay-ms D [--jitter-ms J] [--seed S]
 * Binds netfilter queue Q (packets sent there by `iptables ... -j NFQUEUE --queue-num Q`) and
 * accepts each packet D ms +- J ms (uniform) after it arrived. Packets are released by their own
 * due time, not in arrival order, so a jitter larger than the gap between packets reorders them,
 * as netem's jitter does. Prints "BOUND queue=Q" once packets can come, then "delayed N reordered
 * M" (packets so far, and those let go before one that came earlier) every half second, and runs
 * until killed.
 *
 * It speaks the nfnetlink_queue protocol directly (linux/netfilter/nfnetlink_queue.h): one config
 * message to bind, metadata-only copies (the payload is never needed), one verdict per packet. */
#include <arpa/inet.h>
#include <errno.h>
#include <linux/netfilter.h>
#include <linux/netfilter/nfnetlink.h>
#include <linux/netfilter/nfnetlink_queue.h>
#include <linux/netlink.h>
#include <poll.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#define MAX_HELD 65536

typedef struct {
  uint32_t id;
  double due_ms;
} held_t;

static held_t held[MAX_HELD];
static int nheld;

static double now_ms(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return ts.tv_sec * 1e3 + ts.tv_nsec / 1e6;
}

/* Appends attribute `type` with `len` bytes to the message in buf. */
static void put_attr(struct nlmsghdr *nh, uint16_t type, const void *data, uint16_t len) {
  struct nlattr *a = (struct nlattr *)((char *)nh + NLMSG_ALIGN(nh->nlmsg_len));
  a->nla_type = type;
  a->nla_len = (uint16_t)(NLA_HDRLEN + len);
  memcpy((char *)a + NLA_HDRLEN, data, len);
  nh->nlmsg_len = NLMSG_ALIGN(nh->nlmsg_len) + NLA_ALIGN(a->nla_len);
}

static struct nlmsghdr *start_msg(char *buf, uint16_t msg_type, uint16_t queue, uint16_t flags) {
  memset(buf, 0, 256);
  struct nlmsghdr *nh = (struct nlmsghdr *)buf;
  nh->nlmsg_len = NLMSG_LENGTH(sizeof(struct nfgenmsg));
  nh->nlmsg_type = (uint16_t)((NFNL_SUBSYS_QUEUE << 8) | msg_type);
  nh->nlmsg_flags = (uint16_t)(NLM_F_REQUEST | flags);
  struct nfgenmsg *g = NLMSG_DATA(nh);
  g->nfgen_family = AF_UNSPEC;
  g->version = NFNETLINK_V0;
  g->res_id = htons(queue);
  return nh;
}

static int send_msg(int fd, struct nlmsghdr *nh) {
  struct sockaddr_nl to = {.nl_family = AF_NETLINK};
  return sendto(fd, nh, nh->nlmsg_len, 0, (struct sockaddr *)&to, sizeof to) < 0 ? -1 : 0;
}

/* A request with NLM_F_ACK: 0 once the kernel acknowledged it, else -1 with errno set. */
static int request(int fd, struct nlmsghdr *nh) {
  if (send_msg(fd, nh) != 0) return -1;
  char buf[4096];
  ssize_t got = recv(fd, buf, sizeof buf, 0);
  if (got < 0) return -1;
  struct nlmsghdr *r = (struct nlmsghdr *)buf;
  if (r->nlmsg_type == NLMSG_ERROR) {
    struct nlmsgerr *e = NLMSG_DATA(r);
    if (e->error == 0) return 0;
    errno = -e->error;
    return -1;
  }
  return 0;
}

static int verdict(int fd, uint16_t queue, uint32_t id) {
  char buf[256];
  struct nlmsghdr *nh = start_msg(buf, NFQNL_MSG_VERDICT, queue, 0);
  struct nfqnl_msg_verdict_hdr v = {htonl(NF_ACCEPT), htonl(id)};
  put_attr(nh, NFQA_VERDICT_HDR, &v, sizeof v);
  return send_msg(fd, nh);
}

/* The packet id of one NFQNL_MSG_PACKET, or -1 if it has none. */
static int64_t packet_id(struct nlmsghdr *nh) {
  char *p = (char *)NLMSG_DATA(nh) + NLMSG_ALIGN(sizeof(struct nfgenmsg));
  char *end = (char *)nh + nh->nlmsg_len;
  while (p + NLA_HDRLEN <= end) {
    struct nlattr *a = (struct nlattr *)p;
    if (a->nla_len < NLA_HDRLEN || p + a->nla_len > end) break;
    if ((a->nla_type & NLA_TYPE_MASK) == NFQA_PACKET_HDR &&
        a->nla_len >= NLA_HDRLEN + sizeof(struct nfqnl_msg_packet_hdr)) {
      struct nfqnl_msg_packet_hdr h;
      memcpy(&h, p + NLA_HDRLEN, sizeof h);
      return ntohl(h.packet_id);
    }
    p += NLA_ALIGN(a->nla_len);
  }
  return -1;
}

int main(int argc, char **argv) {
  int queue = -1;
  double delay = -1, jitter = 0;
  unsigned seed = 1;
  for (int i = 1; i + 1 < argc; i += 2) {
    if (!strcmp(argv[i], "--queue"))
      queue = atoi(argv[i + 1]);
    else if (!strcmp(argv[i], "--delay-ms"))
      delay = atof(argv[i + 1]);
    else if (!strcmp(argv[i], "--jitter-ms"))
      jitter = atof(argv[i + 1]);
    else if (!strcmp(argv[i], "--seed"))
      seed = (unsigned)atoi(argv[i + 1]);
    else
      queue = -1, i = argc;
  }
  if (queue < 0 || queue > 65535 || delay < 0 || jitter < 0 || jitter > delay) {
    fprintf(stderr, "usage: queue_delay --queue Q --delay-ms D [--jitter-ms J<=D] [--seed S]\n");
    return 2;
  }
  srand(seed);
  /* The caller may stop reading the counts; the packets must still be let go. */
  signal(SIGPIPE, SIG_IGN);
  int fd = socket(AF_NETLINK, SOCK_RAW, NETLINK_NETFILTER);
  if (fd < 0) {
    perror("queue_delay: netlink socket");
    return 1;
  }
  struct sockaddr_nl me = {.nl_family = AF_NETLINK};
  if (bind(fd, (struct sockaddr *)&me, sizeof me) != 0) {
    perror("queue_delay: bind");
    return 1;
  }
  int big = 8 << 20;
  setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &big, sizeof big);

  char buf[256];
  struct nlmsghdr *nh = start_msg(buf, NFQNL_MSG_CONFIG, (uint16_t)queue, NLM_F_ACK);
  struct nfqnl_msg_config_cmd cmd = {NFQNL_CFG_CMD_BIND, 0, htons(AF_INET)};
  put_attr(nh, NFQA_CFG_CMD, &cmd, sizeof cmd);
  if (request(fd, nh) != 0) {
    perror("queue_delay: bind queue");
    return 1;
  }
  nh = start_msg(buf, NFQNL_MSG_CONFIG, (uint16_t)queue, NLM_F_ACK);
  struct nfqnl_msg_config_params params = {htonl(0), NFQNL_COPY_META};
  put_attr(nh, NFQA_CFG_PARAMS, &params, sizeof params);
  /* Held packets count against the queue's length: room for a second of a fast link. */
  uint32_t maxlen = htonl(MAX_HELD);
  put_attr(nh, NFQA_CFG_QUEUE_MAXLEN, &maxlen, sizeof maxlen);
  if (request(fd, nh) != 0) {
    perror("queue_delay: configure queue");
    return 1;
  }
  printf("BOUND queue=%d\n", queue);
  fflush(stdout);

  static char rx[65536];
  long delayed = 0, reordered = 0; /* reordered: let go before a packet that came earlier */
  uint32_t last_id = 0;
  double report = now_ms() + 500;
  for (;;) {
    double now = now_ms(), next = now + 1000;
    /* A count now and then, so that a caller can tell the rule really sends packets here. */
    if (now >= report) {
      printf("delayed %ld reordered %ld\n", delayed, reordered);
      fflush(stdout);
      report = now + 500;
    }
    if (report < next) next = report;
    /* Release every packet that is due; the rest keep their places (order does not matter). */
    for (int i = 0; i < nheld;) {
      if (held[i].due_ms <= now) {
        verdict(fd, (uint16_t)queue, held[i].id);
        if (held[i].id < last_id) reordered++;
        last_id = held[i].id;
        held[i] = held[--nheld];
      } else {
        if (held[i].due_ms < next) next = held[i].due_ms;
        i++;
      }
    }
    struct pollfd p = {fd, POLLIN, 0};
    int wait = (int)(next - now) + 1;
    if (nheld >= MAX_HELD) wait = 1; /* full: let some go before reading more */
    if (poll(&p, 1, wait) <= 0 || nheld >= MAX_HELD) continue;
    ssize_t got = recv(fd, rx, sizeof rx, MSG_DONTWAIT);
    if (got < 0) {
      if (errno == ENOBUFS) continue; /* the kernel dropped some: they count as lost */
      if (errno == EAGAIN || errno == EINTR) continue;
      perror("queue_delay: recv");
      return 1;
    }
    now = now_ms();
    int left = (int)got;
    for (struct nlmsghdr *m = (struct nlmsghdr *)rx; NLMSG_OK(m, left); m = NLMSG_NEXT(m, left)) {
      if ((m->nlmsg_type & 0xff) != NFQNL_MSG_PACKET) continue;
      int64_t id = packet_id(m);
      if (id < 0 || nheld >= MAX_HELD) continue;
      double d = delay + jitter * (2.0 * rand() / RAND_MAX - 1.0);
      held[nheld++] = (held_t){(uint32_t)id, now + d};
      delayed++;
    }
  }
}
