/* tree.c -- binary tree shapes, their rank labels, and the up and down ops over them. */
#include "collectives/tree.h"

#include "collectives/emit.h"

/* Size of the left subtree of a full tree of m nodes (m odd, >= 3): the largest odd number not
 * above (m-1)/2, so that both subtrees are full again. */
static int full_left(int m) {
  int h = (m - 1) / 2;
  return h % 2 ? h : h - 1;
}

static int root_pos(int lo, int m) { return m % 2 == 0 || m == 1 ? lo : lo + full_left(m); }

/* Parent and children, as positions, of position x in the shape over [0, m). */
static void locate(int m, int x, tree_node_t *n) {
  int lo = 0, parent = -1;
  for (;;) {
    int root = root_pos(lo, m);
    int llo = lo, lm = 0, rlo = 0, rm = 0;
    if (m % 2 == 0) {
      llo = lo + 1;
      lm = m - 1;
    } else if (m > 1) {
      lm = full_left(m);
      rlo = root + 1;
      rm = m - 1 - lm;
    }
    if (x == root) {
      n->parent = parent;
      n->nchildren = 0;
      if (lm) n->child[n->nchildren++] = root_pos(llo, lm);
      if (rm) n->child[n->nchildren++] = root_pos(rlo, rm);
      return;
    }
    parent = root;
    if (x >= llo && x < llo + lm) {
      lo = llo;
      m = lm;
    } else {
      lo = rlo;
      m = rm;
    }
  }
}

/* Locates position `pos`, then turns positions into ranks: rank = (position + shift) mod p, or
 * p - 1 - position when mirrored. */
static void place(int p, int pos, int shift, int mirror, tree_node_t *n) {
  locate(p, pos, n);
  int *ids[3] = {&n->parent, &n->child[0], &n->child[1]};
  for (int i = 0; i < 1 + n->nchildren; i++) {
    if (*ids[i] < 0) continue;
    *ids[i] = mirror ? p - 1 - *ids[i] : (*ids[i] + shift) % p;
  }
}

void tree_single(int nranks, int root, int rank, tree_node_t *node) {
  /* Rotated so that the shape's root lands on `root`. */
  int shift = (root - root_pos(0, nranks) + nranks) % nranks;
  place(nranks, (rank - shift + nranks) % nranks, shift, 0, node);
}

void tree_double(int nranks, int which, int rank, tree_node_t *node) {
  if (nranks % 2 == 0) {
    /* Interior at even positions: tree 0 as laid out, tree 1 mirrored onto the odd ranks. */
    if (which == 0)
      place(nranks, rank, 0, 0, node);
    else
      place(nranks, nranks - 1 - rank, 0, 1, node);
  } else {
    /* Interior at odd positions: tree 1 as laid out, tree 0 shifted by one onto the even ranks
     * 2..p-1; rank 0 is a leaf in both. */
    if (which == 0)
      place(nranks, (rank - 1 + nranks) % nranks, 1, 0, node);
    else
      place(nranks, rank, 0, 0, node);
  }
}

static int depth(int m) {
  if (m <= 1) return 0;
  if (m % 2 == 0) return 1 + depth(m - 1);
  int l = depth(full_left(m)), r = depth(m - 1 - full_left(m));
  return 1 + (l > r ? l : r);
}

int tree_depth(int nranks) { return depth(nranks); }

int tree_emit_up(schedule_t *s, const tree_node_t *t, size_t off, size_t count, sched_buf_t acc,
                 int fuse, int *ready) {
  int prev = -1;
  for (int c = 0; c < t->nchildren; c++) {
    /* The second child's fold reads what the first one's wrote, slice by slice. Below the root
     * the last fold goes straight into the parent's slot (a fused step, schedule.h): acc never
     * holds the finished partial, which only the parent needs. */
    int to_parent = fuse && t->parent >= 0 && c == t->nchildren - 1;
    sched_op_t op = {.kind = to_parent ? SCHED_RECV_REDUCE_SEND : SCHED_RECV_REDUCE,
                     .peer = t->child[c],
                     .buf = acc,
                     .offset = off,
                     .count = count,
                     .src_buf = c == 0 ? SCHED_SENDBUF : acc,
                     .src_offset = off,
                     .dep = prev,
                     .final = t->parent < 0 && c == t->nchildren - 1};
    if ((prev = emit(s, op)) == EMIT_OOM) return -1;
  }
  if (t->parent >= 0) {
    sched_op_t op = {.kind = SCHED_SEND,
                     .peer = t->parent,
                     .buf = t->nchildren ? acc : SCHED_SENDBUF,
                     .offset = off,
                     .count = count,
                     .dep = prev};
    int folded = prev;
    if ((prev = emit(s, op)) == EMIT_OOM) return -1;
    if (t->nchildren) emit_link(s, folded, prev);
  }
  *ready = prev;
  return 0;
}

int tree_emit_down(schedule_t *s, const tree_node_t *t, size_t off, size_t count,
                   sched_buf_t root_src, int root_dep, int recv_dep, int fuse) {
  sched_buf_t src = root_src;
  int dep = root_dep;
  /* What arrives is kept and forwarded to the first child in one read (recv-copy-send); at the
   * root, a final fold that the down phase waits on also writes the first child's slot
   * (recv-reduce-copy-send, as a ring's last reduce-scatter step). Other children read buf. */
  int feeder = -1;
  if (fuse && t->parent < 0 && root_dep >= 0 && s->ops[root_dep].kind == SCHED_RECV_REDUCE &&
      s->ops[root_dep].buf == root_src && s->ops[root_dep].offset == off &&
      s->ops[root_dep].count == count)
    feeder = root_dep;
  if (t->parent >= 0) {
    sched_op_t op = {.kind = fuse && t->nchildren ? SCHED_RECV_COPY_SEND : SCHED_RECV_COPY,
                     .peer = t->parent,
                     .buf = SCHED_RECVBUF,
                     .offset = off,
                     .count = count,
                     .dep = recv_dep,
                     .step = 1};
    if ((dep = emit(s, op)) == EMIT_OOM) return -1;
    src = SCHED_RECVBUF;
    feeder = dep;
  }
  for (int c = 0; c < t->nchildren; c++) {
    sched_op_t op = {.kind = SCHED_SEND,
                     .peer = t->child[c],
                     .buf = src,
                     .offset = off,
                     .count = count,
                     .dep = dep,
                     .step = 1};
    int sent = emit(s, op);
    if (sent == EMIT_OOM) return -1;
    if (c > 0 || feeder < 0 || sent < 0) continue;
    if (s->ops[feeder].kind == SCHED_RECV_REDUCE) s->ops[feeder].kind = SCHED_RECV_REDUCE_COPY_SEND;
    emit_link(s, feeder, sent);
  }
  return 0;
}
