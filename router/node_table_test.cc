// The node table's admission and discovery without live nodes: DNS names expand to one node per
// address, and nodes that do not answer are down, never healthy.
#include "router/node_table.h"

#include <gtest/gtest.h>

namespace ds41 {
namespace {

TEST(NodeTableTest, DnsNamesExpandToNodesAndSilentNodesAreDown) {
  NodeTableOptions o;
  o.poll_deadline = std::chrono::milliseconds(200);
  NodeTable t(std::make_shared<ChannelSet>(), "fp", o);
  t.Add(NodeRole::kDecoder, "dns:///localhost:1");
  t.Add(NodeRole::kEncoder, "127.0.0.1:2");
  t.PollAll();
  bool expanded = false;
  for (const NodeView& n : t.All()) {
    EXPECT_EQ(n.state, NodeState::kDown) << n.address;
    if (n.role == NodeRole::kDecoder && (n.address == "127.0.0.1:1" || n.address == "[::1]:1")) expanded = true;
  }
  EXPECT_TRUE(expanded);
  EXPECT_TRUE(t.Healthy(NodeRole::kDecoder).empty());
  EXPECT_EQ(t.Register(NodeRole::kEncoder, "dns:///x:1").code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(t.Register(NodeRole::kEncoder, "127.0.0.1:3").code(), StatusCode::kUnavailable);
}

}  // namespace
}  // namespace ds41
