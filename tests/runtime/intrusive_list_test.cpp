// detail::intrusive_list: the project's one linked list (ready queue, spawned tasks, a
// socket's operations, the epoll backend's waiting requests, the Redis reply waiters).
// Order, walking with first()/after() while nodes leave, unlinking from the middle, a node
// destroyed while linked, and moving a list with its nodes. The ready queue and the expired
// batch built on it: a node destroyed while queued keeps the ready queue's count right.
#include <cogwheel/runtime/detail/intrusive_list.hpp>
#include <cogwheel/runtime/detail/ready_queue.hpp>

#include <gtest/gtest.h>

#include <memory>
#include <vector>

namespace {

using cogwheel::detail::intrusive_list;
using cogwheel::detail::list_link;

struct node : list_link {
  explicit node(int v) : value(v) {}
  int value;
};

std::vector<int> values(intrusive_list<node>& l) {
  std::vector<int> out;
  for (node* n = l.first(); n != nullptr; n = l.after(*n)) out.push_back(n->value);
  return out;
}

TEST(intrusive_list, keeps_insertion_order_and_walks_to_the_end) {
  intrusive_list<node> l;
  EXPECT_EQ(l.first(), nullptr);
  node a{1}, b{2}, c{3};
  l.push_back(a);
  l.push_back(b);
  l.push_back(c);
  EXPECT_EQ(values(l), (std::vector<int>{1, 2, 3}));
  EXPECT_EQ(l.after(c), nullptr);  // the newest has no successor: never the sentinel
  EXPECT_EQ(&l.pop_front(), &a);
  EXPECT_FALSE(a.linked());
  EXPECT_EQ(values(l), (std::vector<int>{2, 3}));
}

TEST(intrusive_list, unlinking_from_the_middle_joins_the_neighbours) {
  intrusive_list<node> l;
  node a{1}, b{2}, c{3};
  l.push_back(a);
  l.push_back(b);
  l.push_back(c);
  b.unlink();
  EXPECT_EQ(values(l), (std::vector<int>{1, 3}));
  b.unlink();  // a no-op when not linked
  l.push_back(b);
  EXPECT_EQ(values(l), (std::vector<int>{1, 3, 2}));
}

// The epoll backend's walk: the successor is taken before the current node may leave.
TEST(intrusive_list, a_walk_survives_the_current_node_leaving) {
  intrusive_list<node> l;
  node a{1}, b{2}, c{3}, d{4};
  for (node* n : {&a, &b, &c, &d}) l.push_back(*n);
  std::vector<int> seen;
  for (node* n = l.first(); n != nullptr;) {
    node* next = l.after(*n);
    seen.push_back(n->value);
    if (n->value % 2 == 0) n->unlink();
    n = next;
  }
  EXPECT_EQ(seen, (std::vector<int>{1, 2, 3, 4}));
  EXPECT_EQ(values(l), (std::vector<int>{1, 3}));
}

TEST(intrusive_list, a_node_destroyed_while_linked_leaves_the_list) {
  intrusive_list<node> l;
  node a{1}, c{3};
  l.push_back(a);
  {
    auto b = std::make_unique<node>(2);
    l.push_back(*b);
    l.push_back(c);
  }
  EXPECT_EQ(values(l), (std::vector<int>{1, 3}));
}

TEST(intrusive_list, moving_a_list_takes_its_nodes) {
  node a{1}, b{2};
  intrusive_list<node> from;
  from.push_back(a);
  from.push_back(b);
  intrusive_list<node> to(std::move(from));
  EXPECT_TRUE(from.empty());
  EXPECT_TRUE(to.well_formed());
  EXPECT_EQ(values(to), (std::vector<int>{1, 2}));
  // A vector of lists (the epoll backend's descriptor table) relocates them on growth.
  std::vector<intrusive_list<node>> table(1);
  a.unlink();
  table[0].push_back(a);
  table.resize(64);
  EXPECT_TRUE(table[0].well_formed());
  ASSERT_NE(table[0].first(), nullptr);
  EXPECT_EQ(table[0].first()->value, 1);
  EXPECT_EQ(table[0].after(a), nullptr);
}

TEST(intrusive_list, a_destroyed_list_lets_its_nodes_go) {
  node a{1};
  {
    intrusive_list<node> l;
    l.push_back(a);
  }
  EXPECT_FALSE(a.linked());
}

// A node that went through the ready queue and then into the expired batch (which counts
// nothing) and is destroyed there does not count itself off the ready queue it left.
TEST(ready_queue, a_node_destroyed_in_the_expired_batch_leaves_the_ready_count_alone) {
  using cogwheel::detail::ready_batch;
  using cogwheel::detail::ready_node;
  using cogwheel::detail::ready_queue;
  ready_queue ready;
  ready_batch batch;
  ready_node stays;
  ready.push(stays, {});
  {
    ready_node n;
    ready.push(n, {});
    EXPECT_EQ(ready.size(), 2u);
    (void)ready.pop();  // `stays`
    ready.push(stays, {});
    (void)ready.pop();  // n
    EXPECT_EQ(ready.size(), 1u);
    batch.push(n, {});
    EXPECT_FALSE(batch.empty());
  }
  EXPECT_TRUE(batch.empty());
  EXPECT_EQ(ready.size(), 1u);
  (void)ready.pop();
  EXPECT_TRUE(ready.empty());
}

// A node destroyed while in the ready queue counts itself off.
TEST(ready_queue, a_node_destroyed_while_queued_counts_itself_off) {
  cogwheel::detail::ready_queue ready;
  {
    cogwheel::detail::ready_node n;
    ready.push(n, {});
    EXPECT_EQ(ready.size(), 1u);
  }
  EXPECT_EQ(ready.size(), 0u);
  EXPECT_TRUE(ready.empty());
}

}  // namespace
