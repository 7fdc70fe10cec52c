/* tree.h -- internal: the binary trees of the tree algorithms and the ops that move a range of
 * the buffer up (reduce) and down (broadcast) one of them.
 *
 * Shapes are laid out over in-order positions 0..m-1. For odd m the tree is full (every interior
 * node has two children), and an in-order walk of a full tree alternates leaf, interior, leaf,
 * ...: the interior nodes sit exactly at the odd positions. For even m, position 0 is a root with
 * one child, the full tree over positions 1..m-1, so the interior nodes sit at the even ones.
 * That parity is what makes two complementary trees (Sanders, Speck & Traeff 2009; NCCL's double
 * binary tree) easy: label one tree so its interior nodes are the ranks of one parity and the
 * other so they are the ranks of the other, and every rank is interior in at most one tree,
 * which halves what any rank must send. Depth is about log2(p) either way. */
#ifndef WEFT_COLLECTIVES_TREE_H_
#define WEFT_COLLECTIVES_TREE_H_

#include "collectives/schedule.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct {
  int parent; /* -1 at the root */
  int nchildren;
  int child[2];
} tree_node_t;

/* This rank's place in the tree rooted at `root`. */
void tree_single(int nranks, int root, int rank, tree_node_t *node);
/* This rank's place in tree `which` (0 or 1) of the double tree. */
void tree_double(int nranks, int which, int rank, tree_node_t *node);
/* Edges on the longest root-to-leaf path of the trees over nranks ranks. */
int tree_depth(int nranks);

/* `fuse`: a fold that only feeds the send to the parent, a receive forwarded to the first child,
 * and the root's final fold that the down phase forwards run as fused steps (schedule.h). Only
 * where each link carries one tree's steps in one direction: a fused step waits for its send's
 * stream, so a stream that first carries the other tree's steps could close a cycle (two trees
 * over two ranks: each rank's fold waits behind its own leaf send, which waits for the other
 * rank's fold), as a ring without rounds would.
 *
 * Reduction toward the root over elements [off, off + count): the children's partial results
 * are folded into `acc` (sendbuf op child 0 op child 1; finalized at the root), and a non-root
 * sends acc, or its sendbuf if it is a leaf, to its parent. *ready gets the op after which this
 * rank's part is done: the send to the parent, or at the root the last fold (-1: nothing to wait
 * for). Returns 0, or -1 when out of memory. */
int tree_emit_up(schedule_t *s, const tree_node_t *t, size_t off, size_t count, sched_buf_t acc,
                 int fuse, int *ready);

/* Broadcast from the root over elements [off, off + count): a non-root receives into recvbuf
 * once op `recv_dep` allows it, and every rank forwards slice by slice to its children, the root
 * from `root_src` once op `root_dep` allows it. Returns 0, or -1 when out of memory. */
int tree_emit_down(schedule_t *s, const tree_node_t *t, size_t off, size_t count,
                   sched_buf_t root_src, int root_dep, int recv_dep, int fuse);

#ifdef __cplusplus
}
#endif

#endif /* WEFT_COLLECTIVES_TREE_H_ */
