/* weft_run_output.c -- cuts each rank's output into lines and writes them with a "[rank R] "
 * prefix.
 *
 * The launcher is single-threaded and writes each line with one writev() that it finishes before
 * the next, so lines of different ranks never interleave. A line longer than LINE_MAX is written
 * in LINE_MAX pieces (each its own prefixed line): one rank that never prints a newline must not
 * hold the others' output back or grow memory without bound. */
#include <errno.h>
#include <poll.h>
#include <stdlib.h>
#include <string.h>
#include <sys/uio.h>
#include <unistd.h>

#include "tools/weft_run.h"

#define LINE_MAX_BYTES (64 * 1024)
#define READ_CHUNK (16 * 1024)

/* Writes all of iov; gives up silently if the reader went away (EPIPE): the ranks must still be
 * supervised and reaped, and there is no one left to tell. */
static void write_all(int fd, struct iovec *iov, int cnt) {
  while (cnt > 0) {
    ssize_t w = writev(fd, iov, cnt);
    if (w < 0) {
      if (errno == EINTR) continue;
      if (errno == EAGAIN || errno == EWOULDBLOCK) {
        struct pollfd p = {.fd = fd, .events = POLLOUT};
        poll(&p, 1, -1);
        continue;
      }
      return;
    }
    while (cnt > 0 && (size_t)w >= iov->iov_len) {
      w -= (ssize_t)iov->iov_len;
      iov++;
      cnt--;
    }
    if (cnt > 0) {
      iov->iov_base = (char *)iov->iov_base + w;
      iov->iov_len -= (size_t)w;
    }
  }
}

/* Writes prefix + line. With a prefix, a line is always ended with '\n' so the next prefix starts
 * a line; without one, bytes pass through unchanged. */
static void emit(const wr_stream *s, const char *line, size_t len) {
  if (len == 0) return;
  int prefixed = s->prefix[0] != '\0';
  struct iovec iov[3] = {
      {.iov_base = (void *)s->prefix, .iov_len = strlen(s->prefix)},
      {.iov_base = (void *)line, .iov_len = len},
      {.iov_base = "\n", .iov_len = prefixed && line[len - 1] != '\n' ? 1 : 0},
  };
  write_all(s->dest, iov, 3);
}

void wr_stream_init(wr_stream *s, int fd, int dest, const char *prefix) {
  memset(s, 0, sizeof(*s));
  s->fd = fd;
  s->dest = dest;
  s->prefix = prefix;
}

void wr_stream_close(wr_stream *s) {
  if (s->fd < 0) return;
  emit(s, s->buf, s->len);
  close(s->fd);
  s->fd = -1;
  free(s->buf);
  s->buf = NULL;
  s->len = s->cap = 0;
}

void wr_stream_pump(wr_stream *s) {
  if (s->fd < 0) return;
  if (s->cap < s->len + READ_CHUNK) {
    /* The buffer never holds more than an unfinished line plus one chunk. */
    char *nb = realloc(s->buf, s->len + READ_CHUNK);
    if (nb == NULL) {
      emit(s, s->buf, s->len);
      s->len = 0;
      if (s->cap < READ_CHUNK) return; /* try again on the next poll */
    } else {
      s->buf = nb;
      s->cap = s->len + READ_CHUNK;
    }
  }
  ssize_t n = read(s->fd, s->buf + s->len, READ_CHUNK);
  if (n < 0 && (errno == EINTR || errno == EAGAIN)) return;
  if (n <= 0) {
    wr_stream_close(s);
    return;
  }

  size_t start = 0, scan = s->len;
  s->len += (size_t)n;
  char *nl;
  while ((nl = memchr(s->buf + scan, '\n', s->len - scan)) != NULL) {
    size_t end = (size_t)(nl - s->buf) + 1;
    emit(s, s->buf + start, end - start);
    start = scan = end;
  }
  while (s->len - start >= LINE_MAX_BYTES) {
    emit(s, s->buf + start, LINE_MAX_BYTES);
    start += LINE_MAX_BYTES;
  }
  memmove(s->buf, s->buf + start, s->len - start);
  s->len -= start;
}
