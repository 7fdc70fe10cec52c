// tree_test.cc -- the binary trees: well formed from any root, shallow, and the two trees of the
// double tree complementary (no rank interior in both).
#include <gtest/gtest.h>

#include <vector>

extern "C" {
#include "collectives/tree.h"
}

namespace {

// Checks that `nodes` form one tree rooted at `root` over all ranks; returns its depth.
int CheckTree(const std::vector<tree_node_t>& nodes, int root) {
  int p = (int)nodes.size();
  for (int r = 0; r < p; r++) {
    const tree_node_t& t = nodes[r];
    EXPECT_EQ(t.parent < 0, r == root) << "rank " << r;
    EXPECT_LE(t.nchildren, 2);
    for (int c = 0; c < t.nchildren; c++) {
      EXPECT_TRUE(t.child[c] >= 0 && t.child[c] < p);
      if (t.child[c] >= 0 && t.child[c] < p) {
        EXPECT_EQ(nodes[t.child[c]].parent, r);
      }
    }
    if (t.parent >= 0) {
      const tree_node_t& up = nodes[t.parent];
      int found = 0;
      for (int c = 0; c < up.nchildren; c++) found += up.child[c] == r;
      EXPECT_EQ(found, 1) << "rank " << r << " is not a child of its parent " << t.parent;
    }
  }
  int depth = 0;
  for (int r = 0; r < p; r++) {
    int d = 0;
    for (int x = r; nodes[x].parent >= 0 && d <= p; x = nodes[x].parent) d++;
    EXPECT_LE(d, p - 1) << "rank " << r << " is on a cycle";
    depth = d > depth ? d : depth;
  }
  return depth;
}

int CeilLog2(int p) {
  int l = 0;
  while ((1 << l) < p) l++;
  return l;
}

TEST(Tree, SingleTreeFromEveryRoot) {
  for (int p = 1; p <= 40; p++)
    for (int root = 0; root < p; root++) {
      std::vector<tree_node_t> nodes(p);
      for (int r = 0; r < p; r++) tree_single(p, root, r, &nodes[r]);
      int depth = CheckTree(nodes, root);
      EXPECT_EQ(depth, tree_depth(p)) << "p " << p;
      EXPECT_LE(depth, CeilLog2(p + 1) + 1) << "p " << p;
    }
}

TEST(Tree, DoubleTreesAreComplementary) {
  for (int p = 1; p <= 40; p++) {
    std::vector<tree_node_t> t[2] = {std::vector<tree_node_t>(p), std::vector<tree_node_t>(p)};
    for (int w = 0; w < 2; w++) {
      int root = -1;
      for (int r = 0; r < p; r++) {
        tree_double(p, w, r, &t[w][r]);
        if (t[w][r].parent < 0) root = r;
      }
      ASSERT_GE(root, 0);
      EXPECT_LE(CheckTree(t[w], root), tree_depth(p));
    }
    for (int r = 0; r < p; r++)
      EXPECT_FALSE(t[0][r].nchildren > 0 && t[1][r].nchildren > 0)
          << "p " << p << ": rank " << r << " is interior in both trees";
  }
}

}  // namespace
